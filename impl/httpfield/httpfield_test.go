package httpfield

import (
	"strconv"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// TestIsToken agrees with httpguts on every byte, and refuses the empty name.
func TestIsToken(t *testing.T) {
	if IsToken(nil) {
		t.Error("the empty name is a token")
	}
	for c := 0; c < 256; c++ {
		if got, want := IsToken([]byte{byte(c)}), c < 128 && httpguts.IsTokenRune(rune(c)); got != want {
			t.Errorf("byte %#x: %v, want %v", c, got, want)
		}
	}
}

// TestValidValueByte agrees with httpguts.ValidHeaderFieldValue on every single byte.
func TestValidValueByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		if got, want := ValidValueByte(byte(c)), httpguts.ValidHeaderFieldValue(string([]byte{byte(c)})); got != want {
			t.Errorf("byte %#x: %v, want %v", c, got, want)
		}
	}
}

// TestParseContentLength accepts what strconv.ParseUint(v, 10, 63) accepts, up to 18 digits.
func TestParseContentLength(t *testing.T) {
	for _, v := range []string{"", "0", "7", "00012", "123456789012345678", "1234567890123456789", "-1", "+1", " 1", "1 ", "1a", "0x10"} {
		got, ok := ParseContentLength(v)
		want, err := strconv.ParseUint(v, 10, 63)
		wantOK := err == nil && len(v) <= 18
		if ok != wantOK || ok && uint64(got) != want {
			t.Errorf("%q: %d %v, want %d %v", v, got, ok, want, wantOK)
		}
	}
}
