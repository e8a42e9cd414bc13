package streamconv

import (
	"strconv"

	"github.com/tollgate/tollgate/impl/jsontext"
)

// The encoders write their JSON by hand: the events are small, their shapes fixed, and the
// text deltas are the hot path, so appending to one reused buffer avoids encoding/json's
// reflection and allocations.

// appendString appends s as a JSON string, quotes included.
func appendString(dst []byte, s string) []byte { return jsontext.AppendString(dst, s) }

// appendEscaped appends the JSON escaping of s without quotes.
func appendEscaped(dst []byte, s string) []byte { return jsontext.AppendEscaped(dst, s) }

// appendStringOrNull appends s as a JSON string, or null when it is empty.
func appendStringOrNull(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendString(dst, s)
}

// appendInt appends n.
func appendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }
