package convert

import (
	"bytes"
	"math"
	"unicode/utf8"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/jsontext"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// ResponseUsage reads only the usage of a complete upstream answer of format f, for answers
// passed to a client of the same format untouched: it scans the top level and reads only the
// usage's counts, the service tier (and the status or type that says the answer is one), without
// reflection. The counts follow DecodeResponse's convention (input includes cached tokens and
// cache writes; see AnthropicCounts for Messages).
func ResponseUsage(f llm.Format, body []byte) (llm.Usage, error) {
	var v jsonview.View
	if v.Parse(body) != nil {
		return llm.Usage{}, upstreamError("the answer is not a JSON object")
	}
	return ResponseUsageOf(f, &v)
}

// ResponseUsageOf is ResponseUsage of an answer already read into v (jsonview's Parse), so that
// the usage, the trace's facts (ResponseFactsOf) and the model's rewrite (SetModelOf) read one
// pass over the answer's top level.
func ResponseUsageOf(f llm.Format, v *jsonview.View) (llm.Usage, error) {
	var usage, status, typ, choices, errValue, output, content, tier []byte
	_ = eachTop(v, func(key, value []byte) error {
		switch string(key) {
		case "usage":
			usage = value
		case "status":
			status = value
		case "type":
			typ = value
		case "choices":
			choices = value
		case "error":
			errValue = value
		case "output":
			output = value
		case "content":
			content = value
		case "service_tier":
			tier = value
		}
		return nil
	})
	var u llm.Usage
	var err error
	switch f {
	case llm.FormatChat:
		if errValue != nil && string(errValue) != "null" {
			// A compatible server's error in a 200 body (OpenRouter sends these).
			return llm.Usage{}, answerFailed(errValue)
		}
		if len(choices) == 0 || choices[0] != '[' {
			return llm.Usage{}, upstreamError("not a chat completion")
		}
		err = eachMember(usage, func(key, v []byte) error {
			switch {
			case fold(key, "prompt_tokens"):
				return readCount(v, &u.InputTokens)
			case fold(key, "completion_tokens"):
				return readCount(v, &u.OutputTokens)
			case fold(key, "prompt_tokens_details"):
				return eachMember(v, func(key, v []byte) error {
					if err := countIf(key, "cached_tokens", v, &u.CachedInputTokens); err != nil {
						return err
					}
					return countIf(key, "audio_tokens", v, &u.AudioInputTokens)
				})
			case fold(key, "completion_tokens_details"):
				return eachMember(v, func(key, v []byte) error {
					if err := countIf(key, "reasoning_tokens", v, &u.ReasoningTokens); err != nil {
						return err
					}
					return countIf(key, "audio_tokens", v, &u.AudioOutputTokens)
				})
			}
			return nil
		})
		if err != nil {
			return llm.Usage{}, upstreamError("not a chat completion")
		}
		u.ServiceTier = ServiceTierOf(tier)
	case llm.FormatResponses:
		st, ok := rawString(status)
		if ok {
			err = eachMember(usage, func(key, v []byte) error {
				switch {
				case fold(key, "input_tokens"):
					return readCount(v, &u.InputTokens)
				case fold(key, "output_tokens"):
					return readCount(v, &u.OutputTokens)
				case fold(key, "input_tokens_details"):
					return eachMember(v, func(key, v []byte) error { return countIf(key, "cached_tokens", v, &u.CachedInputTokens) })
				case fold(key, "output_tokens_details"):
					return eachMember(v, func(key, v []byte) error { return countIf(key, "reasoning_tokens", v, &u.ReasoningTokens) })
				}
				return nil
			})
		}
		if !ok || len(st) == 0 || err != nil {
			return llm.Usage{}, upstreamError("not a response object")
		}
		if string(st) == "failed" {
			return llm.Usage{}, answerFailed(errValue)
		}
		u.ServiceTier = ServiceTierOf(tier)
		u.HostedCalls = hostedItems(output)
	case llm.FormatMessages:
		var c AnthropicCounts
		var searches int64
		t, ok := rawString(typ)
		if ok {
			err = eachMember(usage, func(key, v []byte) error {
				switch {
				case fold(key, "input_tokens"):
					return readCount(v, &c.Input)
				case fold(key, "output_tokens"):
					return readCount(v, &c.Output)
				case fold(key, "cache_creation_input_tokens"):
					return readCount(v, &c.CacheWrite)
				case fold(key, "cache_read_input_tokens"):
					return readCount(v, &c.CacheRead)
				case fold(key, "cache_creation"):
					return eachMember(v, func(key, v []byte) error {
						switch {
						case fold(key, "ephemeral_5m_input_tokens"):
							return readCount(v, &c.CacheWrite5m)
						case fold(key, "ephemeral_1h_input_tokens"):
							return readCount(v, &c.CacheWrite1h)
						}
						return nil
					})
				case fold(key, "output_tokens_details"):
					return eachMember(v, func(key, v []byte) error { return countIf(key, "thinking_tokens", v, &c.Thinking) })
				case fold(key, "service_tier"):
					c.ServiceTier = ServiceTierOf(v)
				case fold(key, "server_tool_use"):
					return eachMember(v, func(key, v []byte) error { return countIf(key, "web_search_requests", v, &searches) })
				case fold(key, "iterations"):
					return eachIteration(v, c.AddIteration)
				}
				return nil
			})
		}
		if !ok || string(t) != "message" || err != nil {
			return llm.Usage{}, upstreamError("not a message")
		}
		u = c.Usage()
		u.HostedCalls = serverToolBlocks(content)
		u.HostedCalls[llm.HostedWebSearch] = max(u.HostedCalls[llm.HostedWebSearch], searches)
	}
	return u, nil
}

// eachIteration calls fn with the type and the counts of each item of the usage's iterations
// array v (absent or null: none).
func eachIteration(v []byte, fn func(typ string, it AnthropicIteration)) error {
	if v == nil || string(v) == "null" {
		return nil
	}
	items, ok := scanArray(v)
	if !ok {
		return errSyntax
	}
	for _, item := range items {
		var typ []byte
		var it AnthropicIteration
		err := eachMember(item, func(key, v []byte) error {
			switch {
			case fold(key, "type"):
				typ, _ = rawString(v)
			case fold(key, "input_tokens"):
				return readCount(v, &it.Input)
			case fold(key, "output_tokens"):
				return readCount(v, &it.Output)
			case fold(key, "cache_creation_input_tokens"):
				return readCount(v, &it.CacheWrite)
			case fold(key, "cache_read_input_tokens"):
				return readCount(v, &it.CacheRead)
			case fold(key, "cache_creation"):
				return eachMember(v, func(key, v []byte) error {
					switch {
					case fold(key, "ephemeral_5m_input_tokens"):
						return readCount(v, &it.CacheWrite5m)
					case fold(key, "ephemeral_1h_input_tokens"):
						return readCount(v, &it.CacheWrite1h)
					}
					return nil
				})
			}
			return nil
		})
		if err != nil {
			return err
		}
		fn(string(typ), it)
	}
	return nil
}

// AnthropicCounts are the counts of an Anthropic Messages usage object
// (https://docs.anthropic.com/en/api/messages, https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching),
// whose input_tokens are only the input tokens neither read from nor written to the cache.
type AnthropicCounts struct {
	// Input is input_tokens.
	Input int64
	// CacheRead is cache_read_input_tokens.
	CacheRead int64
	// CacheWrite is cache_creation_input_tokens: every input token written to the cache.
	CacheWrite int64
	// CacheWrite5m and CacheWrite1h are its breakdown by time to live,
	// cache_creation.ephemeral_5m_input_tokens and ephemeral_1h_input_tokens (0 when absent).
	CacheWrite5m, CacheWrite1h int64
	// Output is output_tokens, and Thinking the part of it output_tokens_details.thinking_tokens
	// says was spent on thinking.
	Output, Thinking int64
	// ServiceTier is usage.service_tier.
	ServiceTier string
	// Compaction is the sum of the usage's compaction iterations (usage.iterations items of
	// type "compaction"): server-side compaction (context_management's compact edit, beta
	// compact-2026-01-12) summarizes the conversation in a sampling step of its own, which the
	// provider bills and the top-level counts leave out (it reads the whole conversation: 180,000
	// tokens of input beside the top level's 23,000 in Anthropic's own example).
	Compaction AnthropicIteration
}

// AnthropicIteration are the counts of an item of an Anthropic usage's iterations, with
// AnthropicCounts' meanings.
type AnthropicIteration struct {
	Input, CacheRead, CacheWrite, CacheWrite5m, CacheWrite1h, Output int64
}

// add adds the counts of o to it.
func (it *AnthropicIteration) add(o AnthropicIteration) {
	it.Input += o.Input
	it.CacheRead += o.CacheRead
	it.CacheWrite += o.CacheWrite
	it.CacheWrite5m += o.CacheWrite5m
	it.CacheWrite1h += o.CacheWrite1h
	it.Output += o.Output
}

// AddIteration adds an item of a usage's iterations of type typ to the counts: a compaction
// step's counts go to Compaction; the other types (message, the sampling steps of a server
// tool loop) are in the top-level counts already.
func (c *AnthropicCounts) AddIteration(typ string, it AnthropicIteration) {
	if typ == "compaction" {
		c.Compaction.add(it)
	}
}

// Usage is the neutral usage of the counts: InputTokens adds the cache reads and writes to
// input_tokens. The writes are split by the breakdown: the one-hour writes are its one-hour
// count and the five-minute writes the rest of cache_creation_input_tokens, so that without a
// breakdown every write is a five-minute one (Anthropic's default time to live). A breakdown
// that adds up to more than cache_creation_input_tokens counts in its place.
//
// The compaction iterations' counts are added to those of the top level, kind by kind: they are
// billed as the top level's are. Their output is CompactionOutputTokens too, which the
// request's max_tokens does not bound.
func (c AnthropicCounts) Usage() llm.Usage {
	top := AnthropicIteration{Input: c.Input, CacheRead: c.CacheRead, CacheWrite: c.CacheWrite,
		CacheWrite5m: c.CacheWrite5m, CacheWrite1h: c.CacheWrite1h, Output: c.Output}
	u := top.usage()
	if c.Compaction != (AnthropicIteration{}) {
		k := c.Compaction.usage()
		u.InputTokens += k.InputTokens
		u.OutputTokens += k.OutputTokens
		u.CachedInputTokens += k.CachedInputTokens
		u.CacheWrite5mTokens += k.CacheWrite5mTokens
		u.CacheWrite1hTokens += k.CacheWrite1hTokens
		u.CompactionOutputTokens = max(k.OutputTokens, 0)
	}
	u.ReasoningTokens, u.ServiceTier = c.Thinking, c.ServiceTier
	return u
}

// usage is the neutral usage of one set of counts (see AnthropicCounts.Usage).
func (it AnthropicIteration) usage() llm.Usage {
	w1h := max(it.CacheWrite1h, 0)
	written := max(it.CacheWrite, max(it.CacheWrite5m, 0)+w1h)
	return llm.Usage{
		InputTokens:        it.Input + it.CacheRead + written,
		OutputTokens:       it.Output,
		CachedInputTokens:  it.CacheRead,
		CacheWrite5mTokens: written - w1h,
		CacheWrite1hTokens: w1h,
	}
}

// ServiceTierOf is the service tier a JSON value names: the text of a string, as encoding/json
// decodes it, and "" for null, absence or a value of another type (an odd tier never fails an
// answer). The tiers the providers name are returned without allocating.
func ServiceTierOf(v []byte) string {
	switch string(v) {
	case `"default"`:
		return "default"
	case `"auto"`:
		return "auto"
	case `"flex"`:
		return "flex"
	case `"priority"`, `"fast"`:
		// OpenAI's fast tier is its priority tier (RequestedServiceTier).
		return "priority"
	case `"scale"`:
		return "scale"
	case `"standard"`:
		return "standard"
	case `"batch"`:
		return "batch"
	}
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return ""
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner)
	}
	s, ok := jsontext.AppendUnquoted(nil, inner)
	if !ok {
		return ""
	}
	return string(s)
}

// ServiceTier is a service_tier member as the full decoders read it: ServiceTierOf of its value.
// Decoding it never fails.
type ServiceTier string

// UnmarshalJSON implements json.Unmarshaler.
func (t *ServiceTier) UnmarshalJSON(b []byte) error {
	*t = ServiceTier(ServiceTierOf(b))
	return nil
}

// ServiceTierFor is tier, the service tier an upstream of any format reported, in the words of
// format f, or "" when f has none for it. The OpenAI formats share their tiers (auto, default,
// flex, scale, priority); Anthropic's standard is OpenAI's default and the reverse, priority is
// priority in both, and the other tiers of either side have no equivalent on the other.
func ServiceTierFor(f llm.Format, tier string) string {
	if f == llm.FormatMessages {
		switch tier {
		case "default":
			return "standard"
		case "standard", "priority", "batch":
			return tier
		}
		return ""
	}
	switch tier {
	case "standard":
		return "default"
	case "batch":
		return ""
	}
	return tier
}

// eachMember calls fn for each member of the JSON object value v; an absent value (nil) or null
// has none, anything else that is not an object is an error.
func eachMember(v []byte, fn func(key, value []byte) error) error {
	if v == nil || string(v) == "null" {
		return nil
	}
	return scanTop(v, fn)
}

// fold reports whether the member name key is name, ignoring case as encoding/json does when it
// matches a member to a struct field (upstreams write the names in lower case; the match must
// still be the one the full decoder makes).
func fold(key []byte, name string) bool {
	return string(key) == name || bytes.EqualFold(key, []byte(name))
}

// countIf reads v into dst when key is want.
func countIf(key []byte, want string, v []byte, dst *int64) error {
	if !fold(key, want) {
		return nil
	}
	return readCount(v, dst)
}

// readCount reads a JSON integer into dst; null leaves dst as it is (as encoding/json does).
// A count with a fraction or an exponent, or out of int64's range, is an error.
func readCount(v []byte, dst *int64) error {
	if string(v) == "null" {
		return nil
	}
	neg := len(v) > 0 && v[0] == '-'
	digits := v
	if neg {
		digits = v[1:]
	}
	if len(digits) == 0 || (digits[0] == '0' && len(digits) > 1) {
		return errSyntax
	}
	var n uint64
	for _, c := range digits {
		if c < '0' || c > '9' || n > (math.MaxUint64-9)/10 {
			return errSyntax
		}
		n = n*10 + uint64(c-'0')
	}
	switch {
	case !neg && n <= math.MaxInt64:
		*dst = int64(n)
	case neg && n <= 1<<63:
		*dst = -int64(n-1) - 1
	default:
		return errSyntax
	}
	return nil
}

// rawString is the text of the JSON string value v, as stringValue has it, without a copy when
// it has no escapes (the bytes then alias v); ok is false when v is absent or not a string.
func rawString(v []byte) (s []byte, ok bool) {
	if len(v) < 2 || v[0] != '"' {
		return nil, false
	}
	if inner := v[1 : len(v)-1]; bytes.IndexByte(inner, '\\') < 0 {
		return inner, true
	}
	return []byte(unquote(v)), true
}

// stringValue is the JSON string value v unquoted; ok is false when v is absent or not a
// string.
func stringValue(v []byte) (s string, ok bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	return unquote(v), true
}

// answerFailed is the error for an upstream answer that reports its own failure (errValue, the
// answer's error member): the client gets the gateway's words, as when the answer is
// translated; the upstream's message, which may name the operator's account, is wrapped for
// the log only. An error of type invalid_request_error refuses the request, as a 400 does,
// and passes the upstream's message on as a 400's is.
func answerFailed(errValue []byte) error {
	msg, typ := "no message", ""
	_ = eachMember(errValue, func(key, v []byte) error {
		if s, ok := stringValue(v); ok && fold(key, "message") && s != "" {
			msg = s
		} else if ok && fold(key, "type") {
			typ = s
		}
		return nil
	})
	if typ == "invalid_request_error" {
		// The request is at fault, as in a 400: its words go to the client, as a 400's do,
		// and no other expert is asked (impl/exchange).
		return &apierror.Error{Kind: apierror.KindInvalidRequest, Message: "the upstream refused the request: " + msg}
	}
	return upstreamFailed(msg)
}

// upstreamFailed is the error for an upstream answer that reports its own failure with the
// message msg: the client gets the gateway's words, and msg reaches only the log.
func upstreamFailed(msg string) error {
	return apierror.WithUpstreamWords(&apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream failed to produce the answer"}, msg)
}
