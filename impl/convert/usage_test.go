package convert

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
)

// TestResponseUsageAgreesWithDecodeResponse: the usage-only reader gives what the full decoder
// gives, on the simulator's recorded answers of every format.
func TestResponseUsageAgreesWithDecodeResponse(t *testing.T) {
	files := map[string]llm.Format{"chat": llm.FormatChat, "responses": llm.FormatResponses, "messages": llm.FormatMessages}
	n := 0
	for prefix, f := range files {
		matches, _ := filepath.Glob(filepath.Join("..", "sim", "testdata", prefix+"*.json"))
		for _, path := range matches {
			body, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			full, err := DecodeResponse(f, body)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			u, err := ResponseUsage(f, body)
			if err != nil || u != full.Usage || u.OutputTokens == 0 {
				t.Errorf("%s: usage %+v (%v), full decode %+v", path, u, err, full.Usage)
			}
			n++
		}
	}
	if n < 3 {
		t.Fatalf("only %d recorded answers found", n)
	}
	if _, err := ResponseUsage(llm.FormatMessages, []byte(`{"type":"error"}`)); err == nil {
		t.Error("a non-message must be an error")
	}
}
