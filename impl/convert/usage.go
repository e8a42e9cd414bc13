package convert

import (
	"bytes"
	"github.com/tollgate/tollgate/impl/apierror"
	"math"

	"github.com/tollgate/tollgate/impl/llm"
)

// ResponseUsage reads only the usage of a complete upstream answer of format f, for answers
// passed to a client of the same format untouched: it scans the top level and reads only the
// usage's counts (and the status or type that says the answer is one), without reflection. The
// counts follow DecodeResponse's convention (input includes cached tokens).
func ResponseUsage(f llm.Format, body []byte) (llm.Usage, error) {
	var usage, status, typ, choices, errValue, output, content []byte
	err := scanTop(body, func(key, value []byte) error {
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
		}
		return nil
	})
	if err != nil {
		return llm.Usage{}, upstreamError("the answer is not a JSON object")
	}
	var u llm.Usage
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
				return eachMember(v, func(key, v []byte) error { return countIf(key, "cached_tokens", v, &u.CachedInputTokens) })
			case fold(key, "completion_tokens_details"):
				return eachMember(v, func(key, v []byte) error { return countIf(key, "reasoning_tokens", v, &u.ReasoningTokens) })
			}
			return nil
		})
		if err != nil {
			return llm.Usage{}, upstreamError("not a chat completion")
		}
	case llm.FormatResponses:
		st, ok := stringValue(status)
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
		if !ok || st == "" || err != nil {
			return llm.Usage{}, upstreamError("not a response object")
		}
		if st == "failed" {
			return llm.Usage{}, answerFailed(errValue)
		}
		u.HostedCalls = hostedItems(output)
	case llm.FormatMessages:
		var in, out, created, read, searches int64
		t, ok := stringValue(typ)
		if ok {
			err = eachMember(usage, func(key, v []byte) error {
				switch {
				case fold(key, "input_tokens"):
					return readCount(v, &in)
				case fold(key, "output_tokens"):
					return readCount(v, &out)
				case fold(key, "cache_creation_input_tokens"):
					return readCount(v, &created)
				case fold(key, "cache_read_input_tokens"):
					return readCount(v, &read)
				case fold(key, "server_tool_use"):
					return eachMember(v, func(key, v []byte) error { return countIf(key, "web_search_requests", v, &searches) })
				}
				return nil
			})
		}
		if !ok || t != "message" || err != nil {
			return llm.Usage{}, upstreamError("not a message")
		}
		u = llm.Usage{InputTokens: in + created + read, OutputTokens: out, CachedInputTokens: read, HostedCalls: serverToolBlocks(content)}
		u.HostedCalls[llm.HostedWebSearch] = max(u.HostedCalls[llm.HostedWebSearch], searches)
	}
	return u, nil
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
// the log only.
func answerFailed(errValue []byte) error {
	msg := "no message"
	_ = eachMember(errValue, func(key, v []byte) error {
		if s, ok := stringValue(v); ok && fold(key, "message") && s != "" {
			msg = s
		}
		return nil
	})
	return upstreamFailed(msg)
}

// upstreamFailed is the error for an upstream answer that reports its own failure with the
// message msg: the client gets the gateway's words, and msg reaches only the log.
func upstreamFailed(msg string) error {
	return apierror.WithUpstreamWords(&apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream failed to produce the answer"}, msg)
}
