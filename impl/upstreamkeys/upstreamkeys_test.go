package upstreamkeys

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestSealOpen: a sealed key opens for its account and provider only, under its secret only,
// and its seal does not hold it in the clear.
func TestSealOpen(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, 32)
	s, err := New(secret)
	if err != nil {
		t.Fatal(err)
	}
	alpha, beta := uuid.New(), uuid.New()
	const key = "sk-ant-api03-alpha-own-key-0123456789"
	sealed, err := s.Seal(alpha, "anthropic", key)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("alpha-own")) {
		t.Fatal("the seal holds the key in the clear")
	}
	if got, err := s.Open(alpha, "anthropic", sealed); err != nil || got != key {
		t.Fatalf("Open = %q, %v", got, err)
	}
	other, _ := New(bytes.Repeat([]byte{8}, 32))
	for name, open := range map[string]func() (string, error){
		"another account":  func() (string, error) { return s.Open(beta, "anthropic", sealed) },
		"another provider": func() (string, error) { return s.Open(alpha, "openai", sealed) },
		"another secret":   func() (string, error) { return other.Open(alpha, "anthropic", sealed) },
		"damaged":          func() (string, error) { return s.Open(alpha, "anthropic", append([]byte{}, sealed[:len(sealed)-1]...)) },
		"empty":            func() (string, error) { return s.Open(alpha, "anthropic", nil) },
	} {
		if got, err := open(); err != ErrNotOpened || got != "" {
			t.Errorf("%s: Open = %q, %v; want ErrNotOpened", name, got, err)
		}
	}
	again, _ := s.Seal(alpha, "anthropic", key)
	if bytes.Equal(again, sealed) {
		t.Error("two seals of one key are equal: the nonce is not fresh")
	}
}

// TestCheckAndHint: a key that cannot go in a header is refused without being quoted; the hint
// shows its last four characters only.
func TestCheckAndHint(t *testing.T) {
	for _, bad := range []string{"", "sk-with space", "sk-line\r\nX-Injected: 1", "sk-\x00", strings.Repeat("k", MaxLen+1), "sk-é"} {
		err := Check(bad)
		if err == nil {
			t.Errorf("Check(%q) = nil", bad)
		} else if bad != "" && strings.Contains(err.Error(), bad) {
			t.Errorf("Check's error quotes the key: %v", err)
		}
	}
	if err := Check("sk-proj-abcDEF_123-xyz"); err != nil {
		t.Errorf("a good key: %v", err)
	}
	if h := Hint("sk-proj-abcDEF_123-wxyz"); h != "…wxyz" {
		t.Errorf("Hint = %q", h)
	}
	if h := Hint("short"); h != "…" {
		t.Errorf("Hint of a short key = %q", h)
	}
}
