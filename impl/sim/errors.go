package sim

import (
	"net/http"
	"strconv"
)

// writeOpenAIError answers status with {"error":{message,type,param,code}}; an empty param or
// code is null.
func (s *Simulator) writeOpenAIError(w http.ResponseWriter, status int, typ, msg, param, code string) {
	b := make([]byte, 0, 256)
	b = appendOpenAIError(b, typ, msg, param, code)
	b = append(b, '\n')
	writeJSON(w, status, b)
}

// appendOpenAIError appends the OpenAI error envelope.
func appendOpenAIError(b []byte, typ, msg, param, code string) []byte {
	b = append(b, `{"error":{"message":`...)
	b = appendString(b, msg)
	b = append(b, `,"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"param":`...)
	b = appendNullable(b, param)
	b = append(b, `,"code":`...)
	b = appendNullable(b, code)
	return append(b, "}}"...)
}

// appendNullable appends s as a JSON string, or null when it is empty.
func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendString(b, s)
}

// writeAnthropicError answers status with {"type":"error","error":{type,message},"request_id"}.
func (s *Simulator) writeAnthropicError(w http.ResponseWriter, status int, typ, msg string) {
	b := make([]byte, 0, 256)
	b = appendAnthropicError(b, typ, msg)
	b = b[:len(b)-1]
	b = append(b, `,"request_id":`...)
	b = appendString(b, w.Header().Get("Request-Id"))
	b = append(b, "}\n"...)
	writeJSON(w, status, b)
}

// appendAnthropicError appends the Anthropic error envelope (without request_id).
func appendAnthropicError(b []byte, typ, msg string) []byte {
	b = append(b, `{"type":"error","error":{"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	return append(b, "}}"...)
}

// writeJSON sends a complete JSON body with status.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// openAIStatus answers a status fault on an OpenAI route with the body OpenAI sends for it.
func (s *Simulator) openAIStatus(w http.ResponseWriter, status int, model string) {
	typ, code := "invalid_request_error", ""
	msg := "Simulated error (HTTP " + strconv.Itoa(status) + ")."
	switch {
	case status == http.StatusBadRequest:
		msg = "Simulated bad request."
	case status == http.StatusUnauthorized:
		code, msg = "invalid_api_key", "Incorrect API key provided."
	case status == http.StatusForbidden:
		code, msg = "unsupported_country_region_territory", "Country, region, or territory not supported"
	case status == http.StatusNotFound:
		code, msg = "model_not_found", "The model `"+model+"` does not exist or you do not have access to it."
	case status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
		msg = "Rate limit reached for " + model + " in organization org-sim on requests per min (RPM): Limit 60, Used 60, Requested 1. Please try again later."
	case status == http.StatusInternalServerError:
		typ, msg = "server_error", "The server had an error while processing your request. Sorry about that!"
	case status == http.StatusBadGateway:
		typ, msg = "server_error", "Bad gateway."
	case status == http.StatusServiceUnavailable || status == 529:
		typ, msg = "server_error", "The engine is currently overloaded, please try again later."
	case status == http.StatusGatewayTimeout:
		typ, msg = "server_error", "Gateway timeout."
	case status >= 500:
		typ = "server_error"
	}
	s.writeOpenAIError(w, status, typ, msg, "", code)
}

// anthropicType is the Anthropic error type and message for an HTTP status.
func anthropicType(status int) (typ, msg string) {
	switch {
	case status == http.StatusBadRequest:
		return "invalid_request_error", "Simulated bad request."
	case status == http.StatusUnauthorized:
		return "authentication_error", "invalid x-api-key"
	case status == http.StatusPaymentRequired:
		return "billing_error", "Your credit balance is too low to access the Anthropic API."
	case status == http.StatusForbidden:
		return "permission_error", "Your API key does not have permission to use the specified resource."
	case status == http.StatusNotFound:
		return "not_found_error", "The requested resource could not be found."
	case status == http.StatusRequestEntityTooLarge:
		return "request_too_large", "Request exceeds the maximum allowed number of bytes."
	case status == http.StatusTooManyRequests:
		return "rate_limit_error", "Number of requests has exceeded your rate limit. Please try again later."
	case status == http.StatusGatewayTimeout:
		return "timeout_error", "Request timed out."
	case status == 529 || status == http.StatusServiceUnavailable:
		return "overloaded_error", "Overloaded"
	case status >= 500:
		return "api_error", "Internal server error"
	default:
		return "invalid_request_error", "Simulated error (HTTP " + strconv.Itoa(status) + ")."
	}
}

// anthropicStatus answers a status fault on an Anthropic route.
func (s *Simulator) anthropicStatus(w http.ResponseWriter, status int) {
	typ, msg := anthropicType(status)
	s.writeAnthropicError(w, status, typ, msg)
}

// openAIInBand is the type, code and message of an OpenAI in-band error for a fault status
// (0 means the usual server error).
func openAIInBand(status int) (typ, code, msg string) {
	switch {
	case status == http.StatusTooManyRequests:
		return "requests", "rate_limit_exceeded", "Rate limit reached. Please try again later."
	case status == http.StatusServiceUnavailable || status == 529:
		return "server_error", "server_error", "The engine is currently overloaded, please try again later."
	case status >= 400 && status < 500:
		return "invalid_request_error", "invalid_request_error", "Simulated error (HTTP " + strconv.Itoa(status) + ")."
	default:
		return "server_error", "server_error", "The server had an error while processing your request. Sorry about that!"
	}
}
