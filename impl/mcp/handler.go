package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/tool"
)

// LatestProtocolVersion is the newest MCP protocol version the endpoint speaks; initialize answers
// it when the client asks for a version the endpoint does not know.
const LatestProtocolVersion = "2025-11-25"

// protocolVersions are the versions the endpoint speaks, newest first.
var protocolVersions = []string{LatestProtocolVersion, "2025-06-18", "2025-03-26", "2024-11-05"}

// ProtocolVersions returns the MCP protocol versions the endpoint speaks, newest first.
func ProtocolVersions() []string { return slices.Clone(protocolVersions) }

// DefaultMaxBodyBytes bounds a request body when Options.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 4 << 20

// headerProtocolVersion is the header that 2025-06-18 and later clients send after initialize.
const headerProtocolVersion = "Mcp-Protocol-Version"

// headerRequestID is the request id header that the gateway's edge sets before the handler runs;
// internal errors quote it.
const headerRequestID = "x-request-id"

// Options configure the handler.
type Options struct {
	// Tools are the tools listed (in name order) and callable. Their names must be unique.
	Tools []tool.Tool
	// Name and Version are the serverInfo of the initialize result; they default to "tollgate" and
	// "dev".
	Name, Version string
	// Instructions, when set, are returned by initialize as the server's instructions.
	Instructions string
	// Logger receives tool failures and panics; nil means slog.Default(). The SDK logs through it
	// at warning level and above only.
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body (DefaultMaxBodyBytes when zero); a larger body is
	// answered 413.
	MaxBodyBytes int64
	// AllowedOrigins are the browser origins served besides the gateway's own (origin.go);
	// a request with another Origin is answered 403.
	AllowedOrigins []string
	// Metrics, when set, receives each request's operation (mcp.server.operation.duration).
	Metrics *metrics.Metrics
}

// handler is the MCP endpoint.
type handler struct {
	server  *sdk.Server
	log     *slog.Logger
	maxBody int64
	origins map[string]struct{}
	// tools are the registered tools by name (a tool call's span describes its tool).
	tools   map[string]*registeredTool
	metrics *metrics.Metrics
}

// NewHandler returns the MCP endpoint. It assumes the authentication middleware has put the
// verified caller in the request context and answers -32001 (HTTP 401) when it has not.
//
// The handler answers:
//   - POST with one JSON-RPC request: HTTP 200 and one JSON-RPC response as application/json,
//     whatever the outcome of the method (errors are JSON-RPC errors, tool failures are isError
//     results), except as below;
//   - a notification, or a JSON-RPC response from the client: 202 with an empty body;
//   - unparseable JSON: 400 with -32700 and id null; a batch: 400 with -32600 "batching is not
//     supported"; a message that is not a JSON-RPC 2.0 request: 400 with -32600;
//   - an Mcp-Protocol-Version header naming a version it does not speak (on anything but initialize
//     and server/discover): 400 with -32600;
//   - a method other than initialize, ping, tools/list and tools/call (server/discover included):
//     -32601;
//   - any other HTTP method, GET included: 405 with "Allow: POST", without content negotiation;
//   - an Origin header that is neither the gateway's own nor an allowed one: 403 with -32600
//     (origin.go).
//
// It is lenient where clients differ: Content-Type and Accept are not checked (the answer is always
// application/json), the Mcp-Protocol-Version header may be absent (2025-03-26 is assumed, as the
// spec says), an Mcp-Session-Id header is ignored, and no handshake is needed before tools/list or
// tools/call, since every request is served by a fresh session.
//
// The SDK's StreamableHTTPHandler is not used for the HTTP side because, in v1.8.0, it answers
// malformed JSON, batches and unknown methods with plain-text 400s instead of -32700/-32600/-32601,
// processes batches when no protocol-version header is sent, answers server/discover and requests
// carrying 2026-07-28 metadata with -32020/-32022, and refuses POSTs whose Accept header lacks
// text/event-stream. The SDK server still runs the protocol behind this front.
//
// NewHandler panics if a tool is invalid (see [tool.Tool]), as registering a malformed tool is a
// programming error.
func NewHandler(opts Options) http.Handler {
	if opts.Name == "" {
		opts.Name = "tollgate"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	h := &handler{log: opts.Logger, maxBody: opts.MaxBodyBytes, origins: originSet(opts.AllowedOrigins), tools: map[string]*registeredTool{},
		metrics: opts.Metrics}
	h.server = sdk.NewServer(&sdk.Implementation{Name: opts.Name, Version: opts.Version}, &sdk.ServerOptions{
		Instructions: opts.Instructions,
		Logger:       slog.New(minLevel{Handler: opts.Logger.Handler(), min: slog.LevelWarn}),
		// Only tools, and no list-changed notifications: the tool list is fixed per process.
		Capabilities:              &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}},
		SupportedProtocolVersions: protocolVersions,
	})
	for _, t := range opts.Tools {
		reg, err := newRegisteredTool(t)
		if err != nil {
			panic(fmt.Sprintf("mcp: %v", err))
		}
		if h.tools[t.Name] != nil {
			panic(fmt.Sprintf("mcp: tool %q registered twice", t.Name))
		}
		h.tools[t.Name] = reg
		h.server.AddTool(reg.sdkTool(), h.toolHandler(reg))
	}
	return h
}

// ServeHTTP answers one MCP message.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.originAllowed(r) {
		writeError(w, http.StatusForbidden, RefusedID(r), codeInvalidRequest,
			"origin "+strconv.Quote(r.Header.Get("Origin"))+" may not call this MCP endpoint: a browser page is served from the gateway's own origin or one listed in server.mcp_allowed_origins")
		return
	}
	if _, ok := auth.FromContext(r.Context()); !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate"`)
		w.Header().Set("x-should-retry", "false")
		writeError(w, http.StatusUnauthorized, RefusedID(r), codeUnauthenticated, noCallerMessage)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, nullID, codeInvalidRequest,
			fmt.Sprintf("method %s not allowed: the MCP endpoint takes one JSON-RPC message per POST and opens no SSE stream", r.Method))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, nullID, codeInvalidRequest,
				fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
			return
		}
		writeError(w, http.StatusBadRequest, nullID, codeParseError, "parse error: the request body could not be read")
		return
	}
	body = bytes.TrimSpace(body)
	switch {
	case len(body) == 0:
		writeError(w, http.StatusBadRequest, nullID, codeParseError, "parse error: the request body is empty")
		return
	case !json.Valid(body):
		writeError(w, http.StatusBadRequest, nullID, codeParseError, "parse error: the request body is not valid JSON")
		return
	case body[0] == '[':
		writeError(w, http.StatusBadRequest, nullID, codeInvalidRequest, "batching is not supported: send one JSON-RPC message per POST")
		return
	case body[0] != '{':
		writeError(w, http.StatusBadRequest, nullID, codeInvalidRequest, "invalid request: a JSON-RPC message is an object")
		return
	}
	var msg message
	if err := json.Unmarshal(body, &msg); err != nil {
		writeError(w, http.StatusBadRequest, nullID, codeInvalidRequest, "invalid request: "+err.Error())
		return
	}
	id := nullID
	if validID(msg.ID) {
		id = msg.ID
	}
	if string(msg.JSONRPC) != `"2.0"` {
		writeError(w, http.StatusBadRequest, id, codeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)
		return
	}
	if msg.ID != nil && !validID(msg.ID) {
		writeError(w, http.StatusBadRequest, nullID, codeInvalidRequest, `invalid request: "id" must be a string or a number`)
		return
	}
	if msg.Method == nil {
		if msg.ID != nil && (msg.Result != nil || msg.Error != nil) {
			// A response to a server request; this server sends none, so there is nothing to match.
			w.WriteHeader(http.StatusAccepted)
			return
		}
		writeError(w, http.StatusBadRequest, id, codeInvalidRequest, `invalid request: "method" is missing`)
		return
	}
	var method string
	if err := json.Unmarshal(msg.Method, &method); err != nil {
		writeError(w, http.StatusBadRequest, id, codeInvalidRequest, `invalid request: "method" must be a string`)
		return
	}
	version := r.Header.Get(headerProtocolVersion)
	call := rpcCall{method: method, id: msg.ID, params: msg.Params, version: version}
	if version == "" {
		// The spec's rule for a request without the header.
		call.version = "2025-03-26"
	}
	start := time.Now()
	ctx, span := h.startRPCSpan(r, &call)
	if h.metrics == nil && !span.IsRecording() {
		// Neither traced nor measured: no outcome to keep.
		h.serveMethod(ctx, w, call, id, version)
		return
	}
	out := &rpcOutcome{span: span}
	h.serveMethod(context.WithValue(ctx, outcomeKey{}, out), w, call, id, version)
	span.End()
	h.observe(&call, out, start)
}

// serveMethod answers call, a JSON-RPC request or notification whose method was read; id is the
// id its answer echoes and version the Mcp-Protocol-Version header ("" when absent). ctx holds
// the call's span and outcome, which a JSON-RPC error answered is noted on.
func (h *handler) serveMethod(ctx context.Context, w http.ResponseWriter, call rpcCall, id json.RawMessage, version string) {
	outcome := outcomeOf(ctx)
	fail := func(status int, code int64, msg string) {
		outcome.rpcError(code, msg)
		writeError(w, status, id, code, msg)
	}
	method := call.method
	if method == "server/discover" && call.id != nil {
		// A dual-era client probing for the 2026-07-28 protocol: -32601 makes it fall back to
		// initialize (a modern error code would not).
		fail(http.StatusOK, codeMethodNotFound,
			fmt.Sprintf("method not found: server/discover (this server speaks MCP %s; use initialize)", strings.Join(protocolVersions, ", ")))
		return
	}
	if version != "" && method != "initialize" && !slices.Contains(protocolVersions, version) {
		fail(http.StatusBadRequest, codeInvalidRequest,
			fmt.Sprintf("unsupported %s header %q: this server speaks %s", headerProtocolVersion, version, strings.Join(protocolVersions, ", ")))
		return
	}
	if call.id == nil {
		// Notifications (initialized, cancelled, roots/list_changed, ...) change nothing in a
		// stateless server.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	params, perr := checkParams(method, call.params)
	if perr != "" {
		fail(http.StatusOK, codeInvalidParams, "invalid params: "+perr)
		return
	}
	switch method {
	case "initialize", "ping", "tools/list", "tools/call":
	default:
		fail(http.StatusOK, codeMethodNotFound, fmt.Sprintf("method not found: %q", method))
		return
	}
	ctx = context.WithValue(ctx, requestIDKey{}, w.Header().Get(headerRequestID))
	resp, err := h.dispatch(ctx, method, params, call.version)
	if err != nil {
		if ctx.Err() != nil {
			// The client went away; nobody reads the answer.
			return
		}
		h.log.ErrorContext(ctx, "mcp: dispatching to the SDK server", "method", method, "err", err)
		fail(http.StatusOK, codeInternal, internalMessage(ctx))
		return
	}
	out := rpcResponse{JSONRPC: "2.0", ID: id}
	if resp.Error != nil {
		out.Error = toRPCError(resp.Error)
		outcome.rpcError(out.Error.Code, out.Error.Message)
	} else {
		out.Result = stripModernResult(resp.Result)
		if len(out.Result) == 0 {
			out.Result = json.RawMessage("{}")
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// modernResultMembers are the members the SDK writes into list results for the 2026-07-28
// protocol's caching (ttlMs, cacheScope), which the versions this server speaks do not have.
var modernResultMembers = []string{"ttlMs", "cacheScope"}

// stripModernResult removes modernResultMembers from the top level of a result, keeping every
// other byte as it is.
func stripModernResult(result json.RawMessage) json.RawMessage {
	if !bytes.Contains(result, []byte(`"ttlMs"`)) && !bytes.Contains(result, []byte(`"cacheScope"`)) {
		return result
	}
	var v jsonview.View
	if v.Parse(result) != nil {
		return result
	}
	var edits jsonview.Edits
	for _, m := range v.Members() {
		if slices.Contains(modernResultMembers, string(m.Key)) {
			edits.Remove(m)
		}
	}
	if edits.Empty() {
		return result
	}
	return edits.AppendTo(nil, &v)
}

// checkParams checks the params of the methods handed to the SDK, so that a malformed call is a
// plain -32602 with a readable message, and strips the 2026-07-28 protocol-version metadata that
// would make the SDK treat the request as a modern one. It returns the params to pass on, or a
// message saying what is wrong.
func checkParams(method string, params json.RawMessage) (json.RawMessage, string) {
	switch method {
	case "initialize":
		if !isObject(params) {
			return nil, "initialize takes an object {protocolVersion, capabilities, clientInfo}"
		}
		if msg := checkInitialize(params); msg != "" {
			return nil, msg
		}
	case "tools/call":
		if !isObject(params) {
			return nil, "tools/call takes an object {name, arguments}"
		}
		var p struct {
			Name      json.RawMessage `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err.Error()
		}
		var name string
		if err := json.Unmarshal(p.Name, &name); err != nil || name == "" {
			return nil, `"name" must be the tool's name`
		}
		if !isAbsent(p.Arguments) && !isObject(p.Arguments) {
			return nil, `"arguments" must be an object`
		}
	case "tools/list", "ping":
		if !isAbsent(params) && !isObject(params) {
			return nil, method + " takes an object or no params"
		}
	default:
		return params, ""
	}
	return stripModernMeta(params), ""
}

// checkInitialize says what is wrong with the members of initialize's params, "" when nothing
// is: each member the protocol defines has its type (protocolVersion a string, capabilities an
// object, clientInfo an object whose name and version are strings), as the SDK decodes them;
// otherwise the SDK's decoding error would be answered as an internal error.
func checkInitialize(params json.RawMessage) string {
	var p struct {
		ProtocolVersion json.RawMessage `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ClientInfo      json.RawMessage `json:"clientInfo"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return err.Error()
	}
	isString := func(raw json.RawMessage) bool {
		var s string
		return isAbsent(raw) || json.Unmarshal(raw, &s) == nil
	}
	switch {
	case !isString(p.ProtocolVersion):
		return `"protocolVersion" must be a string, such as "2025-06-18"`
	case !isAbsent(p.Capabilities) && !isObject(p.Capabilities):
		return `"capabilities" must be an object`
	case !isAbsent(p.ClientInfo) && !isObject(p.ClientInfo):
		return `"clientInfo" must be an object {name, version}`
	}
	if !isAbsent(p.ClientInfo) {
		var info struct {
			Name    json.RawMessage `json:"name"`
			Version json.RawMessage `json:"version"`
			Title   json.RawMessage `json:"title"`
		}
		if err := json.Unmarshal(p.ClientInfo, &info); err != nil {
			return err.Error()
		}
		if !isString(info.Name) || !isString(info.Version) || !isString(info.Title) {
			return `"clientInfo" must be an object {name, version} of strings`
		}
	}
	return ""
}

// stripModernMeta removes _meta["io.modelcontextprotocol/protocolVersion"] from params: it
// selects the 2026-07-28 protocol in the SDK, which this server does not speak, and a legacy
// server ignores unknown metadata.
func stripModernMeta(params json.RawMessage) json.RawMessage {
	if !isObject(params) || !bytes.Contains(params, []byte(sdk.MetaKeyProtocolVersion)) {
		return params
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(params, &top) != nil {
		return params
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(top["_meta"], &meta) != nil || meta == nil {
		return params
	}
	delete(meta, sdk.MetaKeyProtocolVersion)
	top["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(top)
	if err != nil {
		return params
	}
	return out
}

// toRPCError converts an error answered by the SDK to the wire, never letting a 2026-07-28 code
// through.
func toRPCError(err error) *rpcError {
	we, ok := errors.AsType[*jsonrpc.Error](err)
	if !ok {
		// Not a JSON-RPC error: its text is internal and stays out of the answer.
		return &rpcError{Code: codeInternal, Message: "internal error"}
	}
	e := &rpcError{Code: we.Code, Message: we.Message, Data: we.Data}
	if e.Code >= -32022 && e.Code <= -32020 {
		e.Code, e.Data = codeInvalidRequest, nil
	}
	return e
}

// requestIDKey carries the gateway's request id to tool failures.
type requestIDKey struct{}

// internalMessage is what a caller is told about an internal failure.
func internalMessage(ctx context.Context) string {
	if id, _ := ctx.Value(requestIDKey{}).(string); id != "" {
		return "internal error; quote request id " + id + " when reporting it"
	}
	return "internal error"
}

// minLevel drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

// Enabled reports whether the record's level is at least min and the wrapped handler wants it.
func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

// WithAttrs keeps the level floor on the derived handler.
func (m minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: m.Handler.WithAttrs(attrs), min: m.min}
}

// WithGroup keeps the level floor on the derived handler.
func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: m.Handler.WithGroup(name), min: m.min}
}
