package streamconv

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// FuzzTranslateStream feeds an upstream stream of any shape (the recorded upstream streams
// mutated) through the decoder of its format and the encoders of all three client formats, as
// the gateway does with an upstream it does not control. Whatever the upstream sends, nothing
// panics, every event written to a client carries valid JSON (or chat's [DONE]), every
// client stream ends with its format's terminal event, and the three encoders meter the same
// usage: the bill does not depend on the client's format.
func FuzzTranslateStream(f *testing.F) {
	for i, up := range formats {
		for _, sc := range scenarios {
			b, err := os.ReadFile(filepath.Join("testdata", "upstream", up.short+"_"+sc+".sse"))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(i), b)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, stream []byte) {
		up := formats[int(which)%len(formats)].f
		dec := NewDecoder(up)
		encs := make([]Encoder, len(formats))
		outs := make([][]sse.Event, len(formats))
		for i, c := range formats {
			encs[i] = NewEncoder(c.f, metaFor(c.f))
		}
		last := make([]string, len(formats))
		check := func(client llm.Format, evs []sse.Event) {
			for _, ev := range evs {
				checkClientEvent(t, client, ev)
				last[formatIndex(client)] = ev.Name + " " + string(ev.Data)
			}
		}
		r := sse.NewReader(bytes.NewReader(stream))
		var neutral []llm.Event
		ended := false
		for !ended {
			ev, err := r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("reading the fuzzed stream from memory: %v", err)
				}
				for i, c := range formats {
					outs[i] = encs[i].Fail("upstream_error", "the upstream stream ended early", outs[i][:0])
					check(c.f, outs[i])
				}
				break
			}
			var done bool
			neutral, done, err = dec.Decode(ev, neutral[:0])
			if err != nil {
				for i, c := range formats {
					outs[i] = encs[i].Fail("upstream_error", err.Error(), outs[i][:0])
					check(c.f, outs[i])
				}
				break
			}
			for _, ne := range neutral {
				for i, c := range formats {
					outs[i] = encs[i].Encode(ne, outs[i][:0])
					check(c.f, outs[i])
				}
			}
			if done {
				for i, c := range formats {
					outs[i] = encs[i].Finish(outs[i][:0])
					check(c.f, outs[i])
				}
				ended = true
			}
		}
		// A stream that has ended emits nothing more, whatever it is asked.
		for i, c := range formats {
			if !isTerminal(c.f, last[i]) {
				t.Errorf("%s: the client stream ends with %q, not its format's terminal event", c.short, last[i])
			}
			if evs := encs[i].Finish(outs[i][:0]); len(evs) > 0 {
				t.Errorf("%s: Finish after the end wrote %d more events, the first %q %s", c.short, len(evs), evs[0].Name, evs[0].Data)
			}
		}
		first := encs[0].Usage()
		for i, c := range formats[1:] {
			if u := encs[i+1].Usage(); u != first {
				t.Errorf("usage metered for a %s client %+v, for a %s client %+v", c.short, u, formats[0].short, first)
			}
		}
	})
}

// checkClientEvent fails the test when an event written to a client of format client is not
// what its SDK can parse: JSON data (chat's [DONE] aside) whose type, where the format names
// the event, is the event's name.
func checkClientEvent(t *testing.T, client llm.Format, ev sse.Event) {
	t.Helper()
	if client == llm.FormatChat && string(ev.Data) == "[DONE]" {
		return
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(ev.Data, &obj); err != nil {
		t.Fatalf("%s client event %q carries data that is not a JSON object (%v): %s", client, ev.Name, err, ev.Data)
	}
	if client == llm.FormatChat {
		return
	}
	var typ string
	if err := json.Unmarshal(obj["type"], &typ); err != nil || typ != ev.Name {
		t.Fatalf("%s client event %q has type %s: %s", client, ev.Name, obj["type"], ev.Data)
	}
}

// formatIndex is f's place in formats.
func formatIndex(f llm.Format) int {
	for i, c := range formats {
		if c.f == f {
			return i
		}
	}
	panic("unknown format " + string(f))
}

// isTerminal tells whether last (an event's name, a space and its data) is an event after
// which a client of format f stops reading: chat's [DONE], Responses' terminal response
// events or its error, Messages' message_stop or its error.
func isTerminal(f llm.Format, last string) bool {
	name, _, _ := strings.Cut(last, " ")
	switch f {
	case llm.FormatChat:
		return last == " [DONE]"
	case llm.FormatResponses:
		return name == "response.completed" || name == "response.incomplete" || name == "response.failed" || name == "error"
	default:
		return name == "message_stop" || name == "error"
	}
}
