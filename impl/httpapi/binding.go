package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// checkedBody is the request body after the validator has read and checked it: handlers read
// the same bytes again through the Reader, and inferenceBinding takes them as they are, with
// the view of their top level the validator's pass read (the one parse of a request).
type checkedBody struct {
	*bytes.Reader
	raw  []byte
	view jsonview.View
}

func (*checkedBody) Close() error { return nil }

// newCheckedBody wraps a body the validator read.
func newCheckedBody(raw []byte) *checkedBody {
	return &checkedBody{Reader: bytes.NewReader(raw), raw: raw}
}

// checkedBytes returns the bytes of a body the validator has checked, and their view (nil when
// the validator read none).
func checkedBytes(r *http.Request) (json.RawMessage, *jsonview.View, bool) {
	if b, ok := r.Body.(*checkedBody); ok {
		if b.view.Body() == nil {
			return b.raw, nil, true
		}
		return b.raw, &b.view, true
	}
	return nil, nil, false
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
	body, view, ok := checkedBytes(r)
	if !ok {
		b.ServerInterface.CreateChatCompletion(w, r)
		return
	}
	x, err := b.s.startExchange(r.Context(), llm.FormatChat, body, view, nil)
	if err == nil {
		err = chatAnswer{x}.VisitCreateChatCompletionResponse(w)
	}
	if err != nil {
		b.s.respondError(w, r, err)
	}
}

func (b inferenceBinding) CreateResponse(w http.ResponseWriter, r *http.Request) {
	body, view, ok := checkedBytes(r)
	if !ok {
		b.ServerInterface.CreateResponse(w, r)
		return
	}
	x, err := b.s.startExchange(r.Context(), llm.FormatResponses, body, view, nil)
	if err == nil {
		err = responsesAnswer{x}.VisitCreateResponseResponse(w)
	}
	if err != nil {
		b.s.respondError(w, r, err)
	}
}

func (b inferenceBinding) CreateMessage(w http.ResponseWriter, r *http.Request, params api.CreateMessageParams) {
	body, view, ok := checkedBytes(r)
	if !ok {
		b.ServerInterface.CreateMessage(w, r, params)
		return
	}
	x, err := b.s.startExchange(r.Context(), llm.FormatMessages, body, view, messagesForward(params))
	if err == nil {
		err = messagesAnswer{x}.VisitCreateMessageResponse(w)
	}
	if err != nil {
		b.s.respondError(w, r, err)
	}
}
