package telemetry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkinstrumentation "go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// provider is tollgate's OpenTelemetry tracer provider: spans recorded straight into the
// form the exporter reads, instead of the SDK's (see doc.go: the SDK's spans cost a traced
// request about twice as much CPU and five times the garbage). It keeps the SDK's pieces that
// decide what a span is (the sampler, the span limits read from OTEL_SPAN_*, the resource)
// and its semantics, which TestTracerMatchesTheSDK checks span by span against the SDK's.
type provider struct {
	embedded.TracerProvider
	sampler  sdktrace.Sampler
	limits   sdktrace.SpanLimits
	resource *resource.Resource
	// ended receives every sampled span when it ends (the export queue).
	ended func(*span)

	mu      sync.Mutex
	tracers map[sdkinstrumentation.Scope]*tracer
}

// newProvider returns a provider whose sampled spans go to ended when they end.
func newProvider(sampler sdktrace.Sampler, limits sdktrace.SpanLimits, res *resource.Resource, ended func(*span)) *provider {
	return &provider{sampler: sampler, limits: limits, resource: res, ended: ended, tracers: make(map[sdkinstrumentation.Scope]*tracer)}
}

// Tracer returns the tracer of the instrumentation scope name (with the options' version,
// schema and attributes), the same one for the same scope.
func (p *provider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	c := trace.NewTracerConfig(opts...)
	scope := sdkinstrumentation.Scope{Name: name, Version: c.InstrumentationVersion(), SchemaURL: c.SchemaURL(), Attributes: c.InstrumentationAttributes()}
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.tracers[scope]
	if !ok {
		t = &tracer{p: p, scope: scope}
		p.tracers[scope] = t
	}
	return t
}

// tracer makes the spans of one instrumentation scope.
type tracer struct {
	embedded.Tracer
	p     *provider
	scope sdkinstrumentation.Scope
}

// Start begins a span as the SDK's tracer does: a child of ctx's span (a new root with
// trace.WithNewRoot), with new ids, sampled as the provider's sampler decides; a span the
// sampler drops records nothing and only carries its span context.
func (t *tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if ctx == nil {
		ctx = context.Background()
	}
	config := trace.NewSpanStartConfig(opts...)
	var psc trace.SpanContext
	if config.NewRoot() {
		ctx = trace.ContextWithSpanContext(ctx, psc)
	} else {
		psc = trace.SpanContextFromContext(ctx)
	}
	tid := psc.TraceID()
	if !tid.IsValid() {
		tid = newTraceID()
	}
	sid := newSpanID()
	res := t.p.sampler.ShouldSample(sdktrace.SamplingParameters{
		ParentContext: ctx, TraceID: tid, Name: name, Kind: config.SpanKind(),
		Attributes: config.Attributes(), Links: config.Links(),
	})
	scc := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceState: res.Tracestate, TraceFlags: psc.TraceFlags() &^ trace.FlagsSampled}
	if res.Decision == sdktrace.RecordAndSample {
		scc.TraceFlags |= trace.FlagsSampled
	}
	sc := trace.NewSpanContext(scc)
	if res.Decision == sdktrace.Drop {
		s := &droppedSpan{sc: sc, p: t.p}
		return trace.ContextWithSpan(ctx, s), s
	}
	start := config.Timestamp()
	if start.IsZero() {
		start = time.Now()
	}
	s := &span{t: t, sc: sc, parent: psc, name: name, kind: trace.ValidateSpanKind(config.SpanKind()), start: start, recording: true}
	s.setAttributes(res.Attributes)
	s.setAttributes(config.Attributes())
	for _, l := range config.Links() {
		s.addLink(l)
	}
	return trace.ContextWithSpan(ctx, s), s
}

// newTraceID is a random, valid trace id.
func newTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		putUint64(id[:8], rand.Uint64())
		putUint64(id[8:], rand.Uint64())
	}
	return id
}

// newSpanID is a random, valid span id.
func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		putUint64(id[:], rand.Uint64())
	}
	return id
}

// putUint64 writes v into b's first eight bytes, big-endian.
func putUint64(b []byte, v uint64) {
	_ = b[7]
	for i := range 8 {
		b[i] = byte(v >> (56 - 8*i))
	}
}

// span is a recording span. Until it ends it is guarded by mu; once ended it never changes,
// and the exporter reads it without the lock (the queue's mutex orders the two).
type span struct {
	embedded.Span
	t *tracer

	mu        sync.Mutex
	recording bool
	sc        trace.SpanContext
	parent    trace.SpanContext
	name      string
	kind      trace.SpanKind
	start     time.Time
	end       time.Time
	status    sdktrace.Status

	attrs        []attribute.KeyValue
	attrsDirty   bool // attrs may hold a key twice: de-duplicated when the span ends
	droppedAttrs int
	events       []sdktrace.Event
	droppedEvts  int
	links        []sdktrace.Link
	droppedLinks int
}

// SpanContext is the span's identity.
func (s *span) SpanContext() trace.SpanContext { return s.sc }

// IsRecording reports whether the span has not ended.
func (s *span) IsRecording() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recording
}

// TracerProvider is the provider that made the span.
func (s *span) TracerProvider() trace.TracerProvider { return s.t.p }

// SetName renames the span.
func (s *span) SetName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recording {
		s.name = name
	}
}

// SetStatus sets the span's status as the SDK does: Ok is final, Error keeps its description
// and can still become Ok, Unset changes nothing once another is set.
func (s *span) SetStatus(code codes.Code, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.recording || s.status.Code > code {
		return
	}
	st := sdktrace.Status{Code: code}
	if code == codes.Error {
		st.Description = description
	}
	s.status = st
}

// SetAttributes sets attributes, a later value of a key replacing the earlier one.
func (s *span) SetAttributes(kv ...attribute.KeyValue) {
	if len(kv) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recording {
		s.setAttributes(kv)
	}
}

// setAttributes adds kv, with s.mu held (or s not yet shared). Within the count limit the
// attributes are appended as they come, and de-duplicated once, at the end; past it, as the
// SDK does, the attributes are de-duplicated first, a key already there takes its new value,
// and a new key is dropped (counted).
func (s *span) setAttributes(kv []attribute.KeyValue) {
	if len(kv) == 0 {
		return
	}
	limits := &s.t.p.limits
	limit := limits.AttributeCountLimit
	if limit == 0 {
		s.droppedAttrs += len(kv)
		return
	}
	if limit < 0 || len(s.attrs)+len(kv) <= limit {
		if s.attrs == nil {
			// Room for the few attributes most spans get over their life, in one allocation.
			s.attrs = make([]attribute.KeyValue, 0, max(len(kv), minAttrs))
		}
		for _, a := range kv {
			if !a.Valid() {
				s.droppedAttrs++
				continue
			}
			s.attrs = append(s.attrs, truncate(a, limits.AttributeValueLengthLimit))
			s.attrsDirty = true
		}
		return
	}
	s.dedupe()
	for _, a := range kv {
		if !a.Valid() {
			s.droppedAttrs++
			continue
		}
		a = truncate(a, limits.AttributeValueLengthLimit)
		if i := indexOf(s.attrs, a.Key); i >= 0 {
			s.attrs[i] = a
		} else if len(s.attrs) < limit {
			s.attrs = append(s.attrs, a)
		} else {
			s.droppedAttrs++
		}
	}
}

// minAttrs is the room a span's first attributes are given.
const minAttrs = 8

// dedupe keeps one attribute per key, with s.mu held: at the place of the key's first
// occurrence, with its last value. The lists are short (a dozen attributes), so each key is
// looked for in those kept so far, without a map.
func (s *span) dedupe() {
	if !s.attrsDirty {
		return
	}
	s.attrsDirty = false
	if len(s.attrs) > 64 {
		at := make(map[attribute.Key]int, len(s.attrs))
		kept := s.attrs[:0]
		for _, a := range s.attrs {
			if i, ok := at[a.Key]; ok {
				kept[i] = a
				continue
			}
			at[a.Key] = len(kept)
			kept = append(kept, a)
		}
		clear(s.attrs[len(kept):])
		s.attrs = kept
		return
	}
	kept := s.attrs[:0]
	for _, a := range s.attrs {
		if i := indexOf(kept, a.Key); i >= 0 {
			kept[i] = a
			continue
		}
		kept = append(kept, a)
	}
	clear(s.attrs[len(kept):])
	s.attrs = kept
}

// indexOf is the index of key's attribute in attrs, -1 when there is none.
func indexOf(attrs []attribute.KeyValue, key attribute.Key) int {
	for i := range attrs {
		if attrs[i].Key == key {
			return i
		}
	}
	return -1
}

// truncate cuts a string value (or each string of a slice) to limit characters, as the SDK's
// OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT does; a negative limit leaves it whole.
func truncate(a attribute.KeyValue, limit int) attribute.KeyValue {
	if limit < 0 {
		return a
	}
	switch a.Value.Type() {
	case attribute.STRING:
		if v := a.Value.AsString(); len(v) > limit {
			return a.Key.String(cut(v, limit))
		}
	case attribute.STRINGSLICE:
		v := a.Value.AsStringSlice()
		changed := false
		for i := range v {
			if len(v[i]) > limit {
				v[i], changed = cut(v[i], limit), true
			}
		}
		if changed {
			return a.Key.StringSlice(v)
		}
	}
	return a
}

// cut is s's first limit characters (runes; s's bytes past an invalid one are kept as bytes).
func cut(s string, limit int) string {
	n := 0
	for i := range s {
		if n == limit {
			return s[:i]
		}
		n++
	}
	return s
}

// AddEvent records an event: its time (now, unless given) and attributes (as given: the SDK
// does not de-duplicate an event's), the oldest events dropped past the limit.
func (s *span) AddEvent(name string, opts ...trace.EventOption) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recording {
		s.addEvent(name, trace.NewEventConfig(opts...))
	}
}

// addEvent adds an event, with s.mu held.
func (s *span) addEvent(name string, c trace.EventConfig) {
	limits := &s.t.p.limits
	e := sdktrace.Event{Name: name, Time: c.Timestamp()}
	if attrs := c.Attributes(); len(attrs) > 0 {
		e.Attributes = attrs
		if limit := limits.AttributePerEventCountLimit; limit >= 0 && len(e.Attributes) > limit {
			e.DroppedAttributeCount = len(e.Attributes) - limit
			e.Attributes = e.Attributes[:limit]
		}
		if len(e.Attributes) == 0 {
			e.Attributes = nil
		}
	}
	s.events, s.droppedEvts = addEvicting(s.events, e, limits.EventCountLimit, s.droppedEvts)
}

// addEvicting appends v to list, dropping the oldest entry (counted in dropped) when the list
// holds limit already; a negative limit keeps everything, 0 nothing.
func addEvicting[T any](list []T, v T, limit, dropped int) ([]T, int) {
	switch {
	case limit == 0:
		return list, dropped + 1
	case limit > 0 && len(list) >= limit:
		copy(list, list[1:])
		list[len(list)-1] = v
		return list, dropped + 1
	}
	return append(list, v), dropped
}

// RecordError records err as an exception event, as the SDK does.
func (s *span) RecordError(err error, opts ...trace.EventOption) {
	if err == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.recording {
		return
	}
	opts = append(opts, trace.WithAttributes(semconv.ExceptionType(typeName(err)), semconv.ExceptionMessage(err.Error())))
	c := trace.NewEventConfig(opts...)
	if c.StackTrace() {
		opts = append(opts, trace.WithAttributes(semconv.ExceptionStacktrace(stackTrace())))
		c = trace.NewEventConfig(opts...)
	}
	s.addEvent(semconv.ExceptionEventName, c)
}

// typeName is the exception.type of v: its package path and type name.
func typeName(v any) string {
	t := reflect.TypeOf(v)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String()
	}
	return fmt.Sprintf("%s.%s", t.PkgPath(), t.Name())
}

// stackTrace is the calling goroutine's stack.
func stackTrace() string {
	buf := make([]byte, 2048)
	for {
		if n := runtime.Stack(buf, false); n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// AddLink links the span to another, as the SDK does: a link with neither a valid span
// context nor attributes nor a trace state is ignored.
func (s *span) AddLink(l trace.Link) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recording {
		s.addLink(l)
	}
}

// addLink adds a link, with s.mu held (or s not yet shared).
func (s *span) addLink(l trace.Link) {
	if !l.SpanContext.IsValid() && len(l.Attributes) == 0 && l.SpanContext.TraceState().Len() == 0 {
		return
	}
	limits := &s.t.p.limits
	link := sdktrace.Link{SpanContext: l.SpanContext, Attributes: l.Attributes}
	if limit := limits.AttributePerLinkCountLimit; limit == 0 {
		link.DroppedAttributeCount, link.Attributes = len(link.Attributes), nil
	} else if limit > 0 && len(link.Attributes) > limit {
		link.DroppedAttributeCount = len(link.Attributes) - limit
		link.Attributes = link.Attributes[:limit]
	}
	s.links, s.droppedLinks = addEvicting(s.links, link, limits.LinkCountLimit, s.droppedLinks)
}

// End ends the span (at the option's time, or now): from then on it changes no more, and a
// sampled one goes to the export queue.
func (s *span) End(opts ...trace.SpanEndOption) {
	end := time.Now()
	s.mu.Lock()
	if !s.recording {
		s.mu.Unlock()
		return
	}
	if len(opts) > 0 {
		c := trace.NewSpanEndConfig(opts...)
		if t := c.Timestamp(); !t.IsZero() {
			end = t
		}
	}
	s.recording = false
	s.end = end
	s.dedupe()
	s.mu.Unlock()
	if s.sc.IsSampled() && s.t.p.ended != nil {
		s.t.p.ended(s)
	}
}

// The methods below are what the exporter reads of an ended span (otlp.Span).

// Parent is the span context of the span's parent (invalid for a root).
func (s *span) Parent() trace.SpanContext { return s.parent }

// Name is the span's name.
func (s *span) Name() string { return s.name }

// SpanKind is the span's kind.
func (s *span) SpanKind() trace.SpanKind { return s.kind }

// StartTime is when the span began.
func (s *span) StartTime() time.Time { return s.start }

// EndTime is when it ended.
func (s *span) EndTime() time.Time { return s.end }

// Attributes are its attributes, one per key.
func (s *span) Attributes() []attribute.KeyValue { return s.attrs }

// DroppedAttributes counts the attributes past the limit or invalid.
func (s *span) DroppedAttributes() int { return s.droppedAttrs }

// Events are its events, oldest first.
func (s *span) Events() []sdktrace.Event { return s.events }

// DroppedEvents counts the events evicted past the limit; as the SDK reports it, only when
// some event was kept.
func (s *span) DroppedEvents() int {
	if len(s.events) == 0 {
		return 0
	}
	return s.droppedEvts
}

// Links are its links.
func (s *span) Links() []sdktrace.Link { return s.links }

// DroppedLinks counts the links evicted past the limit; as the SDK reports it, only when some
// link was kept.
func (s *span) DroppedLinks() int {
	if len(s.links) == 0 {
		return 0
	}
	return s.droppedLinks
}

// Status is its status.
func (s *span) Status() sdktrace.Status { return s.status }

// Resource is the process's resource.
func (s *span) Resource() *resource.Resource { return s.t.p.resource }

// InstrumentationScope is the scope of the tracer that made it.
func (s *span) InstrumentationScope() sdkinstrumentation.Scope { return s.t.scope }

// droppedSpan is a span the sampler dropped: it records nothing and carries its span context
// (the trace id and the upstream's traceparent).
type droppedSpan struct {
	embedded.Span
	sc trace.SpanContext
	p  *provider
}

func (s *droppedSpan) SpanContext() trace.SpanContext          { return s.sc }
func (s *droppedSpan) IsRecording() bool                       { return false }
func (s *droppedSpan) TracerProvider() trace.TracerProvider    { return s.p }
func (s *droppedSpan) End(...trace.SpanEndOption)              {}
func (s *droppedSpan) AddEvent(string, ...trace.EventOption)   {}
func (s *droppedSpan) AddLink(trace.Link)                      {}
func (s *droppedSpan) RecordError(error, ...trace.EventOption) {}
func (s *droppedSpan) SetStatus(codes.Code, string)            {}
func (s *droppedSpan) SetName(string)                          {}
func (s *droppedSpan) SetAttributes(...attribute.KeyValue)     {}
