package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/tool"
)

// toolNamePattern is the name rule: what Anthropic's and OpenAI's APIs accept for a function name
// (with the mcp__server__ prefix clients add in mind), without dots or spaces.
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// registeredTool is a tool.Tool with its schema compiled for validation.
type registeredTool struct {
	tool.Tool
	schema *tool.Schema
}

// newRegisteredTool checks t and prepares its schema.
func newRegisteredTool(t tool.Tool) (*registeredTool, error) {
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
	compiled, err := tool.CompileSchema(t)
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
// arguments, runs the handler and turns every failure into an isError result, whose kind it
// notes on the call's outcome (its span and metric, trace.go).
func (h *handler) toolHandler(t *registeredTool) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		res, errType := h.runTool(ctx, t, req.Params.Arguments)
		if res.IsError {
			outcomeOf(ctx).toolError(cmp.Or(errType, errorToolError))
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: res.Text}}, IsError: res.IsError}, nil
	}
}

// runTool runs t for the caller in ctx. errType says what kind of failure an error result is
// (the span's error.type; empty for the tool's own isError results).
func (h *handler) runTool(ctx context.Context, t *registeredTool, raw json.RawMessage) (res tool.Result, errType string) {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return tool.ErrorResult("%s", noCallerMessage), errorUnauthorized
	}
	if isAbsent(raw) {
		raw = json.RawMessage("{}")
	}
	if err := t.schema.Check(raw); err != nil {
		return tool.ErrorResult("invalid arguments for tool '%s': %v", t.Name, err), errorInvalidArgs
	}
	defer func() {
		if v := recover(); v != nil {
			h.log.ErrorContext(ctx, "mcp: tool panicked", "tool", t.Name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			res, errType = tool.ErrorResult("%s", internalMessage(ctx)), errorInternal
		}
	}()
	out, err := t.Handler(ctx, p, raw)
	if err != nil {
		if pe, ok := errors.AsType[*tool.PublicError](err); ok {
			return tool.ErrorResult("%s", pe.Message), errorToolError
		}
		if ctx.Err() != nil {
			return tool.ErrorResult("the call was cancelled"), errorCancelled
		}
		h.log.ErrorContext(ctx, "mcp: tool failed", "tool", t.Name, "account", p.AccountID, "err", err)
		return tool.ErrorResult("%s", internalMessage(ctx)), errorInternal
	}
	return out, ""
}
