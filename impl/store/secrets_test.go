package store_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

// TestSecretIsSharedAndKept: replicas asking for a secret at the same moment on one database
// agree on one, a later process reads the same bytes, and two names have two secrets.
func TestSecretIsSharedAndKept(t *testing.T) {
	ctx := context.Background()
	url := pgtest.ConnString(t)
	var replicas []*store.Store
	for range 4 {
		replicas = append(replicas, openStoreAt(t, url))
	}
	got := make([][]byte, len(replicas))
	var wg sync.WaitGroup
	for i, st := range replicas {
		wg.Go(func() {
			s, err := st.Secret(ctx, "sealed_ids")
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		})
	}
	wg.Wait()
	for i, s := range got {
		if len(s) != store.SecretSize || !bytes.Equal(s, got[0]) {
			t.Fatalf("replica %d got %x, replica 0 %x", i, s, got[0])
		}
	}
	if bytes.Equal(got[0], make([]byte, store.SecretSize)) {
		t.Fatal("the secret is all zeros")
	}
	later := openStoreAt(t, url)
	if s, err := later.Secret(ctx, "sealed_ids"); err != nil || !bytes.Equal(s, got[0]) {
		t.Errorf("a later process read %x, %v", s, err)
	}
	if other, err := later.Secret(ctx, "another"); err != nil || bytes.Equal(other, got[0]) {
		t.Errorf("a second name: %x, %v", other, err)
	}
}
