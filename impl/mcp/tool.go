package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	textmessage "golang.org/x/text/message"

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

// Tool is one MCP tool.
type Tool struct {
	// Name is the tool's name: 1 to 64 characters of [A-Za-z0-9_-], so that clients can pass it on
	// to any LLM API.
	Name string
	// Title is a short human-readable name; optional.
	Title string
	// Description tells a model what the tool does; required.
	Description string
	// InputSchema is the JSON Schema of the arguments: an object schema ("type": "object", with
	// "required", if any, an array). Take it from the OpenAPI components with [ComponentSchema].
	InputSchema json.RawMessage
	// Annotations are the tool's behaviour hints.
	Annotations Annotations
	// Handler runs the tool.
	Handler Handler
}

// toolNamePattern is the name rule: what Anthropic's and OpenAI's APIs accept for a function name
// (with the mcp__server__ prefix clients add in mind), without dots or spaces.
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// registeredTool is a Tool with its schema compiled for validation.
type registeredTool struct {
	Tool
	schema *jsonschema.Schema
}

// newRegisteredTool checks t and prepares its schema.
func newRegisteredTool(t Tool) (*registeredTool, error) {
	if !toolNamePattern.MatchString(t.Name) {
		return nil, fmt.Errorf("tool name %q must be 1 to 64 characters of [A-Za-z0-9_-]", t.Name)
	}
	if strings.TrimSpace(t.Description) == "" {
		return nil, fmt.Errorf("tool %q has no description", t.Name)
	}
	if t.Handler == nil {
		return nil, fmt.Errorf("tool %q has no handler", t.Name)
	}
	if err := checkObjectSchema(t.InputSchema); err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(t.InputSchema))
	if err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
	}
	// Schemas are JSON Schema 2020-12, the dialect MCP assumes when "$schema" is absent.
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	url := "tollgate-mcp-tool-" + t.Name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
	}
	compiled, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
	}
	return &registeredTool{Tool: t, schema: compiled}, nil
}

// checkObjectSchema enforces what MCP clients require of an input schema: "type" is the literal
// "object", and "required", when present, is an array of strings (the TypeScript SDK, and with it
// Claude Code and Cursor, drops the whole tool list otherwise).
func checkObjectSchema(raw json.RawMessage) error {
	var s struct {
		Type     any             `json:"type"`
		Required json.RawMessage `json:"required"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	if s.Type != "object" {
		return fmt.Errorf(`"type" must be "object", not %v`, s.Type)
	}
	if s.Required != nil {
		var req []string
		if err := json.Unmarshal(s.Required, &req); err != nil || req == nil {
			return errors.New(`"required" must be an array of strings`)
		}
	}
	return nil
}

// sdkTool is the tool as the SDK lists it.
func (t *registeredTool) sdkTool() *sdk.Tool {
	destructive, openWorld := t.Annotations.Destructive, t.Annotations.OpenWorld
	return &sdk.Tool{
		Name:        t.Name,
		Title:       t.Title,
		Description: t.Description,
		InputSchema: t.InputSchema,
		Annotations: &sdk.ToolAnnotations{
			Title:           t.Annotations.Title,
			ReadOnlyHint:    t.Annotations.ReadOnly,
			DestructiveHint: &destructive,
			IdempotentHint:  t.Annotations.Idempotent,
			OpenWorldHint:   &openWorld,
		},
	}
}

// toolHandler adapts a tool to the SDK: it takes the caller from the context, validates the
// arguments, runs the handler and turns every failure into an isError result.
func (h *handler) toolHandler(t *registeredTool) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		res := h.runTool(ctx, t, req.Params.Arguments)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: res.Text}}, IsError: res.IsError}, nil
	}
}

// runTool runs t for the caller in ctx.
func (h *handler) runTool(ctx context.Context, t *registeredTool, raw json.RawMessage) (res Result) {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return ErrorResult("unauthenticated: no verified caller")
	}
	if isAbsent(raw) {
		raw = json.RawMessage("{}")
	}
	args, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return ErrorResult("invalid arguments for tool '%s': %v", t.Name, err)
	}
	if err := t.schema.Validate(args); err != nil {
		return ErrorResult("invalid arguments for tool '%s': %s", t.Name, validationMessage(err))
	}
	defer func() {
		if v := recover(); v != nil {
			h.log.ErrorContext(ctx, "mcp: tool panicked", "tool", t.Name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			res = ErrorResult("%s", internalMessage(ctx))
		}
	}()
	out, err := t.Handler(ctx, p, raw)
	if err != nil {
		if pe, ok := errors.AsType[*PublicError](err); ok {
			return ErrorResult("%s", pe.Message)
		}
		if ctx.Err() != nil {
			return ErrorResult("the call was cancelled")
		}
		h.log.ErrorContext(ctx, "mcp: tool failed", "tool", t.Name, "account", p.AccountID, "err", err)
		return ErrorResult("%s", internalMessage(ctx))
	}
	return out
}

// printer renders validation messages.
var printer = textmessage.NewPrinter(language.English)

// validationMessage lists what is wrong with the arguments, one "where: what" per failed
// constraint, joined with "; ": "limit: minimum: got 0, want 1".
func validationMessage(err error) string {
	ve, ok := errors.AsType[*jsonschema.ValidationError](err)
	if !ok {
		return err.Error()
	}
	var msgs []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			where := "arguments"
			if len(e.InstanceLocation) > 0 {
				where = strings.Join(e.InstanceLocation, ".")
			}
			msgs = append(msgs, where+": "+e.ErrorKind.LocalizedString(printer))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(msgs, "; ")
}
