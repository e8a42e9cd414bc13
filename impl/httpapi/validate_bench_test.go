package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gen/api"
)

// BenchmarkValidateChat measures request validation against the embedded document for a
// typical chat request.
func BenchmarkValidateChat(b *testing.B) {
	doc, err := api.GetSwagger()
	if err != nil {
		b.Fatal(err)
	}
	v, err := newValidator(doc)
	if err != nil {
		b.Fatal(err)
	}
	body := `{"model":"service-flint-base","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello to the benchmark."}],"max_tokens":16,"temperature":0.2}`
	b.ReportAllocs()
	for b.Loop() {
		r, _ := http.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Pattern = "POST /v1/chat/completions"
		if _, err := v.validate(r); err != nil {
			b.Fatal(err)
		}
	}
}
