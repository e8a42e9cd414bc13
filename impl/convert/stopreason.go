package convert

import "github.com/tollgate/tollgate/impl/llm"

// The stop-reason mappings, shared with the stream converters so that a streamed and a
// complete answer end the same way.
//
//	neutral          chat            Responses status (incomplete reason)   Messages
//	end              stop            completed                             end_turn
//	length           length          incomplete (max_output_tokens)        max_tokens
//	tool_calls       tool_calls      completed                             tool_use
//	stop_sequence    stop            completed                             stop_sequence
//	content_filter   content_filter  incomplete (content_filter)           refusal
//	refusal          stop            completed                             refusal
//
// Reverse: chat function_call is tool_calls; Messages pause_turn is end and
// model_context_window_exceeded is length; a Responses answer that completed with function
// calls is tool_calls (see ResponsesStopReason). An unknown or empty value maps to end. An
// answer that ended normally with a refusal (a chat message.refusal or delta.refusal, a
// Responses refusal part) is refusal, whole or streamed (the stream decoders follow): the
// OpenAI formats carry the refusal apart from the text, with the stop and status of a normal
// end, and a Messages client, whose format has no place for a refusal's words, gets them as
// text with stop_reason refusal. A Messages refusal (its classifiers stopped the answer, whose
// text so far is not a refusal message) is content_filter, as chat's content filter is.

// StopReasonFor is the wire value of r in format f: chat's finish_reason, Messages'
// stop_reason, or a Responses status ("completed" or "incomplete"; ResponsesIncompleteReason
// gives the reason that goes with "incomplete").
func StopReasonFor(f llm.Format, r llm.StopReason) string {
	switch f {
	case llm.FormatChat:
		switch r {
		case llm.StopLength:
			return "length"
		case llm.StopToolCalls:
			return "tool_calls"
		case llm.StopContentFilter:
			return "content_filter"
		default:
			return "stop"
		}
	case llm.FormatResponses:
		if ResponsesIncompleteReason(r) != "" {
			return "incomplete"
		}
		return "completed"
	case llm.FormatMessages:
		switch r {
		case llm.StopLength:
			return "max_tokens"
		case llm.StopToolCalls:
			return "tool_use"
		case llm.StopSequence:
			return "stop_sequence"
		case llm.StopContentFilter, llm.StopRefusal:
			return "refusal"
		default:
			return "end_turn"
		}
	}
	return ""
}

// ResponsesIncompleteReason is the incomplete_details.reason of a Responses answer that
// stopped for r, or "" when the answer is complete.
func ResponsesIncompleteReason(r llm.StopReason) string {
	switch r {
	case llm.StopLength:
		return "max_output_tokens"
	case llm.StopContentFilter:
		return "content_filter"
	}
	return ""
}

// StopReasonFrom is the neutral stop reason for the wire value s of format f: chat's
// finish_reason, Messages' stop_reason, or for Responses a status or an incomplete_details
// reason (use ResponsesStopReason to take function calls into account).
func StopReasonFrom(f llm.Format, s string) llm.StopReason {
	switch f {
	case llm.FormatChat:
		switch s {
		case "length":
			return llm.StopLength
		case "tool_calls", "function_call":
			return llm.StopToolCalls
		case "content_filter":
			return llm.StopContentFilter
		}
	case llm.FormatResponses:
		switch s {
		case "incomplete", "max_output_tokens":
			return llm.StopLength
		case "content_filter":
			return llm.StopContentFilter
		}
	case llm.FormatMessages:
		switch s {
		case "max_tokens", "model_context_window_exceeded":
			return llm.StopLength
		case "tool_use":
			return llm.StopToolCalls
		case "stop_sequence":
			return llm.StopSequence
		case "refusal":
			return llm.StopContentFilter
		}
	}
	return llm.StopEnd
}

// ResponsesStopReason is the neutral stop reason of a Responses answer with the given status
// and incomplete_details.reason ("" when none) that made function calls or not.
func ResponsesStopReason(status, incompleteReason string, hasToolCalls bool) llm.StopReason {
	if status == "incomplete" {
		if incompleteReason != "" {
			return StopReasonFrom(llm.FormatResponses, incompleteReason)
		}
		return llm.StopLength
	}
	if hasToolCalls {
		return llm.StopToolCalls
	}
	return llm.StopEnd
}
