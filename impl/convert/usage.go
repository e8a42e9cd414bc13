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
}

// Usage is the neutral usage of the counts: InputTokens adds the cache reads and writes to
// input_tokens. The writes are split by the breakdown: the one-hour writes are its one-hour
// count and the five-minute writes the rest of cache_creation_input_tokens, so that without a
// breakdown every write is a five-minute one (Anthropic's default time to live). A breakdown
// that adds up to more than cache_creation_input_tokens counts in its place.
func (c AnthropicCounts) Usage() llm.Usage {
	w1h := max(c.CacheWrite1h, 0)
	written := max(c.CacheWrite, max(c.CacheWrite5m, 0)+w1h)
	return llm.Usage{
		InputTokens:        c.Input + c.CacheRead + written,
		OutputTokens:       c.Output,
		CachedInputTokens:  c.CacheRead,
		CacheWrite5mTokens: written - w1h,
		CacheWrite1hTokens: w1h,
		ReasoningTokens:    c.Thinking,
		ServiceTier:        c.ServiceTier,
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
