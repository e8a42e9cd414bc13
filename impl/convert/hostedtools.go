package convert

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// HostedToolOf says whether a tool of wire type kind in a request of format f is one the
// provider runs itself and bills per call, and which. Responses: web_search and its dated and
// preview variants (web_search_preview, web_search_2025_08_26, ...), file_search,
// code_interpreter and image_generation. Messages: the versioned server tools web_search_* and
// code_execution_*. Client tools (functions, custom tools, computer use, shell, text editor,
// namespaces) are not hosted tools, nor are the tools that pull content into the prompt
// (contentTool), which never pass.
func HostedToolOf(f llm.Format, kind string) (llm.HostedTool, bool) {
	switch f {
	case llm.FormatResponses:
		switch {
		case strings.HasPrefix(kind, "web_search"):
			return llm.HostedWebSearch, true
		case kind == "file_search":
			return llm.HostedFileSearch, true
		case kind == "code_interpreter":
			return llm.HostedCodeExecution, true
		case kind == "image_generation":
			return llm.HostedImageGeneration, true
		}
	case llm.FormatMessages:
		switch {
		case strings.HasPrefix(kind, "web_search_"):
			return llm.HostedWebSearch, true
		case strings.HasPrefix(kind, "code_execution_"):
			return llm.HostedCodeExecution, true
		}
	}
	return 0, false
}

// contentTool says whether a tool of wire type kind in a request of format f makes the
// provider pull content into the prompt by itself, billed as input tokens with no bound the
// request states: Messages web_fetch_* (the pages it fetches) and Responses mcp (a remote MCP
// server's tool lists and results). The reservation cannot cover them, so they never reach an
// upstream (trial h12 D10: 99.5 % of a request's cost was waived). Messages' top-level
// mcp_servers is the same, and is removed by PlanHostedTools too. So is Messages' advisor_*
// (advisorTool), whose cost no price can state.
func contentTool(f llm.Format, kind string) bool {
	switch f {
	case llm.FormatMessages:
		return strings.HasPrefix(kind, "web_fetch_") || advisorTool(f, kind)
	case llm.FormatResponses:
		return kind == "mcp"
	}
	return false
}

// advisorTool says whether a tool of wire type kind in a request of format f is Anthropic's
// advisor tool (advisor_20260301, beta advisor-tool-2026-03-01): each call is a sub-inference of
// another model the request names (Opus advising Sonnet or Haiku) over the whole conversation,
// billed at that model's rates and reported only in usage.iterations (advisor_message items),
// apart from the top-level counts. No price of the served model states what it costs, so it
// never reaches an upstream: passed through, a tenant of a cheap model got the dearest one's
// advice unbilled.
func advisorTool(f llm.Format, kind string) bool {
	return f == llm.FormatMessages && strings.HasPrefix(kind, "advisor_")
}

// HostedPolicy says whether an upstream runs hosted tool t for the gateway's tenants, and the
// most calls of it one request may make (ok false: the tool is dropped).
type HostedPolicy func(t llm.HostedTool) (maxCalls int, ok bool)

// HostedPlan is what PlanHostedTools decided for a request of an upstream's own format (its
// changes to the request are edits).
type HostedPlan struct {
	// Dropped names the hosted tools removed, as the dropped-fields header lists them
	// ("tools[].web_search", "web_search_options").
	Dropped []string
	// Bounds holds, per hosted tool passed through, the most calls the request may make: what
	// the reservation covers and the most that is billed.
	Bounds llm.HostedCalls
}

// mayHaveHostedTools is the cheap test that lets a request with no tools skip the plan.
func mayHaveHostedTools(f llm.Format, v *jsonview.View) bool {
	switch f {
	case llm.FormatChat:
		return v.Has("web_search_options")
	case llm.FormatMessages:
		return v.Has("tools") || v.Has("mcp_servers")
	}
	return v.Has("tools")
}

// PlanHostedTools prepares a request of format f (its view v) for an upstream of the same
// format that runs the hosted tools policy allows, adding its changes to edits. Such a tool
// stays, with the upstream's own cap on its calls set to the policy's bound (Messages max_uses,
// lowered or added; Responses max_tool_calls, lowered or added, to the sum of the bounds); any
// other hosted tool is removed and named in Dropped, as an advisory field is, and so is every
// tool that pulls content into the prompt (contentTool) and Messages' mcp_servers. Chat's
// web_search_options counts as one web search call. A tool_choice that forces a removed tool is
// a 400 naming tool_choice: the answer it asks for cannot be given. Every other byte stays as
// the client sent it.
func PlanHostedTools(f llm.Format, v *jsonview.View, policy HostedPolicy, edits *jsonview.Edits) (HostedPlan, error) {
	var plan HostedPlan
	if !mayHaveHostedTools(f, v) {
		return plan, nil
	}
	var (
		removed        []llm.HostedTool
		removedContent []string // the wire types of the content tools removed
		maxCalls       = -1     // the client's Responses max_tool_calls, -1 when absent
		calls          []jsonview.Member
	)
	body := v.Body()
	for _, m := range v.Members() {
		key, value := m.Key, body[m.Start:m.End]
		switch {
		case f == llm.FormatChat && string(key) == "web_search_options" && !isNull(value):
			if n, ok := policy(llm.HostedWebSearch); ok && n > 0 {
				plan.Bounds[llm.HostedWebSearch] = 1
			} else {
				plan.Dropped = append(plan.Dropped, "web_search_options")
				removed = append(removed, llm.HostedWebSearch)
				edits.Remove(m)
			}
		case f == llm.FormatMessages && string(key) == "mcp_servers" && !isNull(value):
			plan.Dropped = append(plan.Dropped, "mcp_servers")
			edits.Remove(m)
		case f != llm.FormatChat && string(key) == "tools":
			out, err := planTools(f, value, policy, &plan, &removed, &removedContent)
			if err != nil {
				return plan, err
			}
			if out != nil {
				edits.Replace(m, out)
			}
		case f == llm.FormatResponses && string(key) == "max_tool_calls" && !isNull(value):
			n, err := parseInt(value, "max_tool_calls")
			if err != nil {
				return plan, err
			}
			maxCalls = n
			calls = append(calls, m) // set below, once the bounds are known
		}
	}
	if err := forcedRemoved(f, v, removed, removedContent); err != nil {
		return plan, err
	}
	var value []byte
	if f == llm.FormatResponses && plan.Bounds.Any() {
		var sum int64
		for _, n := range plan.Bounds {
			sum += n
		}
		if maxCalls >= 0 && int64(maxCalls) < sum {
			sum = int64(maxCalls)
		}
		value = strconv.AppendInt(nil, sum, 10)
		if len(calls) == 0 {
			edits.Add("max_tool_calls", value)
		}
	} else {
		value = strconv.AppendInt(nil, int64(max(maxCalls, 0)), 10)
	}
	for _, m := range calls {
		edits.Replace(m, value)
	}
	return plan, nil
}

// planTools decides each hosted tool of a tools array (the value of the top-level member) and
// returns the array to send, or nil when it is unchanged.
func planTools(f llm.Format, value []byte, policy HostedPolicy, plan *HostedPlan, removed *[]llm.HostedTool, removedContent *[]string) ([]byte, error) {
	tools, ok := scanArray(value)
	if !ok {
		return nil, nil // the wrong shape is the upstream's to refuse
	}
	changed := false
	kept := make([][]byte, 0, len(tools))
	for _, raw := range tools {
		kind, _ := typeAndName(raw)
		if contentTool(f, kind) {
			plan.Dropped = append(plan.Dropped, "tools[]."+kind)
			*removedContent = append(*removedContent, kind)
			changed = true
			continue
		}
		t, hosted := HostedToolOf(f, kind)
		if !hosted {
			kept = append(kept, raw)
			continue
		}
		n, ok := policy(t)
		if !ok || n <= 0 {
			plan.Dropped = append(plan.Dropped, "tools[]."+kind)
			*removed = append(*removed, t)
			changed = true
			continue
		}
		plan.Bounds[t] += int64(n)
		if f == llm.FormatResponses && t == llm.HostedCodeExecution {
			// A call is priced as one container of the default size.
			sized, dropped, err := defaultContainerSize(raw)
			if err != nil {
				return nil, err
			}
			if dropped {
				plan.Dropped = append(plan.Dropped, "tools[].code_interpreter.container.memory_limit")
				changed, raw = true, sized
			}
		}
		if f == llm.FormatMessages && t == llm.HostedWebSearch {
			// Anthropic's own cap on the searches of one request.
			capped, err := capMember(raw, "max_uses", n)
			if err != nil {
				return nil, err
			}
			changed = changed || !bytes.Equal(capped, raw)
			raw = capped
		}
		kept = append(kept, raw)
	}
	if !changed {
		return nil, nil
	}
	return append(append([]byte("["), bytes.Join(kept, []byte(","))...), ']'), nil
}

// defaultContainerSize returns the Responses code_interpreter tool obj with every
// container.memory_limit but the default ("1g") removed, and whether it removed one. OpenAI bills
// a container by its size (4g, 16g and 64g at 4, 16 and 64 times the 1g price), and the
// configured price_micros_per_call prices one call of the tool, as a container of the default
// size: a larger one would be billed at that price. A container named by its id (a string) is
// left as it is.
func defaultContainerSize(obj []byte) ([]byte, bool, error) {
	var tool jsonview.View
	if err := tool.Parse(obj); err != nil {
		return nil, false, errSyntax
	}
	var edits jsonview.Edits
	dropped := false
	for _, m := range tool.Members() {
		value := obj[m.Start:m.End]
		if string(m.Key) != "container" || firstByte(value) != '{' {
			continue
		}
		var container jsonview.View
		if container.Parse(value) != nil {
			return nil, false, errSyntax
		}
		var inner jsonview.Edits
		for _, c := range container.Members() {
			limit := value[c.Start:c.End]
			if string(c.Key) == "memory_limit" && !isNull(limit) && string(limit) != `"1g"` {
				inner.Remove(c)
			}
		}
		if !inner.Empty() {
			edits.Replace(m, inner.AppendTo(nil, &container))
			dropped = true
		}
	}
	if !dropped {
		return obj, false, nil
	}
	return edits.AppendTo(nil, &tool), true, nil
}

// capMember returns the object obj with its integer member key lowered to n, or added as n
// when absent.
func capMember(obj []byte, key string, n int) ([]byte, error) {
	var v jsonview.View
	if err := v.Parse(obj); err != nil {
		return nil, errSyntax
	}
	var edits jsonview.Edits
	found := false
	for _, m := range v.Members() {
		value := obj[m.Start:m.End]
		if string(m.Key) != key || isNull(value) {
			continue
		}
		found = true
		current, err := parseInt(value, key)
		if err != nil {
			return nil, err
		}
		if current > n {
			edits.Replace(m, strconv.AppendInt(nil, int64(n), 10))
		}
	}
	if !found {
		edits.Add(key, strconv.AppendInt(nil, int64(n), 10))
	}
	if edits.Empty() {
		return obj, nil
	}
	return edits.AppendTo(nil, &v), nil
}

// forcedRemoved is the 400 for a tool_choice that forces a hosted tool that was removed: a
// Responses tool_choice of the tool's type, a Messages tool_choice {type: tool} naming a server
// tool (whose name is its stem: web_search, code_execution).
func forcedRemoved(f llm.Format, v *jsonview.View, removed []llm.HostedTool, removedContent []string) error {
	if len(removed) == 0 && len(removedContent) == 0 {
		return nil
	}
	choice, _ := v.Value("tool_choice")
	if firstByte(choice) != '{' {
		return nil
	}
	obj, err := parseObject(choice, "tool_choice")
	if err != nil {
		return nil
	}
	kind, _ := optString(obj.get("type"), "tool_choice.type")
	forced, hosted := HostedToolOf(f, kind)
	if f == llm.FormatMessages && kind == "tool" {
		name, _ := optString(obj.get("name"), "tool_choice.name")
		forced, hosted = llm.HostedToolNamed(name)
		kind = name
	}
	if hosted && slices.Contains(removed, forced) {
		return apierror.Invalid("tool_choice", "tool_choice forces the tool '%s', which tollgate does not pass to this model's upstream: the provider bills it per call and the gateway's configuration gives it no price", kind)
	}
	if len(removedContent) > 0 && (kind == "mcp" && f == llm.FormatResponses || f == llm.FormatMessages && kind == "web_fetch") {
		return apierror.Invalid("tool_choice", "tool_choice forces the tool '%s', which tollgate does not pass to any upstream: the provider bills what it pulls into the prompt, with no bound the gateway can reserve", kind)
	}
	if f == llm.FormatMessages && kind == "advisor" && slices.ContainsFunc(removedContent, func(k string) bool { return advisorTool(f, k) }) {
		return apierror.Invalid("tool_choice", "tool_choice forces the tool 'advisor', which tollgate does not pass to any upstream: the provider bills its calls at the advisor model's rates, which the gateway's price of this model does not give")
	}
	return nil
}

// HostedItemTool says whether a Responses output item of type kind records a call of a hosted
// tool, and which: web_search_call, file_search_call, code_interpreter_call,
// image_generation_call.
func HostedItemTool(kind string) (llm.HostedTool, bool) {
	switch kind {
	case "web_search_call":
		return llm.HostedWebSearch, true
	case "file_search_call":
		return llm.HostedFileSearch, true
	case "code_interpreter_call":
		return llm.HostedCodeExecution, true
	case "image_generation_call":
		return llm.HostedImageGeneration, true
	}
	return 0, false
}

// ServerToolCall says whether a Messages server_tool_use block named name is a call of a
// hosted tool, and which: web_search, or one of code execution's tools (code_execution,
// bash_code_execution, text_editor_code_execution).
func ServerToolCall(name string) (llm.HostedTool, bool) {
	switch name {
	case "web_search":
		return llm.HostedWebSearch, true
	case "code_execution", "bash_code_execution", "text_editor_code_execution":
		return llm.HostedCodeExecution, true
	}
	return 0, false
}

// hostedItems counts the hosted-tool calls among the items of a Responses answer's output.
func hostedItems(output []byte) llm.HostedCalls {
	var calls llm.HostedCalls
	if !bytes.Contains(output, []byte(`_call"`)) {
		return calls
	}
	items, _ := scanArray(output)
	for _, item := range items {
		kind, _ := typeAndName(item)
		if t, hosted := HostedItemTool(kind); hosted {
			calls[t]++
		}
	}
	return calls
}

// serverToolBlocks counts the hosted-tool calls among the server_tool_use blocks of a Messages
// answer's content.
func serverToolBlocks(content []byte) llm.HostedCalls {
	var calls llm.HostedCalls
	if !bytes.Contains(content, []byte(`"server_tool_use"`)) {
		return calls
	}
	blocks, _ := scanArray(content)
	for _, block := range blocks {
		kind, name := typeAndName(block)
		if t, hosted := ServerToolCall(name); hosted && kind == "server_tool_use" {
			calls[t]++
		}
	}
	return calls
}

// typeAndName reads the string members type and name of a JSON object (empty for what it
// lacks, or for what is not an object), the two members that say what a tool, item or block is.
func typeAndName(obj []byte) (kind, name string) {
	_ = scanTop(obj, func(key, value []byte) error {
		switch string(key) {
		case "type":
			kind, _ = stringValue(value)
		case "name":
			name, _ = stringValue(value)
		}
		return nil
	})
	return kind, name
}

// HostedToolsIn says which hosted tools a request of format f (its view v) asks for (chat's
// web_search_options, or a hosted tool in tools), for the reservation; a request with no tools
// costs a look-up.
func HostedToolsIn(f llm.Format, v *jsonview.View) (present [llm.NumHostedTools]bool) {
	if !mayHaveHostedTools(f, v) {
		return present
	}
	body := v.Body()
	for _, m := range v.Members() {
		key, value := m.Key, body[m.Start:m.End]
		switch {
		case f == llm.FormatChat && string(key) == "web_search_options" && !isNull(value):
			present[llm.HostedWebSearch] = true
		case f != llm.FormatChat && string(key) == "tools":
			tools, _ := scanArray(value)
			for _, raw := range tools {
				kind, _ := typeAndName(raw)
				if t, ok := HostedToolOf(f, kind); ok {
					present[t] = true
				}
			}
		}
	}
	return present
}
