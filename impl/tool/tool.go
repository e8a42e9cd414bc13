// Package tool defines what a tool is for the gateway's tool users: a name, a description and an
// input schema for the model, behaviour hints, and a handler run for a verified caller. The MCP
// endpoint (impl/mcp) lists and calls tools; the agents (impl/agent) offer them to their model
// and run the calls it makes. The tools themselves (datasets, agents) are built elsewhere
// (impl/tenanttools, impl/mcp), so neither user depends on the other.
package tool

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tollgate/tollgate/impl/auth"
)

// Handler runs a tool for the verified caller p with arguments that have already been validated
// against the tool's input schema (a JSON object; {} when the client sent none).
//
// A Result with IsError true is a failure the caller should see, such as a refused dataset. A
// returned error is a failure too: a [*PublicError] is shown to the caller as "Error: <message>";
// any other error is logged and the caller is told only that an internal error happened, with the
// request id. Panics are recovered the same way.
type Handler func(ctx context.Context, p auth.Principal, args json.RawMessage) (Result, error)

// Result is a tool's answer: text content, and whether it reports a failure.
type Result struct {
	Text    string
	IsError bool
}

// TextResult is a successful result with the given text.
func TextResult(text string) Result { return Result{Text: text} }

// ErrorResult is a failed result whose text is "Error: " followed by the formatted message.
func ErrorResult(format string, args ...any) Result {
	return Result{Text: "Error: " + fmt.Sprintf(format, args...), IsError: true}
}

// PublicError is a tool failure whose message the caller may read. Handlers, and the services
// they call, return it for expected refusals ("dataset 'x' is not loaded", "query timed out");
// any other error is treated as internal.
type PublicError struct {
	Message string
}

// Error returns the message.
func (e *PublicError) Error() string { return e.Message }

// Errorf returns a [*PublicError] with the formatted message.
func Errorf(format string, args ...any) error {
	return &PublicError{Message: fmt.Sprintf(format, args...)}
}

// Annotations are a tool's behaviour hints (untrusted by clients, but shown to them). Every hint
// is sent explicitly.
type Annotations struct {
	// Title is a human-readable title for the tool.
	Title string
	// ReadOnly says the tool does not modify its environment.
	ReadOnly bool
	// Destructive says the tool may destroy data; meaningful only when ReadOnly is false.
	Destructive bool
	// Idempotent says calling the tool again with the same arguments has no further effect.
	Idempotent bool
	// OpenWorld says the tool reaches entities outside a closed domain (such as the web).
	OpenWorld bool
}

// ReadOnlyAnnotations are the hints of a tool that only reads the caller's own data: read-only,
// not destructive, idempotent, closed-world.
func ReadOnlyAnnotations(title string) Annotations {
	return Annotations{Title: title, ReadOnly: true, Idempotent: true}
}

// Tool is one tool, as MCP clients and agents see it.
type Tool struct {
	// Name is the tool's name: 1 to 64 characters of [A-Za-z0-9_-], so that clients can pass it on
	// to any LLM API.
	Name string
	// Title is a short human-readable name; optional.
	Title string
	// Description tells a model what the tool does; required.
	Description string
	// InputSchema is the JSON Schema of the arguments: an object schema ("type": "object", with
	// "required", if any, an array). Take it from the OpenAPI components with mcp.ComponentSchema.
	InputSchema json.RawMessage
	// Annotations are the tool's behaviour hints.
	Annotations Annotations
	// Handler runs the tool.
	Handler Handler
}
