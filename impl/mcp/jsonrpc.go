package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// JSON-RPC error codes this package answers with. The 2026-07-28 codes -32020..-32022 are never
// used: they would tell a dual-era client that it talks to a modern server.
const (
	codeParseError      = -32700
	codeInvalidRequest  = -32600
	codeMethodNotFound  = -32601
	codeInvalidParams   = -32602
	codeInternal        = -32603
	codeUnauthenticated = CodeUnauthenticated
)

// JSON-RPC errors the gateway's edge answers on the MCP endpoint before a request reaches the
// handler, in the implementation-defined range.
const (
	// CodeUnauthenticated answers a request that does not resolve to an account.
	CodeUnauthenticated = -32001
	// CodeRateLimited answers a request over its key's requests-per-minute cap.
	CodeRateLimited = -32029
	// CodeUnavailable answers a request the gateway cannot serve now because a dependency (its
	// database) cannot be reached (HTTP 503 with Retry-After).
	CodeUnavailable = -32003
	// CodeInternal answers an internal failure.
	CodeInternal = -32603
)

// UnauthenticatedMessage begins every message of CodeUnauthenticated; Unauthenticated adds
// what was wrong with the request's credentials and what to send instead.
const UnauthenticatedMessage = "unauthenticated: no verified caller"

// Unauthenticated is the message of CodeUnauthenticated for a request refused for reason (the
// words the API routes' 401 uses, such as "missing API key: send it as 'Authorization: Bearer
// <key>'"), so that an MCP client is told as much as a REST one (newcomer trial finding 9).
func Unauthenticated(reason string) string {
	if reason == "" {
		return UnauthenticatedMessage
	}
	return UnauthenticatedMessage + ": " + reason
}

// noCallerMessage is the message of a request that reaches the handler without a verified
// caller: the handler cannot tell why, and says what to send.
var noCallerMessage = Unauthenticated("send an API key as 'Authorization: Bearer <key>'")

// WriteError answers a JSON-RPC error with the given HTTP status and id (nil: null, the
// request's id was not read; see RefusedID); the edge uses it so that its errors read exactly
// like the handler's.
func WriteError(w http.ResponseWriter, status int, id json.RawMessage, code int64, message string) {
	writeError(w, status, id, code, message)
}

// RefusedHeadBody is the body of the JSON-RPC error (Invalid Request, id null: no body was
// read) that the gateway answers to a request for the MCP endpoint whose HTTP head it will
// not read on, with message saying why; the HTTP status is the refusal's own (400, 431).
func RefusedHeadBody(message string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(rpcResponse{JSONRPC: "2.0", ID: nullID, Error: &rpcError{Code: codeInvalidRequest, Message: "invalid request: " + message}})
	return buf.Bytes()
}

// RefusedIDBytes is the most of a request's body RefusedID reads: a body declared longer keeps
// its id unread. It is the size below which the gateway reads a body outside its body budget.
const RefusedIDBytes = 16 << 10

// RefusedID returns the id of the JSON-RPC request in r's body, for the answer that refuses r
// before anything read it (a 401, a 429, a 503 at the gateway's edge): JSON-RPC 2.0 has a
// response carry its request's id, null only when the id cannot be read. It reads the body
// (consuming it) only for a POST that declares a body of at most RefusedIDBytes
// (Content-Length) and expects no 100 Continue, and parses it only there, on the refusal: the
// requests served never pay for it. It is null for any other request, and for a body that is
// not one JSON-RPC request with an id (a notification, a response, a batch, not JSON).
func RefusedID(r *http.Request) json.RawMessage {
	if r.Method != http.MethodPost || r.Body == nil || r.ContentLength <= 0 || r.ContentLength > RefusedIDBytes ||
		r.Header.Get("Expect") != "" {
		return nullID
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, RefusedIDBytes))
	if err != nil {
		return nullID
	}
	return requestID(body)
}

// requestID is the id of body when it is one JSON-RPC 2.0 request, as the client wrote it; else
// null.
func requestID(body []byte) json.RawMessage {
	body = bytes.TrimSpace(body)
	var msg message
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &msg) != nil || string(msg.JSONRPC) != `"2.0"` ||
		msg.Method == nil || !validID(msg.ID) {
		return nullID
	}
	return msg.ID
}

// nullID is the id of a response to a message whose id could not be read.
var nullID = json.RawMessage("null")

// rpcError is the error member of a JSON-RPC response.
type rpcError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// rpcResponse is a JSON-RPC 2.0 response. ID holds the request's id exactly as the client wrote
// it, so its type and spelling are echoed unchanged.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// message is one incoming JSON-RPC message as written, each member kept raw so that presence and
// type can be checked: a member that is absent is nil, one that is null is "null".
type message struct {
	JSONRPC json.RawMessage `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// validID reports whether raw is a JSON-RPC id MCP allows: a string or a number (never null).
func validID(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		return json.Unmarshal(raw, &s) == nil
	case c == '-' || (c >= '0' && c <= '9'):
		var n json.Number
		return json.Unmarshal(raw, &n) == nil
	default:
		return false
	}
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// isAbsent reports whether a member is missing or null.
func isAbsent(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// writeJSON answers status with body as application/json.
func writeJSON(w http.ResponseWriter, status int, body any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	w.Header().Set("Content-Type", "application/json")
	if err := enc.Encode(body); err != nil {
		// Every body is built from values that encode; this cannot happen.
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}` + "\n"))
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// writeError answers a JSON-RPC error with the given HTTP status, with X-Content-Type-Options:
// nosniff as every error answer of the gateway's API (a message may echo what the request sent).
func writeError(w http.ResponseWriter, status int, id json.RawMessage, code int64, msg string) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if len(id) == 0 {
		id = nullID
	}
	writeJSON(w, status, rpcResponse{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: msg}})
}
