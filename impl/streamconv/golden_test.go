package streamconv

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
)

var update = flag.Bool("update", false, "rewrite the golden client transcripts under testdata/golden")

// TestDecoders checks that each recorded upstream stream decodes to what it says, in the
// neutral order: one Start first, deltas, one Stop, usage; or an error that ends it.
func TestDecoders(t *testing.T) {
	for _, up := range formats {
		for _, sc := range scenarios {
			name := up.short + "_" + sc
			t.Run(name, func(t *testing.T) {
				evs, done := decodeAll(t, up.f, readFile(t, filepath.Join("testdata", "upstream", name+".sse")))
				if !done && !expected[name].HasError {
					t.Errorf("no terminal event")
				}
				checkNeutralOrder(t, evs)
				got := accumulate(evs)
				want := expected[name]
				compareResult(t, "decoded", "", Meta{}, got, want)
				if want.HasError && got.ErrType != want.ErrType {
					t.Errorf("error type %q, want %q", got.ErrType, want.ErrType)
				}
			})
		}
	}
}

// checkNeutralOrder asserts the order llm.EventKind documents.
func checkNeutralOrder(t *testing.T, evs []llm.Event) {
	t.Helper()
	if len(evs) == 0 || evs[0].Kind != llm.EventStart {
		t.Fatalf("first event is not Start: %+v", evs)
	}
	stops, started := 0, map[int]bool{}
	for i, e := range evs {
		switch e.Kind {
		case llm.EventStart:
			if i != 0 {
				t.Errorf("second Start at %d", i)
			}
		case llm.EventTextDelta, llm.EventToolCallStart, llm.EventToolCallDelta:
			if stops > 0 {
				t.Errorf("content after Stop: %+v", e)
			}
			if e.Kind == llm.EventToolCallStart {
				if e.ToolIndex != len(started) {
					t.Errorf("tool index %d, want %d", e.ToolIndex, len(started))
				}
				started[e.ToolIndex] = true
			}
			if e.Kind == llm.EventToolCallDelta && !started[e.ToolIndex] {
				t.Errorf("delta before start of tool %d", e.ToolIndex)
			}
		case llm.EventStop:
			stops++
		case llm.EventError:
			if i != len(evs)-1 {
				t.Errorf("events after Error")
			}
		}
	}
	if stops > 1 {
		t.Errorf("%d Stop events", stops)
	}
}

// TestGolden pipes every recorded upstream stream to every client format, compares the
// transcript with its golden file, checks the client format's rules, and checks that the
// client gets what the upstream sent.
func TestGolden(t *testing.T) {
	for _, up := range formats {
		for _, sc := range scenarios {
			name := up.short + "_" + sc
			raw := readFile(t, filepath.Join("testdata", "upstream", name+".sse"))
			for _, client := range formats {
				t.Run(name+".to_"+client.short, func(t *testing.T) {
					meta := metaFor(client.f)
					got, usage := pipe(t, up.f, client.f, meta, raw)
					path := goldenPath(up.short, sc, client.short)
					if *update {
						if err := os.WriteFile(path, got, 0o644); err != nil {
							t.Fatal(err)
						}
					} else if want := readFile(t, path); !bytes.Equal(got, want) {
						t.Errorf("transcript differs from %s (run with -update to accept):\n%s", path, firstDiff(want, got))
					}
					res := checkClient(t, client.f, got, meta)
					compareResult(t, "client", client.f, meta, res, expected[name])
					if !expected[name].HasError && usage != expected[name].Usage {
						t.Errorf("metered usage %+v, want %+v", usage, expected[name].Usage)
					}
				})
			}
		}
	}
}

// firstDiff shows the first line where two transcripts differ.
func firstDiff(want, got []byte) string {
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return "line " + itoa(i+1) + "\nwant: " + w + "\n got: " + g
		}
	}
	return "(equal lines)"
}

func itoa(i int) string { return string(appendInt(nil, int64(i))) }
