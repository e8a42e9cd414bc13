package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/tollgate/tollgate/gen/api"
)

// checkedBody is the request body after the validator has read and checked it: handlers read
// the same bytes again through the Reader, and inferenceBinding takes them as they are.
type checkedBody struct {
	*bytes.Reader
	raw []byte
}

func (*checkedBody) Close() error { return nil }

// newCheckedBody wraps a body the validator read.
func newCheckedBody(raw []byte) *checkedBody {
	return &checkedBody{Reader: bytes.NewReader(raw), raw: raw}
}

// checkedBytes returns the bytes of a body the validator has checked.
func checkedBytes(r *http.Request) (json.RawMessage, bool) {
	if b, ok := r.Body.(*checkedBody); ok {
		return b.raw, true
	}
	return nil, false
}

// inferenceBinding is the generated strict handler with the binding of the three inference
// operations replaced. Their bodies are opaque JSON (json.RawMessage) that the validator has
// already read and checked against the schema; the generated binding would decode the same
// bytes a second time with encoding/json only to copy them. It hands the checked bytes to the
// strict implementation and writes its answer exactly as the generated code does. A request
// whose body the validator did not check goes through the generated binding.
type inferenceBinding struct {
	api.ServerInterface
	s *Server
}

func (b inferenceBinding) CreateChatCompletion(w http.ResponseWriter, r *http.Request) {
	body, ok := checkedBytes(r)
	if !ok {
		b.ServerInterface.CreateChatCompletion(w, r)
		return
	}
	res, err := b.s.CreateChatCompletion(r.Context(), api.CreateChatCompletionRequestObject{Body: &body})
	if err == nil {
		err = res.VisitCreateChatCompletionResponse(w)
	}
	if err != nil {
		b.s.respondError(w, r, err)
	}
}

func (b inferenceBinding) CreateResponse(w http.ResponseWriter, r *http.Request) {
	body, ok := checkedBytes(r)
	if !ok {
		b.ServerInterface.CreateResponse(w, r)
		return
	}
	res, err := b.s.CreateResponse(r.Context(), api.CreateResponseRequestObject{Body: &body})
	if err == nil {
		err = res.VisitCreateResponseResponse(w)
	}
	if err != nil {
		b.s.respondError(w, r, err)
	}
}

func (b inferenceBinding) CreateMessage(w http.ResponseWriter, r *http.Request, params api.CreateMessageParams) {
	body, ok := checkedBytes(r)
	if !ok {
		b.ServerInterface.CreateMessage(w, r, params)
		return
	}
	res, err := b.s.CreateMessage(r.Context(), api.CreateMessageRequestObject{Params: params, Body: &body})
	if err == nil {
		err = res.VisitCreateMessageResponse(w)
	}
	if err != nil {
		b.s.respondError(w, r, err)
	}
}
