package otlp

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Field numbers of the OTLP messages written here (opentelemetry/proto/collector/trace/v1,
// trace/v1, common/v1 and resource/v1), named message_field.
const (
	requestResourceSpans = 1

	resourceSpansResource   = 1
	resourceSpansScopeSpans = 2
	resourceSpansSchemaURL  = 3

	resourceAttributes = 1

	scopeSpansScope     = 1
	scopeSpansSpans     = 2
	scopeSpansSchemaURL = 3

	scopeName       = 1
	scopeVersion    = 2
	scopeAttributes = 3

	spanTraceID           = 1
	spanSpanID            = 2
	spanTraceState        = 3
	spanParentSpanID      = 4
	spanName              = 5
	spanKind              = 6
	spanStartTime         = 7
	spanEndTime           = 8
	spanAttributes        = 9
	spanDroppedAttributes = 10
	spanEvents            = 11
	spanDroppedEvents     = 12
	spanLinks             = 13
	spanDroppedLinks      = 14
	spanStatus            = 15
	spanFlags             = 16

	eventTime              = 1
	eventName              = 2
	eventAttributes        = 3
	eventDroppedAttributes = 4

	linkTraceID           = 1
	linkSpanID            = 2
	linkAttributes        = 4
	linkDroppedAttributes = 5
	linkFlags             = 6

	statusMessage = 2
	statusCode    = 3

	keyValueKey   = 1
	keyValueValue = 2

	anyString = 1
	anyBool   = 2
	anyInt    = 3
	anyDouble = 4
	anyArray  = 5
	anyKVList = 6
	anyBytes  = 7

	listValues = 1 // ArrayValue.values and KeyValueList.values
)

// Span flags beyond the W3C trace flags (SpanFlags in trace/v1): whether the parent's
// remoteness is known, and that it is remote.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// OTLP status codes (Status.StatusCode).
const (
	statusUnset = 0
	statusOK    = 1
	statusError = 2
)

// Encoder writes ended spans as one OTLP ExportTraceServiceRequest in protobuf. It keeps its
// scratch space from one call to the next, so an Encoder is for one goroutine at a time.
type Encoder struct {
	groups []group
}

// group is the spans of one resource and instrumentation scope, in the order they came.
type group struct {
	res   *resource.Resource
	scope instrumentation.Scope
	spans []int
}

// Append appends the request carrying spans to buf and returns it. Spans are grouped by
// resource, then by instrumentation scope, each in the order it first appears (the library
// exporter's grouping, whose resource order is a map's).
func (e *Encoder) Append(buf []byte, spans []sdktrace.ReadOnlySpan) []byte {
	e.group(spans)
	for gi := 0; gi < len(e.groups); {
		res := e.groups[gi].res
		// The groups of one resource are contiguous: group puts them so.
		end := gi + 1
		for end < len(e.groups) && sameResource(e.groups[end].res, res) {
			end++
		}
		rs := beginSized(&buf, requestResourceSpans, 3)
		if res != nil {
			r := begin(&buf, resourceSpansResource)
			for iter := res.Iter(); iter.Next(); {
				buf = appendKeyValue(buf, resourceAttributes, iter.Attribute())
			}
			finish(&buf, r)
		}
		for ; gi < end; gi++ {
			g := &e.groups[gi]
			ss := beginSized(&buf, resourceSpansScopeSpans, 3)
			if g.scope != (instrumentation.Scope{}) {
				sc := begin(&buf, scopeSpansScope)
				buf = appendString(buf, scopeName, g.scope.Name)
				buf = appendString(buf, scopeVersion, g.scope.Version)
				for iter := g.scope.Attributes.Iter(); iter.Next(); {
					buf = appendKeyValue(buf, scopeAttributes, iter.Attribute())
				}
				finish(&buf, sc)
			}
			for _, i := range g.spans {
				buf = appendSpan(buf, spans[i])
			}
			buf = appendString(buf, scopeSpansSchemaURL, g.scope.SchemaURL)
			finish(&buf, ss)
		}
		if res != nil {
			buf = appendString(buf, resourceSpansSchemaURL, res.SchemaURL())
		}
		finish(&buf, rs)
	}
	return buf
}

// group sorts spans into e.groups, the groups of one resource next to one another.
func (e *Encoder) group(spans []sdktrace.ReadOnlySpan) {
	for i := range e.groups {
		e.groups[i].spans = e.groups[i].spans[:0]
	}
	used := 0
	for i, s := range spans {
		if s == nil {
			continue
		}
		res, scope := s.Resource(), s.InstrumentationScope()
		at, lastOfResource := -1, -1
		for gi := range used {
			g := &e.groups[gi]
			if !sameResource(g.res, res) {
				continue
			}
			lastOfResource = gi
			if g.scope == scope {
				at = gi
				break
			}
		}
		if at < 0 {
			// A new group: after the last of its resource's, or at the end.
			if used == len(e.groups) {
				e.groups = append(e.groups, group{})
			}
			at = used
			if lastOfResource >= 0 {
				at = lastOfResource + 1
				spare := e.groups[used].spans
				copy(e.groups[at+1:used+1], e.groups[at:used])
				e.groups[at] = group{spans: spare}
			}
			used++
			e.groups[at].res, e.groups[at].scope = res, scope
		}
		e.groups[at].spans = append(e.groups[at].spans, i)
	}
	clear(e.groups[used:]) // no resource kept alive by a group this batch did not use
	e.groups = e.groups[:used]
}

// sameResource reports whether a and b describe the same resource (nil is the empty one,
// as the library exporter groups them).
func sameResource(a, b *resource.Resource) bool {
	return a == b || a.Equivalent() == b.Equivalent()
}

// appendSpan appends one Span message (as a ScopeSpans' spans field).
func appendSpan(buf []byte, s sdktrace.ReadOnlySpan) []byte {
	m := beginSized(&buf, scopeSpansSpans, 2)
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	buf = appendBytes(buf, spanTraceID, tid[:])
	buf = appendBytes(buf, spanSpanID, sid[:])
	buf = appendString(buf, spanTraceState, sc.TraceState().String())
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		buf = appendBytes(buf, spanParentSpanID, psid[:])
	}
	buf = appendString(buf, spanName, s.Name())
	buf = appendVarint(buf, spanKind, uint64(kindOf(s.SpanKind())))
	buf = appendFixed64(buf, spanStartTime, unixNano(s.StartTime().UnixNano()))
	buf = appendFixed64(buf, spanEndTime, unixNano(s.EndTime().UnixNano()))
	for _, a := range s.Attributes() {
		buf = appendKeyValue(buf, spanAttributes, a)
	}
	buf = appendVarint(buf, spanDroppedAttributes, uint64(count(s.DroppedAttributes())))
	for _, ev := range s.Events() {
		em := begin(&buf, spanEvents)
		buf = appendFixed64(buf, eventTime, unixNano(ev.Time.UnixNano()))
		buf = appendString(buf, eventName, ev.Name)
		for _, a := range ev.Attributes {
			buf = appendKeyValue(buf, eventAttributes, a)
		}
		buf = appendVarint(buf, eventDroppedAttributes, uint64(count(ev.DroppedAttributeCount)))
		finish(&buf, em)
	}
	buf = appendVarint(buf, spanDroppedEvents, uint64(count(s.DroppedEvents())))
	for _, l := range s.Links() {
		lm := begin(&buf, spanLinks)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		buf = appendBytes(buf, linkTraceID, ltid[:])
		buf = appendBytes(buf, linkSpanID, lsid[:])
		for _, a := range l.Attributes {
			buf = appendKeyValue(buf, linkAttributes, a)
		}
		buf = appendVarint(buf, linkDroppedAttributes, uint64(count(l.DroppedAttributeCount)))
		buf = appendFixed32(buf, linkFlags, flags(l.SpanContext.TraceFlags(), l.SpanContext))
		finish(&buf, lm)
	}
	buf = appendVarint(buf, spanDroppedLinks, uint64(count(s.DroppedLinks())))
	// The status is always written, empty when unset (as the library exporter does).
	st := s.Status()
	stm := begin(&buf, spanStatus)
	buf = appendString(buf, statusMessage, st.Description)
	buf = appendVarint(buf, statusCode, statusOf(st.Code))
	finish(&buf, stm)
	buf = appendFixed32(buf, spanFlags, flags(sc.TraceFlags(), parent))
	finish(&buf, m)
	return buf
}

// flags is a span's or link's flags: the W3C trace flags, and whether parent is remote.
func flags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if parent.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

// kindOf is OTLP's SpanKind for k: the same numbers, anything unknown unspecified.
func kindOf(k trace.SpanKind) trace.SpanKind {
	if k < trace.SpanKindInternal || k > trace.SpanKindConsumer {
		return trace.SpanKindUnspecified
	}
	return k
}

// statusOf is OTLP's StatusCode for c.
func statusOf(c codes.Code) uint64 {
	switch c {
	case codes.Ok:
		return statusOK
	case codes.Error:
		return statusError
	}
	return statusUnset
}

// unixNano clamps a time before 1970 to 0.
func unixNano(n int64) uint64 { return uint64(max(0, n)) } //nolint:gosec // clamped

// count clamps a dropped count to a uint32.
func count(n int) uint32 {
	if n < 0 {
		return 0
	}
	if int64(n) > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(n) //nolint:gosec // clamped
}

// appendKeyValue appends a KeyValue message as field num.
func appendKeyValue(buf []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	// A scalar value's sizes are known before it is written: written at once, without the
	// room and moves of begin and finish (most attributes are strings and integers).
	var anyLen int
	var str string
	var bits uint64
	switch kv.Value.Type() {
	case attribute.STRING:
		str = kv.Value.AsString()
		anyLen = 1 + protowire.SizeVarint(uint64(len(str))) + len(str)
	case attribute.INT64:
		bits = uint64(kv.Value.AsInt64()) //nolint:gosec // int64 fields are written as their two's complement
		anyLen = 1 + protowire.SizeVarint(bits)
	case attribute.BOOL:
		bits = protowire.EncodeBool(kv.Value.AsBool())
		anyLen = 2
	case attribute.FLOAT64:
		bits = math.Float64bits(kv.Value.AsFloat64())
		anyLen = 9
	default:
		return appendKeyValueOf(buf, num, kv)
	}
	keyLen := 0
	if kv.Key != "" {
		keyLen = 1 + protowire.SizeVarint(uint64(len(kv.Key))) + len(kv.Key)
	}
	buf = protowire.AppendTag(buf, num, protowire.BytesType)
	buf = protowire.AppendVarint(buf, uint64(keyLen+1+protowire.SizeVarint(uint64(anyLen))+anyLen))
	buf = appendString(buf, keyValueKey, string(kv.Key))
	buf = append(buf, byte(keyValueValue<<3|protowire.BytesType))
	buf = protowire.AppendVarint(buf, uint64(anyLen))
	switch kv.Value.Type() {
	case attribute.STRING:
		buf = append(buf, byte(anyString<<3|protowire.BytesType))
		buf = protowire.AppendVarint(buf, uint64(len(str)))
		return append(buf, str...)
	case attribute.FLOAT64:
		buf = append(buf, byte(anyDouble<<3|protowire.Fixed64Type))
		return protowire.AppendFixed64(buf, bits)
	case attribute.BOOL:
		return append(buf, byte(anyBool<<3|protowire.VarintType), byte(bits))
	default: // INT64
		buf = append(buf, byte(anyInt<<3|protowire.VarintType))
		return protowire.AppendVarint(buf, bits)
	}
}

// appendKeyValueOf is appendKeyValue for any value.
func appendKeyValueOf(buf []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	m := begin(&buf, num)
	buf = appendString(buf, keyValueKey, string(kv.Key))
	buf = appendAnyValue(buf, keyValueValue, kv.Value)
	finish(&buf, m)
	return buf
}

// appendAnyValue appends an AnyValue message as field num. Its one field is written even
// when it holds its type's zero value (it is a oneof); an EMPTY value is an empty message.
func appendAnyValue(buf []byte, num protowire.Number, v attribute.Value) []byte {
	m := begin(&buf, num)
	switch v.Type() {
	case attribute.EMPTY:
	case attribute.BOOL:
		buf = appendBool(buf, anyBool, v.AsBool())
	case attribute.INT64:
		buf = appendInt(buf, anyInt, v.AsInt64())
	case attribute.FLOAT64:
		buf = appendDouble(buf, anyDouble, v.AsFloat64())
	case attribute.STRING:
		buf = protowire.AppendTag(buf, anyString, protowire.BytesType)
		buf = protowire.AppendString(buf, v.AsString())
	case attribute.BYTESLICE:
		buf = protowire.AppendTag(buf, anyBytes, protowire.BytesType)
		buf = protowire.AppendBytes(buf, v.AsByteSlice())
	case attribute.BOOLSLICE:
		buf = appendArray(buf, v.AsBoolSlice(), func(b []byte, x bool) []byte { return appendBool(b, anyBool, x) })
	case attribute.INT64SLICE:
		buf = appendArray(buf, v.AsInt64Slice(), func(b []byte, x int64) []byte { return appendInt(b, anyInt, x) })
	case attribute.FLOAT64SLICE:
		buf = appendArray(buf, v.AsFloat64Slice(), func(b []byte, x float64) []byte { return appendDouble(b, anyDouble, x) })
	case attribute.STRINGSLICE:
		buf = appendArray(buf, v.AsStringSlice(), func(b []byte, x string) []byte {
			b = protowire.AppendTag(b, anyString, protowire.BytesType)
			return protowire.AppendString(b, x)
		})
	case attribute.SLICE:
		a := begin(&buf, anyArray)
		for _, x := range v.AsSlice() {
			buf = appendAnyValue(buf, listValues, x)
		}
		finish(&buf, a)
	case attribute.MAP:
		a := begin(&buf, anyKVList)
		for _, kv := range v.AsMap() {
			buf = appendKeyValue(buf, listValues, kv)
		}
		finish(&buf, a)
	default:
		buf = protowire.AppendTag(buf, anyString, protowire.BytesType)
		buf = protowire.AppendString(buf, "INVALID")
	}
	finish(&buf, m)
	return buf
}

// appendArray appends AnyValue's array_value holding xs, each an AnyValue whose one field
// write appends.
func appendArray[T any](buf []byte, xs []T, write func([]byte, T) []byte) []byte {
	a := begin(&buf, anyArray)
	for _, x := range xs {
		e := begin(&buf, listValues)
		buf = write(buf, x)
		finish(&buf, e)
	}
	finish(&buf, a)
	return buf
}

// begin appends the tag of a length-delimited message field and one byte for its length,
// and returns a mark for finish.
func begin(buf *[]byte, num protowire.Number) mark { return beginSized(buf, num, 1) }

// beginSized is begin keeping room bytes for the length: a message expected to be longer than
// 127 bytes (a span, a whole batch) keeps the room its length is likely to need, so that
// finish seldom moves it.
func beginSized(buf *[]byte, num protowire.Number, room int) mark {
	*buf = protowire.AppendTag(*buf, num, protowire.BytesType)
	for range room {
		*buf = append(*buf, 0)
	}
	return mark{at: len(*buf) - room, room: room}
}

// mark is where a message's length goes and how many bytes were kept for it.
type mark struct{ at, room int }

// finish writes the length of the message begun at m (everything appended since), moving the
// message when its length takes more or fewer bytes than were kept.
func finish(buf *[]byte, m mark) {
	start := m.at + m.room
	n := len(*buf) - start
	k := protowire.SizeVarint(uint64(n))
	switch {
	case k > m.room:
		for range k - m.room {
			*buf = append(*buf, 0)
		}
		copy((*buf)[m.at+k:], (*buf)[start:start+n])
	case k < m.room:
		copy((*buf)[m.at+k:], (*buf)[start:start+n])
		*buf = (*buf)[:m.at+k+n]
	}
	protowire.AppendVarint((*buf)[m.at:m.at], uint64(n))
}

// The scalar fields below are left out at their zero value, as proto3 writes them.

func appendString(buf []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return buf
	}
	buf = protowire.AppendTag(buf, num, protowire.BytesType)
	return protowire.AppendString(buf, s)
}

func appendBytes(buf []byte, num protowire.Number, b []byte) []byte {
	if len(b) == 0 {
		return buf
	}
	buf = protowire.AppendTag(buf, num, protowire.BytesType)
	return protowire.AppendBytes(buf, b)
}

func appendVarint(buf []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return buf
	}
	buf = protowire.AppendTag(buf, num, protowire.VarintType)
	return protowire.AppendVarint(buf, v)
}

func appendFixed64(buf []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return buf
	}
	buf = protowire.AppendTag(buf, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(buf, v)
}

func appendFixed32(buf []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return buf
	}
	buf = protowire.AppendTag(buf, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(buf, v)
}

// The oneof members of AnyValue, written whatever their value.

func appendBool(buf []byte, num protowire.Number, v bool) []byte {
	buf = protowire.AppendTag(buf, num, protowire.VarintType)
	return protowire.AppendVarint(buf, protowire.EncodeBool(v))
}

func appendInt(buf []byte, num protowire.Number, v int64) []byte {
	buf = protowire.AppendTag(buf, num, protowire.VarintType)
	return protowire.AppendVarint(buf, uint64(v)) //nolint:gosec // int64 fields are written as their two's complement
}

func appendDouble(buf []byte, num protowire.Number, v float64) []byte {
	buf = protowire.AppendTag(buf, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(buf, math.Float64bits(v))
}
