package convert

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
)

// EncodeRequest writes req as a request body for an upstream of format f, with model
// upstreamModel.
//
// When f is req.Source, every Extra field passes through untouched (but the end-user
// identifiers when req.EndUser replaces them), and each modelled field
// group the caller left unchanged is re-sent exactly as the client sent it (req.Raw); a
// streaming chat request always asks for usage (stream_options.include_usage), because the
// gateway meters every answer. No field is dropped or refused.
//
// For another format the common fields are translated (see the package documentation for the
// table). A field that changes what the answer must be and that f cannot honour gives a 400
// *apierror.Error naming the field (with the client's wire name); an advisory field f cannot
// use is dropped and its client-side wire name returned in dropped (sorted, without
// duplicates). The end-user identifier sent is req.EndUser, whatever the client sent (chat and
// Responses safety_identifier, Messages metadata.user_id): the client's own (ClientEndUser) is
// consumed, never carried to another format as it came; when req.EndUser is empty none is
// sent and the client's is dropped and named. An Anthropic Messages
// upstream requires max_tokens: the caller must fill
// req.MaxTokens (e.g. from the model's output limit) before encoding to it when the client gave
// no bound; a zero MaxTokens is then an internal error, not a 400.
func EncodeRequest(f llm.Format, req *llm.Request, upstreamModel string) (body []byte, dropped []string, err error) {
	return EncodeRequestWith(f, req, upstreamModel, EncodeOptions{})
}

// EncodeOptions are what an upstream lets EncodeRequestWith add to a translated request.
type EncodeOptions struct {
	// AutomaticCache lets a request translated from an OpenAI format for a Messages upstream
	// ask for Anthropic's automatic prompt caching (see automaticCache).
	AutomaticCache bool
}

// EncodeRequestWith is EncodeRequest with what the upstream allows (opts).
func EncodeRequestWith(f llm.Format, req *llm.Request, upstreamModel string, opts EncodeOptions) (body []byte, dropped []string, err error) {
	groups, ok := targetGroups[f]
	if !ok {
		return nil, nil, fmt.Errorf("convert: unknown format %q", f)
	}
	w := &writer{src: req.Source, dst: f, req: req, same: req.Source == f}
	if !w.same {
		if err := w.foreign(); err != nil {
			return nil, nil, err
		}
	}
	var base *llm.Request
	if w.same {
		base = &llm.Request{}
		d := decoder{req: base}
		_ = d.fields(f, req.Raw) // Raw was decoded once already; a failure leaves groups unequal
	}
	o := object{{"model", upstreamModel}}
	for _, g := range groups {
		if w.same && g.equal != nil && g.equal(base, req) {
			for _, k := range g.keys {
				if v, ok := req.Raw[k]; ok {
					o.set(k, v)
				}
			}
			continue
		}
		if err := g.write(w, &o); err != nil {
			return nil, nil, err
		}
	}
	if w.fault != nil {
		return nil, nil, w.fault
	}
	// The end-user identifier is the one the caller put in req.EndUser: the client's own
	// value (in Extra) goes only to its own format, when the caller set none.
	endUserWire(f, req.EndUser, &o)
	if w.same {
		for _, k := range sortedKeys(req.Extra) {
			if !o.has(k) && (req.EndUser == "" || extraFields[f][k] != endUserField) {
				o.set(k, req.Extra[k])
			}
		}
	} else {
		for _, k := range w.carried {
			o.set(k, req.Extra[k])
		}
	}
	if !w.same && f == llm.FormatResponses {
		// Chat and Messages clients do not expect the upstream to keep their conversation.
		o.set("store", false)
	}
	if !w.same && f == llm.FormatMessages && opts.AutomaticCache {
		if cc, ok := automaticCache(req); ok {
			o.set("cache_control", cc)
			// The cache hints are honoured: they asked for the cache that is now asked for.
			delete(w.dropped, "prompt_cache_key")
			delete(w.dropped, "prompt_cache_retention")
		}
	}
	if body, err = marshal(o); err != nil {
		return nil, nil, err
	}
	for name := range w.dropped {
		dropped = append(dropped, name)
	}
	sort.Strings(dropped)
	return body, dropped, nil
}

// Anthropic's automatic prompt caching, as a translated request asks for it: a top-level
// cache_control puts a breakpoint on the request's last cacheable block, so that the next
// turn of the conversation reads its prefix from the cache
// (https://platform.claude.com/docs/en/build-with-claude/prompt-caching).
var (
	cacheFiveMinutes = json.RawMessage(`{"type":"ephemeral"}`)
	cacheOneHour     = json.RawMessage(`{"type":"ephemeral","ttl":"1h"}`)
)

// automaticCache is the top-level cache_control a request translated from an OpenAI format
// for a Messages upstream asks for, if any. OpenAI caches every prompt's prefix by itself at
// no extra charge; Anthropic caches only where asked, and bills a cache write at 1.25 times the
// input price (twice for an hour) and a read at a tenth. So the gateway asks where a later
// request will read what it writes: a conversation that goes on (an assistant turn or a tool
// result in it: every turn of a coding agent's loop after its first), or a request that
// carries a prompt_cache_key (the client says its prefix recurs). A one-off request is not
// cached: it would pay the write and never read it. prompt_cache_retention "24h" asks for
// Anthropic's longest life, an hour; anything else for the default five minutes.
func automaticCache(req *llm.Request) (json.RawMessage, bool) {
	ask := !isNull(req.Extra["prompt_cache_key"])
	for i := 0; !ask && i < len(req.Messages); i++ {
		ask = req.Messages[i].Role == llm.RoleAssistant || req.Messages[i].Role == llm.RoleTool
	}
	if !ask {
		return nil, false
	}
	if strings.TrimSpace(string(req.Extra["prompt_cache_retention"])) == `"24h"` {
		return cacheOneHour, true
	}
	return cacheFiveMinutes, true
}

// group is a set of top-level fields of a target format that are written together from the
// neutral form.
type group struct {
	// keys are the group's wire names in the target format.
	keys []string
	// equal reports whether the neutral fields the group is written from are the same in
	// two requests; nil means the group is always written from the neutral form.
	equal func(a, b *llm.Request) bool
	write func(w *writer, o *object) error
}

// writer holds the state of one EncodeRequest call.
type writer struct {
	src, dst llm.Format
	req      *llm.Request
	// same is true when the target is the request's own format: nothing is refused then.
	same    bool
	dropped map[string]bool
	// carried are the Extra fields passed to the other format as they are (see openAIShared),
	// in name order.
	carried []string
	// fault is a caller's mistake found while writing, reported once every field is written.
	fault error
	// history are the tools a translated request's history calls and it does not offer,
	// declared for a Messages upstream (historyTools).
	history []string
	// fresh are the ids given to the calls of a translated request's history whose id an
	// earlier call has, and to their results (freshCallIDs); nil when every call's id is its
	// own.
	fresh *freshIDs
}

// cross reports whether the target differs from the source.
func (w *writer) cross() bool { return !w.same }

// drop records a field the target cannot use.
func (w *writer) drop(name string) {
	if w.dropped == nil {
		w.dropped = make(map[string]bool)
	}
	w.dropped[name] = true
}

// formatNames are the formats as a client reads them.
var formatNames = map[llm.Format]string{
	llm.FormatChat:      "the OpenAI chat completions API",
	llm.FormatResponses: "the OpenAI Responses API",
	llm.FormatMessages:  "the Anthropic Messages API",
}

// refuse is the 400 for a field the target cannot honour. It does not say that the target
// format has no such feature (Messages has structured outputs, chat takes PDF files), only that
// the gateway does not carry it there, and where it is served as sent.
func (w *writer) refuse(param, what string) error {
	return apierror.Invalid(param, "%s cannot be honoured by this model: it is served through %s, and the gateway does not carry this across formats. A model served through %s takes it as sent.", what, formatNames[w.dst], formatNames[w.src])
}

// srcName is the client-side wire name of a neutral field, for errors and drop lists.
func (w *writer) srcName(field string) string {
	switch w.src {
	case llm.FormatMessages:
		switch field {
		case "stop":
			return "stop_sequences"
		case "parallel_tool_calls":
			return "tool_choice.disable_parallel_tool_use"
		}
	case llm.FormatResponses:
		switch field {
		case "response_format":
			return "text.format"
		case "max_tokens":
			return "max_output_tokens"
		case "reasoning_effort":
			return "reasoning.effort"
		case "verbosity":
			return "text.verbosity"
		}
	}
	return field
}

// paramOf is the param naming a part of a decoded request ("messages" when it was not
// decoded).
func paramOf(path string) string {
	if path == "" {
		return "messages"
	}
	return path
}

// pathName is the generic wire name of something at path (a Path of the neutral form) with a
// suffix, or fallback when the path is unknown.
func pathName(path, suffix, fallback string) string {
	if path == "" {
		return fallback
	}
	return genericPath(path) + suffix
}

// fieldClass classifies a top-level field that is not modelled, for another format.
type fieldClass int

const (
	// advisory: dropped and named.
	advisory fieldClass = iota
	// decisive: changes what the answer must be; refused when set to anything but an unset
	// value (false, 0, "", [], and {} for logit_bias), dropped and named otherwise.
	decisive
	// gatewaySide: configures the gateway's own answer to the client; consumed, not named.
	gatewaySide
	// openAIShared: a field the two OpenAI formats share, with the same name and meaning:
	// carried as it is between them, dropped and named (advisory) for Messages.
	openAIShared
	// endUserField: names the request's end user (ClientEndUser); consumed, not named, when
	// the upstream is sent Request.EndUser in its own format's field (only a user sent beside a
	// safety_identifier, which wins, is named); dropped and named when it is sent none.
	endUserField
)

// extraFields classify, per source format, the top-level fields that are not modelled. A field
// not listed is advisory: it is dropped and named, never silently.
var extraFields = map[llm.Format]map[string]fieldClass{
	llm.FormatChat: {
		"logprobs":           decisive,
		"top_logprobs":       decisive,
		"audio":              decisive,
		"modalities":         decisive, // only when it asks for more than text
		"web_search_options": advisory, // a hosted tool: dropped where it is not passed
		"functions":          decisive,
		"function_call":      decisive,
		"logit_bias":         decisive,
		"prediction":         advisory,
		"seed":               advisory,
		"presence_penalty":   advisory,
		"frequency_penalty":  advisory,
		"metadata":           advisory,
		"store":              advisory,
		"service_tier":       openAIShared, // the exchange drops a tier the upstream's price lacks
		"user":               endUserField,
		"safety_identifier":  endUserField,
		// Prompt-cache hints (https://platform.openai.com/docs/guides/prompt-caching).
		"prompt_cache_key":       openAIShared,
		"prompt_cache_retention": openAIShared,
	},
	llm.FormatResponses: {
		"previous_response_id":   decisive,
		"conversation":           decisive,
		"prompt":                 decisive,
		"background":             decisive,
		"max_tool_calls":         advisory, // bounds hosted-tool calls, which other formats do not get
		"top_logprobs":           decisive,
		"stream_options":         gatewaySide,
		"include":                advisory,
		"store":                  advisory,
		"metadata":               advisory,
		"service_tier":           openAIShared, // the exchange drops a tier the upstream's price lacks
		"user":                   endUserField,
		"safety_identifier":      endUserField,
		"prompt_cache_key":       openAIShared,
		"prompt_cache_retention": openAIShared,
		"truncation":             advisory,
		"context_management":     advisory,
	},
	llm.FormatMessages: {
		"container":          decisive,
		"mcp_servers":        decisive,
		"metadata":           endUserField, // its one member is user_id
		"service_tier":       advisory,
		"thinking":           advisory,
		"top_k":              advisory,
		"cache_control":      advisory, // automatic prompt caching; OpenAI caches by itself
		"context_management": advisory,
	},
}

// classify returns the class of the top-level field key with value v of format src, taking
// the value into account for decisive fields (an unset one is only advisory).
func classify(src llm.Format, key string, v json.RawMessage) fieldClass {
	c := extraFields[src][key]
	if c != decisive {
		return c
	}
	switch {
	case src == llm.FormatChat && key == "modalities":
		var mods []string
		_ = json.Unmarshal(v, &mods)
		for _, m := range mods {
			if m != "text" {
				return decisive
			}
		}
		return advisory
	}
	switch strings.TrimSpace(string(v)) {
	case "false", "0", `""`, "[]", "null":
		return advisory
	case "{}": // an empty object is a no-op for logit_bias, but turns web search or audio on
		if key == "logit_bias" {
			return advisory
		}
	}
	return decisive
}

// foreign applies the field tables to what the neutral form does not hold: the request's
// Unmodelled list, then its Extra fields (in name order).
func (w *writer) foreign() error {
	for _, u := range w.req.Unmodelled {
		if u.Advisory {
			w.drop(u.Name)
			continue
		}
		what := "`" + u.Param + "`"
		if seg, pseg := lastSegment(u.Name), lastSegment(u.Param); seg != pseg && seg != "" {
			what += " (" + seg + ")"
		}
		return w.refuse(u.Param, what)
	}
	for _, k := range sortedKeys(w.req.Extra) {
		v := w.req.Extra[k]
		if isNull(v) {
			continue // the same as absent
		}
		switch classify(w.src, k, v) {
		case gatewaySide:
		case endUserField:
			// Sent none (an upstream that may refuse the target's field, or end_user_ids off),
			// the client's is dropped and named; else only a user beside a safety_identifier.
			if w.req.EndUser == "" || (k == "user" && nonEmptyString(w.req.Extra["safety_identifier"])) {
				w.drop(k)
			}
		case openAIShared:
			if w.dst == llm.FormatMessages {
				w.drop(k)
			} else {
				w.carried = append(w.carried, k)
			}
		case decisive:
			if err := sharedStateRefusal(sharedStateFields[w.src], w.src, []byte(k), v); err != nil {
				return err // no upstream takes it as sent: the gateway's own reason
			}
			return w.refuse(k, "`"+k+"`")
		default:
			w.drop(k)
		}
	}
	if err := w.checkToolNames(); err != nil {
		return err
	}
	w.freshCallIDs()
	return w.somethingToSay()
}

// somethingToSay refuses a translation that would leave the upstream nothing to answer: no
// message at all for a chat upstream (which refuses an empty messages array, and answers
// instructions alone), no turn for a Messages upstream (which needs at least one). It happens
// when a Responses request's input holds only items that carry no message across formats (a
// reasoning item, say); before, the upstream was called and refused it in its own words.
func (w *writer) somethingToSay() error {
	if len(w.req.Messages) > 0 || (w.dst == llm.FormatChat && w.req.System != "") {
		return nil
	}
	param := "messages"
	if w.src == llm.FormatResponses {
		param = "input"
	}
	return apierror.Invalid(param, "`%s` holds no message for the model: this model is served through %s, which needs at least one, and items such as reasoning carry none across formats. Send a message with content.", param, formatNames[w.dst])
}

// lastSegment is what follows the last dot of a wire path.
func lastSegment(p string) string {
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// eq builds an equality test of the fields get returns.
func eq[T any](get func(r *llm.Request) T) func(a, b *llm.Request) bool {
	return func(a, b *llm.Request) bool { return reflect.DeepEqual(get(a), get(b)) }
}

// Field groups shared by the targets.
var (
	eqTemperature = eq(func(r *llm.Request) *float64 { return r.Temperature })
	eqTopP        = eq(func(r *llm.Request) *float64 { return r.TopP })
	eqMaxTokens   = eq(func(r *llm.Request) int { return r.MaxTokens })
	eqStop        = eq(func(r *llm.Request) []string { return r.Stop })
	eqTools       = eq(func(r *llm.Request) []llm.Tool { return r.Tools })
	eqToolChoice  = eq(func(r *llm.Request) *llm.ToolChoice { return r.ToolChoice })
	eqParallel    = eq(func(r *llm.Request) *bool { return r.ParallelToolCalls })
	eqFormat      = eq(func(r *llm.Request) *llm.ResponseFormat { return r.ResponseFormat })
	eqEffort      = eq(func(r *llm.Request) string { return r.ReasoningEffort })
	eqVerbosity   = eq(func(r *llm.Request) string { return r.Verbosity })
	eqStream      = eq(func(r *llm.Request) bool { return r.Stream })
	eqSystem      = eq(func(r *llm.Request) string { return r.System })
	eqMessages    = eq(func(r *llm.Request) []llm.Message { return r.Messages })
	eqConvo       = func(a, b *llm.Request) bool { return eqSystem(a, b) && eqMessages(a, b) }
)

// targetGroups are, per target format, its field groups in output order.
var targetGroups = map[llm.Format][]group{
	llm.FormatChat: {
		{[]string{"messages"}, eqConvo, (*writer).chatMessages},
		{[]string{"max_tokens", "max_completion_tokens"}, eqMaxTokens, (*writer).chatMaxTokens},
		{[]string{"temperature"}, eqTemperature, (*writer).temperature},
		{[]string{"top_p"}, eqTopP, (*writer).topP},
		{[]string{"n"}, eq(func(r *llm.Request) int { return r.N }), (*writer).chatN},
		{[]string{"stop"}, eqStop, (*writer).chatStop},
		{[]string{"tools"}, eqTools, (*writer).chatTools},
		{[]string{"tool_choice"}, eqToolChoice, (*writer).chatToolChoice},
		{[]string{"parallel_tool_calls"}, eqParallel, (*writer).parallelToolCalls},
		{[]string{"response_format"}, eqFormat, (*writer).chatResponseFormat},
		{[]string{"reasoning_effort"}, eqEffort, (*writer).chatReasoningEffort},
		{[]string{"verbosity"}, eqVerbosity, (*writer).chatVerbosity},
		{[]string{"stream", "stream_options"}, nil, (*writer).chatStream},
	},
	llm.FormatResponses: {
		{[]string{"instructions", "input"}, eqConvo, (*writer).responsesInput},
		{[]string{"max_output_tokens"}, eqMaxTokens, (*writer).responsesMaxTokens},
		{[]string{"temperature"}, eqTemperature, (*writer).temperature},
		{[]string{"top_p"}, eqTopP, (*writer).topP},
		{nil, nil, (*writer).responsesChecks},
		{[]string{"tools"}, eqTools, (*writer).responsesTools},
		{[]string{"tool_choice"}, eqToolChoice, (*writer).responsesToolChoice},
		{[]string{"parallel_tool_calls"}, eqParallel, (*writer).parallelToolCalls},
		{[]string{"text"}, func(a, b *llm.Request) bool { return eqFormat(a, b) && eqVerbosity(a, b) }, (*writer).responsesText},
		{[]string{"reasoning"}, eqEffort, (*writer).responsesReasoning},
		{[]string{"stream"}, eqStream, (*writer).stream},
	},
	llm.FormatMessages: {
		{[]string{"max_tokens"}, eqMaxTokens, (*writer).messagesMaxTokens},
		{[]string{"system"}, eqSystem, (*writer).messagesSystem},
		{[]string{"messages"}, eqMessages, (*writer).messagesMessages},
		{[]string{"temperature"}, eqTemperature, (*writer).messagesTemperature},
		{[]string{"top_p"}, func(a, b *llm.Request) bool { return eqTopP(a, b) && eqTemperature(a, b) }, (*writer).messagesTopP},
		{[]string{"stop_sequences"}, eqStop, (*writer).messagesStop},
		{nil, nil, (*writer).messagesChecks},
		{[]string{"output_config", "output_format"}, eqFormat, (*writer).messagesOutputConfig},
		{[]string{"tools"}, eqTools, (*writer).messagesTools},
		{[]string{"tool_choice"}, func(a, b *llm.Request) bool { return eqToolChoice(a, b) && eqParallel(a, b) }, (*writer).messagesToolChoice},
		{[]string{"stream"}, eqStream, (*writer).stream},
	},
}

// temperature writes temperature, as every format names it.
func (w *writer) temperature(o *object) error {
	if w.req.Temperature != nil {
		o.set("temperature", w.req.Temperature)
	}
	return nil
}

// topP writes top_p, as every format names it.
func (w *writer) topP(o *object) error {
	if w.req.TopP != nil {
		o.set("top_p", w.req.TopP)
	}
	return nil
}

// stream writes stream when it is true (or was sent).
func (w *writer) stream(o *object) error {
	if w.req.Stream || (w.same && w.req.Raw["stream"] != nil) {
		o.set("stream", w.req.Stream)
	}
	return nil
}

// parallelToolCalls writes the OpenAI parallel_tool_calls (only with tools, as OpenAI
// requires, unless the client itself sent it).
func (w *writer) parallelToolCalls(o *object) error {
	if w.req.ParallelToolCalls != nil && (w.same || len(w.req.Tools) > 0) {
		o.set("parallel_tool_calls", *w.req.ParallelToolCalls)
	}
	return nil
}

// toolChoiceNeeded reports whether a tool choice should be written: OpenAI and Anthropic
// reject one without tools.
func (w *writer) toolChoiceNeeded() bool {
	return w.req.ToolChoice != nil && (w.same || len(w.req.Tools) > 0)
}

// dropDetail names an image detail hint a target cannot use ("auto" is what it does anyway).
func (w *writer) dropDetail(p llm.Part) {
	if p.Detail == "" || p.Detail == "auto" {
		return
	}
	suffix := ".detail"
	if w.src == llm.FormatChat {
		suffix = ".image_url.detail"
	}
	w.drop(pathName(p.Path, suffix, "detail"))
}

// dropIsError names the error flag of a tool result a target cannot carry.
func (w *writer) dropIsError(m llm.Message) {
	if m.IsError {
		w.drop(pathName(m.Path, ".is_error", "is_error"))
	}
}

// emptySchema is the JSON Schema of a function without parameters.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// schemaOrEmpty is a tool's parameter schema, or the empty object schema.
func schemaOrEmpty(t llm.Tool) json.RawMessage {
	if len(t.Parameters) == 0 {
		return emptySchema
	}
	return t.Parameters
}

// documentFilename is the file name of a document for the OpenAI formats, which want one: the
// client's, or "document" with the extension of its media type.
func documentFilename(p llm.Part) string {
	if p.Filename != "" {
		return p.Filename
	}
	switch p.MediaType {
	case "application/pdf":
		return "document.pdf"
	case "text/plain":
		return "document.txt"
	}
	return "document"
}

// textOf concatenates the text parts.
func textOf(parts []llm.Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Kind == llm.PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
