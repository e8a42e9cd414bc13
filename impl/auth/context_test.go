package auth

import (
	"context"
	"testing"

	"github.com/google/uuid"
)

// TestPrincipalInContext: a caller is found whether WithPrincipal carried it or a Slot was
// set, and not before the Slot is set.
func TestPrincipalInContext(t *testing.T) {
	p := Principal{AccountID: uuid.New(), KeyID: uuid.New(), RPMLimit: 7}
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("a caller in an empty context")
	}
	if got, ok := FromContext(WithPrincipal(context.Background(), p)); !ok || got != p {
		t.Fatalf("WithPrincipal: %+v %v", got, ok)
	}
	ctx, slot := WithSlot(context.Background())
	if _, ok := FromContext(ctx); ok {
		t.Fatal("a caller before the slot was set")
	}
	if SlotFrom(ctx) != slot || SlotFrom(context.Background()) != nil {
		t.Fatal("SlotFrom")
	}
	slot.Set(p)
	if got, ok := FromContext(ctx); !ok || got != p {
		t.Fatalf("slot: %+v %v", got, ok)
	}
}
