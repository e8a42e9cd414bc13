package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/apierror"
)

// TestResponsesInputCheckAllocatesNothing: the check of a Responses request's input runs on
// every Responses request, on the view the validator's pass filled; an input it accepts (a
// string, an array of items, with white space or without) costs it no allocation, and the
// route's validation takes it (a Responses body with items passes, one with an empty array is
// refused naming 'input').
func TestResponsesInputCheckAllocatesNothing(t *testing.T) {
	for _, input := range []string{`"hi"`, `""`, `[{"role":"user","content":"hi"}]`, "[\n  {\"role\":\"user\",\"content\":\"hi\"}]"} {
		if n := testing.AllocsPerRun(100, func() {
			if err := checkResponsesInput([]byte(input)); err != nil {
				t.Fatalf("%s: %v", input, err)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations", input, n)
		}
	}
	doc, err := api.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	v, err := newValidator(doc)
	if err != nil {
		t.Fatal(err)
	}
	for body, param := range map[string]string{
		`{"model":"service-flint","input":[{"role":"user","content":"hi"}],"max_output_tokens":16}`: "",
		`{"model":"service-flint","input":[],"max_output_tokens":16}`:                               "input",
	} {
		r, _ := http.NewRequest("POST", responsesPath, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Pattern = "POST " + responsesPath
		_, err := v.validate(r)
		switch {
		case param == "" && err != nil:
			t.Errorf("%s: %v, want it to pass", body, err)
		case param != "" && (err == nil || apierror.As(err).Param != param):
			t.Errorf("%s: %v, want a refusal naming '%s'", body, err, param)
		}
	}
}
