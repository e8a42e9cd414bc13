package jaegertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// Span is one span of a trace read back from jaeger.
type Span struct {
	TraceID, SpanID string
	// ParentID is the parent span's id ("" for a root); Parent the parent span when it is in
	// the trace (a root of this process may have a remote parent, its caller's).
	ParentID string
	Parent   *Span
	Name     string
	// Kind is "server", "client", "producer", "consumer" or "internal".
	Kind    string
	Service string
	// Resource holds the attributes of the span's resource (the process: service.version,
	// deployment.environment, …) but service.name, which is Service.
	Resource map[string]any
	Start    time.Time
	// Duration is the span's length.
	Duration time.Duration
	// Attrs are the span's attributes (strings, numbers as float64 or int64, booleans, and
	// arrays as jaeger stores them: JSON text).
	Attrs map[string]any
	// Events are the span's events in order.
	Events []Event
	// Error is set when the span's status is an error.
	Error    bool
	Children []*Span
}

// Event is a span event: its name and attributes.
type Event struct {
	Name  string
	Attrs map[string]any
}

// Attr returns the attribute's value, formatted as text ("" when the span does not have it).
func (s *Span) Attr(key string) string {
	v, ok := s.Attrs[key]
	if !ok {
		return ""
	}
	return fmt.Sprint(v)
}

// Has reports whether the span has the attribute.
func (s *Span) Has(key string) bool {
	_, ok := s.Attrs[key]
	return ok
}

// Event returns the first event of that name, or nil.
func (s *Span) Event(name string) *Event {
	for i := range s.Events {
		if s.Events[i].Name == name {
			return &s.Events[i]
		}
	}
	return nil
}

// Trace is a trace read back from jaeger.
type Trace struct {
	ID    string
	Spans []*Span
	// Roots are the spans whose parent is not in the trace.
	Roots []*Span
}

// Named returns the spans of that name, in start order.
func (tr *Trace) Named(name string) []*Span {
	var out []*Span
	for _, s := range tr.Spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// One returns the only span of that name, failing the test when there is not exactly one.
func (tr *Trace) One(t testing.TB, name string) *Span {
	t.Helper()
	spans := tr.Named(name)
	if len(spans) != 1 {
		t.Fatalf("trace %s: %d spans named %q, want 1; the trace:\n%s", tr.ID, len(spans), name, tr)
	}
	return spans[0]
}

// String draws the trace as an indented tree, for failure messages.
func (tr *Trace) String() string {
	var b strings.Builder
	var walk func(s *Span, depth int)
	walk = func(s *Span, depth int) {
		fmt.Fprintf(&b, "%s%s [%s]", strings.Repeat("  ", depth), s.Name, s.Kind)
		if s.Error {
			b.WriteString(" ERROR")
		}
		keys := make([]string, 0, len(s.Attrs))
		for k := range s.Attrs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%v", k, s.Attrs[k])
		}
		b.WriteByte('\n')
		for _, c := range s.Children {
			walk(c, depth+1)
		}
	}
	for _, r := range tr.Roots {
		walk(r, 0)
	}
	return b.String()
}

// Trace reads a trace by id (32 hex digits) through the query API; found is false while
// jaeger does not have it.
func (j *Jaeger) Trace(ctx context.Context, traceID string) (tr *Trace, found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.QueryURL+"/api/traces/"+traceID, nil)
	if err != nil {
		return nil, false, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, false, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, false, err
	}
	if res.StatusCode == http.StatusNotFound {
		return nil, false, nil
	}
	if res.StatusCode != http.StatusOK {
		return nil, false, fmt.Errorf("jaegertest: GET /api/traces/%s: %s: %s", traceID, res.Status, body)
	}
	var doc queryResponse
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, false, fmt.Errorf("jaegertest: reading trace %s: %w", traceID, err)
	}
	if len(doc.Data) == 0 {
		return nil, false, nil
	}
	return doc.Data[0].tree(), true, nil
}

// WaitTrace waits (up to 30 s) until jaeger holds the trace with at least minSpans spans, and
// returns it; it fails the test when it does not come.
func (j *Jaeger) WaitTrace(t testing.TB, traceID string, minSpans int) *Trace {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last *Trace
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		tr, found, err := j.Trace(ctx, traceID)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if found {
			last = tr
			if len(tr.Spans) >= minSpans {
				return tr
			}
		}
		if time.Now().After(deadline) {
			if last != nil {
				t.Fatalf("jaegertest: trace %s has %d spans, want at least %d:\n%s", traceID, len(last.Spans), minSpans, last)
			}
			t.Fatalf("jaegertest: trace %s not found in jaeger", traceID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// queryResponse is the query API's answer (/api/traces/{id}).
type queryResponse struct {
	Data []jsonTrace `json:"data"`
}

type jsonTrace struct {
	TraceID   string                 `json:"traceID"`
	Spans     []jsonSpan             `json:"spans"`
	Processes map[string]jsonProcess `json:"processes"`
}

type jsonSpan struct {
	TraceID       string          `json:"traceID"`
	SpanID        string          `json:"spanID"`
	OperationName string          `json:"operationName"`
	References    []jsonReference `json:"references"`
	StartTime     int64           `json:"startTime"` // microseconds
	Duration      int64           `json:"duration"`  // microseconds
	Tags          []jsonKeyValue  `json:"tags"`
	Logs          []jsonLog       `json:"logs"`
	ProcessID     string          `json:"processID"`
}

type jsonReference struct {
	RefType string `json:"refType"`
	SpanID  string `json:"spanID"`
}

type jsonKeyValue struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

type jsonLog struct {
	Fields []jsonKeyValue `json:"fields"`
}

type jsonProcess struct {
	ServiceName string         `json:"serviceName"`
	Tags        []jsonKeyValue `json:"tags"`
}

// tree links the spans into a tree, ordered by start time.
func (jt jsonTrace) tree() *Trace {
	tr := &Trace{ID: jt.TraceID}
	byID := map[string]*Span{}
	for _, js := range jt.Spans {
		s := &Span{TraceID: js.TraceID, SpanID: js.SpanID, Name: js.OperationName, Kind: "internal",
			Service: jt.Processes[js.ProcessID].ServiceName, Start: time.UnixMicro(js.StartTime),
			Duration: time.Duration(js.Duration) * time.Microsecond, Attrs: map[string]any{}, Resource: map[string]any{}}
		for _, kv := range jt.Processes[js.ProcessID].Tags {
			s.Resource[kv.Key] = kv.Value
		}
		for _, r := range js.References {
			if r.RefType == "CHILD_OF" {
				s.ParentID = r.SpanID
				break
			}
		}
		for _, kv := range js.Tags {
			switch kv.Key {
			case "span.kind":
				s.Kind = fmt.Sprint(kv.Value)
			case "otel.status_code":
				s.Error = s.Error || kv.Value == "ERROR"
			case "error":
				s.Error = s.Error || kv.Value == true
			default:
				s.Attrs[kv.Key] = kv.Value
			}
		}
		for _, l := range js.Logs {
			ev := Event{Attrs: map[string]any{}}
			for _, kv := range l.Fields {
				if kv.Key == "event" {
					ev.Name = fmt.Sprint(kv.Value)
				} else {
					ev.Attrs[kv.Key] = kv.Value
				}
			}
			s.Events = append(s.Events, ev)
		}
		tr.Spans = append(tr.Spans, s)
		byID[s.SpanID] = s
	}
	slices.SortStableFunc(tr.Spans, func(a, b *Span) int { return a.Start.Compare(b.Start) })
	for _, s := range tr.Spans {
		if p, ok := byID[s.ParentID]; ok && s.ParentID != "" {
			s.Parent = p
			p.Children = append(p.Children, s)
		} else {
			tr.Roots = append(tr.Roots, s)
		}
	}
	return tr
}
