package streamconv

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
)

// sniffFormat tells the upstream format of a recorded stream by its events.
func sniffFormat(raw []byte) llm.Format {
	switch {
	case bytes.Contains(raw, []byte("event: message_start")), bytes.Contains(raw, []byte(`"type":"message_start"`)):
		return llm.FormatMessages
	case bytes.Contains(raw, []byte(`"type":"response.`)):
		return llm.FormatResponses
	default:
		return llm.FormatChat
	}
}

// TestSimTranscripts feeds the upstream simulator's recorded streams (impl/sim/testdata/*.sse,
// when there are any) to every client format, checking the format rules and what the official
// SDKs make of them against what the decoder saw.
func TestSimTranscripts(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "sim", "testdata", "*.sse"))
	if len(files) == 0 {
		t.Skip("no recorded simulator streams in impl/sim/testdata")
	}
	for _, file := range files {
		raw := readFile(t, file)
		up := sniffFormat(raw)
		evs, _ := decodeAll(t, up, raw)
		want := accumulate(evs)
		if !want.HasError && want.Stop == "" {
			// A stream cut short (a dropped connection) ends with the gateway's own error.
			want.HasError = true
		}
		for _, client := range formats {
			t.Run(filepath.Base(file)+".to_"+client.short, func(t *testing.T) {
				meta := metaFor(client.f)
				tr, _ := pipe(t, up, client.f, meta, raw)
				got := checkClient(t, client.f, tr, meta)
				sdk := sdkRead(t, client.f, tr)
				if got.HasError != want.HasError || sdk.HasError != want.HasError {
					t.Fatalf("error: format check %v, SDK %v, upstream %v\n%s", got.HasError, sdk.HasError, want.HasError, tr)
				}
				if got.Text != want.Text || sdk.Text != want.Text {
					t.Errorf("text: format check %q, SDK %q, upstream %q", got.Text, sdk.Text, want.Text)
				}
				if !want.HasError {
					compareResult(t, "client", client.f, meta, got, want)
					compareResult(t, "SDK", client.f, meta, sdk, want)
				}
			})
		}
	}
}
