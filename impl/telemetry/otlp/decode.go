package otlp

import "google.golang.org/protobuf/encoding/protowire"

// lastField returns the raw value of the last field num of wire type typ in the protobuf
// message m (a length-delimited value with its length in front), as proto3 reads a singular
// field written more than once; false when m has none or is not protobuf.
func lastField(m []byte, num protowire.Number, typ protowire.Type) ([]byte, bool) {
	var out []byte
	found := false
	for len(m) > 0 {
		n, t, k := protowire.ConsumeTag(m)
		if k < 0 {
			return nil, false
		}
		m = m[k:]
		if k = protowire.ConsumeFieldValue(n, t, m); k < 0 {
			return nil, false
		}
		if n == num && t == typ {
			out, found = m[:k], true
		}
		m = m[k:]
	}
	return out, found
}

// partialSuccess reads an ExportTraceServiceResponse's partial_success (field 1): the spans
// rejected (its field 1) and why (its field 2). An answer that is not protobuf reads as none.
func partialSuccess(answer []byte) (rejected int64, msg string) {
	raw, ok := lastField(answer, 1, protowire.BytesType)
	if !ok {
		return 0, ""
	}
	ps, _ := protowire.ConsumeBytes(raw)
	if raw, ok := lastField(ps, 1, protowire.VarintType); ok {
		v, _ := protowire.ConsumeVarint(raw)
		rejected = int64(v) //nolint:gosec // an int64 field, written as its two's complement
	}
	if raw, ok := lastField(ps, 2, protowire.BytesType); ok {
		m, _ := protowire.ConsumeBytes(raw)
		msg = string(m)
	}
	return rejected, msg
}
