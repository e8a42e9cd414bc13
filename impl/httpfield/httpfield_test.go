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

// FuzzIsToken holds IsToken to httpguts.ValidHeaderFieldName, net/http's rule for field names,
// on arbitrary bytes.
func FuzzIsToken(f *testing.F) {
	for _, s := range []string{"", "Content-Length", "X-A", "a b", "é", "~!#$%&'*+.^_`|", "\x00", "A:"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := IsToken(b), httpguts.ValidHeaderFieldName(string(b)); got != want {
			t.Fatalf("%q: %v, want %v", b, got, want)
		}
	})
}

// FuzzValidValueByte holds ValidValueByte, applied to every byte of a value, to
// httpguts.ValidHeaderFieldValue, net/http's rule for field values, on arbitrary bytes.
func FuzzValidValueByte(f *testing.F) {
	for _, s := range []string{"", "text/plain; charset=utf-8", "a\tb", "a\rb", "a\nb", "\x7f", "caf\xc3\xa9 \xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := true
		for _, c := range b {
			got = got && ValidValueByte(c)
		}
		if want := httpguts.ValidHeaderFieldValue(string(b)); got != want {
			t.Fatalf("%q: %v, want %v", b, got, want)
		}
	})
}

// FuzzParseContentLength holds ParseContentLength to strconv.ParseUint(v, 10, 63), the parse
// net/http applies to a Content-Length, on arbitrary strings: whatever it accepts, net/http
// accepts with the same value; it refuses only what net/http refuses, or what is longer than
// 18 digits (left to net/http by its callers).
func FuzzParseContentLength(f *testing.F) {
	for _, s := range []string{"", "0", "007", "123456789012345678", "1234567890123456789", "9223372036854775807", "9223372036854775808", "-1", "+1", " 1", "1 ", "1_0", "0x10", "１"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, ok := ParseContentLength(v)
		want, err := strconv.ParseUint(v, 10, 63)
		switch {
		case ok && (err != nil || uint64(got) != want):
			t.Fatalf("%q: accepted as %d, net/http says %d, %v", v, got, want, err)
		case !ok && err == nil && len(v) <= 18:
			t.Fatalf("%q: refused, net/http accepts %d", v, want)
		case ok && got < 0:
			t.Fatalf("%q: negative %d", v, got)
		}
	})
}
