package convert

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
)

// FuzzTranslateRequest takes a client's request body of any shape (the fixtures mutated) in
// each format and, when the gateway accepts it, translates it for an upstream of each format,
// as the exchange does. Whatever the client sends: nothing panics; a request the gateway
// refuses is a 400 in the client's envelope (never an internal error, which would be a 500 and an
// alert); and a translated body is JSON that the gateway itself reads back as a request of
// the upstream's format, with as many turns or fewer (Messages merges adjacent turns of one
// role), never more.
func FuzzTranslateRequest(f *testing.F) {
	for i, src := range formats {
		f.Add(uint8(i), fixture(f, "requests", src.name+".json"))
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		src := formats[int(which)%len(formats)].f
		req, err := DecodeRequest(src, body)
		if err != nil {
			requireClientError(t, "DecodeRequest("+string(src)+")", err)
			return
		}
		for _, dst := range formats {
			r := *req
			if dst.f == llm.FormatMessages && r.MaxTokens == 0 {
				r.MaxTokens = 1024 // the exchange fills Messages' required bound from the model's
			}
			out, _, err := EncodeRequest(dst.f, &r, "upstream-model")
			if err != nil {
				requireClientError(t, string(src)+" -> "+dst.name, err)
				continue
			}
			if !json.Valid(out) {
				t.Fatalf("%s -> %s wrote a body that is not JSON: %s", src, dst.name, out)
			}
			back, err := DecodeRequest(dst.f, out)
			if err != nil {
				t.Fatalf("%s -> %s wrote a body its own format's decoder refuses (%v): %s\nfrom: %s", src, dst.name, err, out, body)
			}
			if src != dst.f && len(back.Messages) > len(req.Messages) {
				t.Fatalf("%s -> %s made %d turns of %d: %s", src, dst.name, len(back.Messages), len(req.Messages), out)
			}
		}
	})
}

// requireClientError fails the test unless err is a 400 (an invalid request).
func requireClientError(t *testing.T, what string, err error) {
	t.Helper()
	var ae *apierror.Error
	if !errors.As(err, &ae) || ae.Kind != apierror.KindInvalidRequest {
		t.Fatalf("%s: %T %v, want a 400 *apierror.Error", what, err, err)
	}
}

// FuzzTranslateResponse takes an upstream's complete answer of any shape (the recorded answers
// mutated) in each format and writes it for a client of each format, as the exchange does.
// Whatever the upstream sends: nothing panics; an answer the gateway cannot use is a 502
// (never an internal error); and the answer a client gets is JSON that reads back, in the
// client's format, with the input, cached input and output token counts the gateway bills.
func FuzzTranslateResponse(f *testing.F) {
	for i, up := range formats {
		for _, sc := range []string{"text", "tool", "length"} {
			f.Add(uint8(i), fixture(f, "responses", up.name+"-"+sc+".json"))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		up := formats[int(which)%len(formats)].f
		resp, err := DecodeResponse(up, body)
		if err != nil {
			requireUpstreamError(t, "DecodeResponse("+string(up)+")", err)
			return
		}
		for _, client := range formats {
			out, err := EncodeResponse(client.f, resp, Meta{ID: "id-1", Created: 1767225600, Model: "tg-model"})
			if err != nil {
				requireUpstreamError(t, string(up)+" -> "+client.name, err)
				continue
			}
			back, err := DecodeResponse(client.f, out)
			if err != nil {
				t.Fatalf("%s -> %s wrote an answer its own format's decoder refuses (%v): %s\nfrom: %s", up, client.name, err, out, body)
			}
			got, want := back.Usage, resp.Usage
			if got.InputTokens != want.InputTokens || got.CachedInputTokens != want.CachedInputTokens || got.OutputTokens != want.OutputTokens {
				t.Fatalf("%s -> %s: the client reads input %d (cached %d), output %d; billed input %d (cached %d), output %d\n%s\nfrom: %s",
					up, client.name, got.InputTokens, got.CachedInputTokens, got.OutputTokens,
					want.InputTokens, want.CachedInputTokens, want.OutputTokens, out, body)
			}
		}
	})
}

// requireUpstreamError fails the test unless err is a 502 (an upstream answer not usable).
func requireUpstreamError(t *testing.T, what string, err error) {
	t.Helper()
	var ae *apierror.Error
	if !errors.As(err, &ae) || ae.Kind != apierror.KindUpstream {
		t.Fatalf("%s: %T %v, want a 502 *apierror.Error", what, err, err)
	}
}
