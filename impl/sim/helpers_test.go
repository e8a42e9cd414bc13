package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// newServer starts a simulator behind an httptest server.
func newServer(t *testing.T, o Options) (*Simulator, *httptest.Server) {
	t.Helper()
	s := New(o)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

// post sends body (a string or a value to marshal) to path with the given header pairs.
func post(t *testing.T, srv *httptest.Server, path string, body any, header ...string) *http.Response {
	t.Helper()
	resp, err := tryPost(srv, path, body, header...)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

func tryPost(srv *httptest.Server, path string, body any, header ...string) (*http.Response, error) {
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return srv.Client().Do(req)
}

// readAll reads and closes a response body.
func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return b
}

// decode unmarshals a JSON body into a generic map.
func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return m
}

// event is one parsed server-sent event.
type event struct {
	Name string // the event: field, "" when absent
	Data string
	Raw  string // the event's bytes, framing included
}

// JSON decodes the event's data.
func (e event) JSON(t *testing.T) map[string]any {
	t.Helper()
	return decode(t, []byte(e.Data))
}

// parseSSE reads events strictly: every line is "event: x" or "data: y" with LF endings, and
// every event ends with a blank line. It returns the events read and the error that ended the
// stream (nil at a clean EOF between events).
func parseSSE(t *testing.T, r io.Reader) ([]event, error) {
	t.Helper()
	br := bufio.NewReader(r)
	var evs []event
	var cur event
	var raw strings.Builder
	pending := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				if line != "" || pending {
					return evs, io.ErrUnexpectedEOF
				}
				return evs, nil
			}
			return evs, err
		}
		raw.WriteString(line)
		line = strings.TrimSuffix(line, "\n")
		if strings.Contains(line, "\r") {
			t.Errorf("carriage return in SSE line %q", line)
		}
		if line == "" {
			if !pending {
				t.Errorf("empty event (stray blank line)")
				continue
			}
			cur.Raw = raw.String()
			evs = append(evs, cur)
			cur, pending = event{}, false
			raw.Reset()
			continue
		}
		field, value, ok := strings.Cut(line, ": ")
		if !ok {
			t.Errorf("malformed SSE line %q", line)
			continue
		}
		switch field {
		case "event":
			if cur.Name != "" || cur.Data != "" {
				t.Errorf("event: line out of place in %q", raw.String())
			}
			cur.Name = value
		case "data":
			if cur.Data != "" {
				t.Errorf("multi-line data in %q", raw.String())
			}
			cur.Data = value
		default:
			t.Errorf("unexpected SSE field %q", field)
		}
		pending = true
	}
}

// stream posts a streaming request and parses the whole stream, which must end cleanly.
func stream(t *testing.T, srv *httptest.Server, path string, body any, header ...string) (*http.Response, []event) {
	t.Helper()
	resp := post(t, srv, path, body, header...)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q", ct)
	}
	evs, err := parseSSE(t, resp.Body)
	if err != nil {
		t.Fatalf("stream ended with %v after %d events", err, len(evs))
	}
	return resp, evs
}

var (
	idPattern   = regexp.MustCompile(`"(chatcmpl-|resp_|msg_|fc_|call_|toolu_|srvtoolu_|ws_|req_)[A-Za-z0-9]{8,}"`)
	timePattern = regexp.MustCompile(`"(created|created_at)":[0-9]+`)
)

// normalise replaces ids and timestamps with fixed values.
func normalise(b []byte) []byte {
	b = idPattern.ReplaceAll(b, []byte(`"${1}ID"`))
	return timePattern.ReplaceAll(b, []byte(`"${1}":0`))
}

// golden compares got (normalised) with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	got = normalise(got)
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run go test -update to accept):\n got: %s\nwant: %s", name, got, want)
	}
}

// path returns the value at a dotted path of a decoded JSON value (array indexes as numbers).
func path(t *testing.T, v any, p string) any {
	t.Helper()
	cur := v
	for _, k := range strings.Split(p, ".") {
		switch c := cur.(type) {
		case map[string]any:
			var ok bool
			if cur, ok = c[k]; !ok {
				t.Fatalf("no key %q in %v (path %s)", k, c, p)
			}
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(c) {
				t.Fatalf("no index %q in array of %d (path %s)", k, len(c), p)
			}
			cur = c[i]
		default:
			t.Fatalf("cannot index %T with %q (path %s)", cur, k, p)
		}
	}
	return cur
}

// has reports whether the decoded object m has key k.
func has(m map[string]any, k string) bool { _, ok := m[k]; return ok }

// keys asserts that m has exactly the keys want.
func keys(t *testing.T, what string, m any, want ...string) {
	t.Helper()
	obj, ok := m.(map[string]any)
	if !ok {
		t.Fatalf("%s: not an object: %v", what, m)
	}
	if len(obj) != len(want) {
		t.Errorf("%s: keys %v, want %v", what, sortedKeys(obj), want)
	}
	for _, k := range want {
		if !has(obj, k) {
			t.Errorf("%s: missing key %q in %v", what, k, sortedKeys(obj))
		}
	}
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// num returns a decoded JSON number as an int.
func num(t *testing.T, v any) int {
	t.Helper()
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("not a number: %#v", v)
	}
	return int(f)
}

// words counts the words of s.
func words(s string) int { return len(strings.Fields(s)) }
