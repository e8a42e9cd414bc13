package health

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// probe asks h's handler and returns the status code and the decoded report.
func probe(t *testing.T, r *Readiness) (int, Report) {
	t.Helper()
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var rep Report
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return rec.Code, rep
}

func TestReadinessStates(t *testing.T) {
	var logs bytes.Buffer
	r := New(slog.New(slog.NewTextHandler(&logs, nil)))
	if code, rep := probe(t, r); code != http.StatusOK || rep.Status != "ready" || len(rep.Conditions) != 0 {
		t.Fatalf("empty: %d %+v", code, rep)
	}
	start := r.Condition("startup", Down, "waiting for the database")
	stop := r.Condition("shutdown", OK, "")
	code, rep := probe(t, r)
	if code != http.StatusServiceUnavailable || rep.Status != "not_ready" ||
		rep.Conditions["startup"] != (Status{"down", "waiting for the database"}) || rep.Conditions["shutdown"] != (Status{State: "ok"}) {
		t.Fatalf("starting: %d %+v", code, rep)
	}
	if r.Ready() {
		t.Error("Ready while a condition is down")
	}
	start.Set(OK, "ignored for OK")
	if code, rep := probe(t, r); code != http.StatusOK || rep.Status != "ready" || rep.Conditions["startup"] != (Status{State: "ok"}) {
		t.Fatalf("started: %d %+v", code, rep)
	}
	// A degraded condition keeps the process ready and is named.
	degraded := OK
	r.Check("database", func() (State, string) { return degraded, "serving from caches" })
	degraded = Degraded
	if code, rep := probe(t, r); code != http.StatusOK || rep.Status != "degraded" || rep.Conditions["database"] != (Status{"degraded", "serving from caches"}) {
		t.Fatalf("degraded: %d %+v", code, rep)
	}
	stop.Set(Down, "shutting down")
	if code, rep := probe(t, r); code != http.StatusServiceUnavailable || rep.Status != "not_ready" {
		t.Fatalf("shutting down: %d %+v", code, rep)
	}
	if s, why := stop.State(); s != Down || why != "shutting down" {
		t.Errorf("State() = %v %q", s, why)
	}
	// One log line per change of state: the initial Down, startup OK, shutdown Down; setting
	// the same state again logs nothing.
	stop.Set(Down, "still shutting down")
	if n := strings.Count(logs.String(), "readiness condition"); n != 3 {
		t.Errorf("%d log lines, want 3:\n%s", n, logs.String())
	}
}

func TestConditionRegisteredTwicePanics(t *testing.T) {
	r := New(nil)
	r.Condition("startup", OK, "")
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	r.Check("startup", func() (State, string) { return OK, "" })
}
