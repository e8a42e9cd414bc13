package exchange

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadAnswer: an answer is read whole with and without an announced length (in small
// reads, as a chunked body arrives), appended to what the buffer holds, and refused when it
// is longer than announced.
func TestReadAnswer(t *testing.T) {
	body := `{"id":"x","choices":[]}`
	res := func(length int64, r io.Reader) *http.Response {
		return &http.Response{ContentLength: length, Body: io.NopCloser(r)}
	}
	for name, c := range map[string]*http.Response{
		"announced": res(int64(len(body)), strings.NewReader(body)),
		"unknown":   res(-1, iotest.OneByteReader(strings.NewReader(body))),
		"half":      res(-1, iotest.HalfReader(strings.NewReader(strings.Repeat(body, 500)))),
	} {
		want := body
		if name == "half" {
			want = strings.Repeat(body, 500)
		}
		got, err := readAnswer(c, []byte("old"))
		if err != nil || string(got) != "old"+want {
			t.Errorf("%s: %d bytes, %v", name, len(got), err)
		}
	}
	if _, err := readAnswer(res(5, strings.NewReader(body)), nil); err == nil {
		t.Error("an answer longer than its Content-Length was accepted")
	}
	if _, err := readAnswer(res(int64(len(body)+5), strings.NewReader(body)), nil); err == nil {
		t.Error("an answer shorter than its Content-Length was accepted")
	}
}
