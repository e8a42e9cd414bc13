package streamconv

import (
	"path/filepath"
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// deltaEvents are one upstream text delta per format, as the upstreams send them.
var deltaEvents = map[llm.Format]sse.Event{
	llm.FormatChat:      {Data: []byte(`{"id":"chatcmpl-CVup7a1","object":"chat.completion.chunk","created":1761564674,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_560af6e559","choices":[{"index":0,"delta":{"content":" the quick \"brown\" fox"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x9"}`)},
	llm.FormatResponses: {Name: "response.output_text.delta", Data: []byte(`{"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_68f1a2b3aa01","output_index":1,"content_index":0,"delta":" the quick \"brown\" fox","logprobs":[],"obfuscation":"zz"}`)},
	llm.FormatMessages:  {Name: "content_block_delta", Data: []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" the quick \"brown\" fox"}}`)},
}

// primed returns a decoder and an encoder past the start of a text turn, so that the next
// upstream text delta takes the hot path.
func primed(tb testing.TB, up, client llm.Format) (Decoder, Encoder) {
	tb.Helper()
	dec, enc := NewDecoder(up), NewEncoder(client, metaFor(client))
	raw := readFile(tb, filepath.Join("testdata", "upstream", formatShort(up)+"_text.sse"))
	var (
		evs []llm.Event
		out []sse.Event
	)
	for _, ev := range readEvents(tb, raw) {
		evs, _, _ = dec.Decode(ev, evs[:0])
		stop := false
		for _, e := range evs {
			if e.Kind == llm.EventStop {
				stop = true
				break
			}
			out = enc.Encode(e, out[:0])
		}
		if stop {
			break
		}
	}
	// The decoder must be mid-text too: a fresh one that has seen only the start.
	dec = NewDecoder(up)
	for _, ev := range readEvents(tb, raw)[:3] {
		evs, _, _ = dec.Decode(ev, evs[:0])
	}
	return dec, enc
}

func formatShort(f llm.Format) string {
	for _, x := range formats {
		if x.f == f {
			return x.short
		}
	}
	return ""
}

// BenchmarkDeltaEvent measures Decode+Encode of one upstream text delta, the event a stream
// is mostly made of, for every upstream × client pair.
func BenchmarkDeltaEvent(b *testing.B) {
	for _, up := range formats {
		for _, client := range formats {
			b.Run(up.short+"_to_"+client.short, func(b *testing.B) {
				dec, enc := primed(b, up.f, client.f)
				ev := deltaEvents[up.f]
				var (
					evs []llm.Event
					out []sse.Event
					buf []byte
				)
				b.ReportAllocs()
				b.SetBytes(int64(len(ev.Data)))
				for b.Loop() {
					evs, _, _ = dec.Decode(ev, evs[:0])
					for _, e := range evs {
						out = enc.Encode(e, out[:0])
						for _, o := range out {
							buf = sse.AppendEvent(buf[:0], o)
						}
					}
				}
			})
		}
	}
}

// BenchmarkStream measures a whole recorded turn through Decoder and Encoder.
func BenchmarkStream(b *testing.B) {
	for _, up := range formats {
		for _, client := range formats {
			b.Run(up.short+"_to_"+client.short, func(b *testing.B) {
				upEvents := readEvents(b, readFile(b, filepath.Join("testdata", "upstream", up.short+"_tools.sse")))
				meta := metaFor(client.f)
				var (
					evs []llm.Event
					out []sse.Event
				)
				b.ReportAllocs()
				for b.Loop() {
					dec, enc := NewDecoder(up.f), NewEncoder(client.f, meta)
					for _, ev := range upEvents {
						evs, _, _ = dec.Decode(ev, evs[:0])
						for _, e := range evs {
							out = enc.Encode(e, out[:0])
						}
					}
					out = enc.Finish(out[:0])
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(upEvents)), "ns/event")
			})
		}
	}
}

// TestEncodeDeltaAllocs pins the encoders' hot path: a text delta allocates nothing once the
// buffers have grown.
func TestEncodeDeltaAllocs(t *testing.T) {
	for _, client := range formats {
		_, enc := primed(t, llm.FormatChat, client.f)
		ev := llm.Event{Kind: llm.EventTextDelta, Text: " the quick \"brown\" fox"}
		var out []sse.Event
		out = enc.Encode(ev, out[:0])
		n := testing.AllocsPerRun(100, func() { out = enc.Encode(ev, out[:0]) })
		// The Responses encoder keeps the text for its done events and final response; its
		// buffer grows now and then.
		if n > 0 && client.f != llm.FormatResponses || n > 0.1 {
			t.Errorf("%s: %.2f allocations per text delta", client.short, n)
		}
	}
}
