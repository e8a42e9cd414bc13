package sealedid_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/sealedid"
)

func seal(t *testing.T, b byte) *sealedid.Seal {
	t.Helper()
	s, err := sealedid.New(bytes.Repeat([]byte{b}, sealedid.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPairRoundTrips: a token opens to its pair, under the same key only, and two neighbouring
// ids give tokens that share nothing a reader could count with.
func TestPairRoundTrips(t *testing.T) {
	s, other := seal(t, 1), seal(t, 2)
	for _, p := range [][2]int64{{0, 1}, {1764777600000000, 41}, {-1, math.MaxInt64}, {math.MinInt64, 0}} {
		tok := s.Pair(p[0], p[1])
		if len(tok) != 22 || strings.ContainsAny(tok, "+/=") {
			t.Errorf("token %q: want 22 characters of unpadded base64url", tok)
		}
		if a, b, ok := s.OpenPair(tok); !ok || a != p[0] || b != p[1] {
			t.Errorf("OpenPair(Pair(%d, %d)) = %d, %d, %v", p[0], p[1], a, b, ok)
		}
		if a, b, ok := other.OpenPair(tok); ok && a == p[0] && b == p[1] {
			t.Errorf("a token opened under another key")
		}
		if strings.Contains(tok, strconv.FormatInt(p[1], 10)) && p[1] > 9 {
			t.Errorf("token %q shows the id %d", tok, p[1])
		}
	}
	t1, t2 := s.Pair(1764777600000000, 1000), s.Pair(1764777600000000, 1001)
	same := 0
	for i := range t1 {
		if t1[i] == t2[i] {
			same++
		}
	}
	if same > 6 {
		t.Errorf("tokens of neighbouring ids share %d of 22 characters: %s %s", same, t1, t2)
	}
}

// TestOpenPairRefusesOtherShapes: only 22 characters of unpadded base64url open.
func TestOpenPairRefusesOtherShapes(t *testing.T) {
	s := seal(t, 1)
	good := s.Pair(5, 6)
	for _, tok := range []string{"", "1764777600000000-41", good[:21], good + "A", good[:21] + "=", good[:21] + "+", strings.Repeat("A", 21) + "B"} {
		if _, _, ok := s.OpenPair(tok); ok {
			t.Errorf("OpenPair(%q) opened", tok)
		}
	}
}

// TestLoaderRetriesAFailedRead: a failed key read is returned and tried again; once read the key
// is kept.
func TestLoaderRetriesAFailedRead(t *testing.T) {
	calls := 0
	l := sealedid.NewLoader(func(context.Context) ([]byte, error) {
		calls++
		if calls == 1 {
			return nil, errors.New("database away")
		}
		return bytes.Repeat([]byte{7}, sealedid.KeySize), nil
	})
	if _, err := l.Seal(context.Background()); err == nil {
		t.Fatal("the failed read was not returned")
	}
	s1, err := l.Seal(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := l.Seal(context.Background())
	if s1 != s2 || calls != 2 {
		t.Errorf("the key was read %d times; want 2 (one failure, one success)", calls)
	}
	if _, err := sealedid.New(make([]byte, 16)); err == nil {
		t.Error("a 16-byte key was taken")
	}
}

// TestTaggedOpensOnlyAsItsKind: a tagged token opens to its id with its own tag only; a token
// of another kind, of a non-positive id, or of no shape opens to nothing.
func TestTaggedOpensOnlyAsItsKind(t *testing.T) {
	s := seal(t, 3)
	const kind, other = 0x7467_7465_7374_6b31, 0x7467_7465_7374_6b32
	if id, ok := s.OpenTagged(s.Tagged(42, kind), kind); !ok || id != 42 {
		t.Fatalf("the token of 42 opened to %d, %v", id, ok)
	}
	for name, token := range map[string]string{"another kind": s.Tagged(42, other), "id 0": s.Tagged(0, kind),
		"a negative id": s.Tagged(-5, kind), "no shape": "not-a-token"} {
		if id, ok := s.OpenTagged(token, kind); ok {
			t.Errorf("%s opened to %d", name, id)
		}
	}
}
