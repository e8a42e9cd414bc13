package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// callID is the id under which a request is handed to the SDK session. Each session carries one
// request, so a constant does; the client's own id is echoed by the HTTP front, exactly as sent.
var callID = mustID(int64(1))

func mustID(v int64) jsonrpc.ID {
	id, err := jsonrpc.MakeID(float64(v))
	if err != nil {
		panic(err)
	}
	return id
}

// dispatch runs one request through a fresh SDK server session and returns the SDK's response.
// version is the protocol version the request is made under; for anything but initialize the
// session starts as already initialized at that version, the way a stateless server must.
func (h *handler) dispatch(ctx context.Context, method string, params json.RawMessage, version string) (*jsonrpc.Response, error) {
	var state *sdk.ServerSessionState
	if method != "initialize" {
		state = &sdk.ServerSessionState{
			InitializeParams:  &sdk.InitializeParams{ProtocolVersion: version},
			InitializedParams: &sdk.InitializedParams{},
		}
	}
	t := newOneShot(&jsonrpc.Request{ID: callID, Method: method, Params: params})
	session, err := h.server.Connect(ctx, t, &sdk.ServerSessionOptions{State: state})
	if err != nil {
		return nil, err
	}
	defer session.Close()
	select {
	case resp := <-t.response:
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// oneShot is an SDK transport over which exactly one request is read; the response to it is
// delivered on response. Messages the server sends on its own (logging, progress) are dropped:
// a JSON answer has no room for them, and requests to the client fail, since a stateless server
// cannot receive the client's answer.
type oneShot struct {
	request  *jsonrpc.Request
	response chan *jsonrpc.Response

	mu       sync.Mutex
	read     bool
	closed   chan struct{}
	closeOne sync.Once
}

func newOneShot(req *jsonrpc.Request) *oneShot {
	return &oneShot{request: req, response: make(chan *jsonrpc.Response, 1), closed: make(chan struct{})}
}

// errServerRequest refuses a request from the server to the client.
var errServerRequest = errors.New("the MCP endpoint is stateless: it cannot send requests to the client")

// Connect returns the transport itself as the connection.
func (t *oneShot) Connect(context.Context) (sdk.Connection, error) { return t, nil }

// SupportsProtocolVersion reports which protocol versions this transport serves: the legacy ones.
func (t *oneShot) SupportsProtocolVersion(v string) bool {
	return slices.Contains(protocolVersions, v)
}

// Read returns the request once, then blocks until the connection closes.
func (t *oneShot) Read(ctx context.Context) (jsonrpc.Message, error) {
	t.mu.Lock()
	first := !t.read
	t.read = true
	t.mu.Unlock()
	if first {
		return t.request, nil
	}
	select {
	case <-t.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write delivers the response to the request and drops or refuses everything else.
func (t *oneShot) Write(_ context.Context, msg jsonrpc.Message) error {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		if m.ID == callID {
			select {
			case t.response <- m:
			default:
			}
		}
		return nil
	case *jsonrpc.Request:
		if m.IsCall() {
			return errServerRequest
		}
		return nil
	default:
		return nil
	}
}

// Close unblocks Read.
func (t *oneShot) Close() error {
	t.closeOne.Do(func() { close(t.closed) })
	return nil
}

// SessionID is empty: the endpoint has no sessions.
func (t *oneShot) SessionID() string { return "" }
