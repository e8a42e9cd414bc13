package health

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
)

// State is the state of one condition.
type State int

const (
	// OK means the condition has nothing to report.
	OK State = iota
	// Degraded means the process serves with weaker guarantees; it stays ready.
	Degraded
	// Down means the process cannot serve: it is not ready.
	Down
)

// String is the state's name in the probe's body and the log.
func (s State) String() string {
	switch s {
	case OK:
		return "ok"
	case Degraded:
		return "degraded"
	case Down:
		return "down"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Readiness is the set of conditions of one process. Its methods are safe for concurrent use.
type Readiness struct {
	log *slog.Logger

	mu     sync.Mutex
	conds  map[string]*Condition
	checks map[string]func() (State, string)
}

// New returns an empty Readiness (ready, with no conditions) that logs the changes of its
// conditions to log (nil: discarded).
func New(log *slog.Logger) *Readiness {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Readiness{log: log, conds: make(map[string]*Condition), checks: make(map[string]func() (State, string))}
}

// Condition registers the condition name in its initial state, with reason (empty for OK),
// and returns it for its owner to set. A name is registered once: registering it again panics,
// as two owners of one condition would overwrite each other.
func (r *Readiness) Condition(name string, initial State, reason string) *Condition {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.claim(name)
	c := &Condition{r: r, name: name, state: initial, reason: reason}
	r.conds[name] = c
	if initial != OK {
		r.log.Warn("readiness condition", "condition", name, "state", initial.String(), "reason", reason)
	}
	return c
}

// Check registers the condition name as a function the probe calls for its state and reason.
// fn must be quick and must not block (no network or disk); its changes are not logged. A name
// is registered once, as for Condition.
func (r *Readiness) Check(name string, fn func() (State, string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.claim(name)
	r.checks[name] = fn
}

// claim panics when name is taken; r.mu is held.
func (r *Readiness) claim(name string) {
	if _, ok := r.conds[name]; ok {
		panic("health: condition " + name + " registered twice")
	}
	if _, ok := r.checks[name]; ok {
		panic("health: condition " + name + " registered twice")
	}
}

// Condition is one named condition, set by its owner.
type Condition struct {
	r    *Readiness
	name string
	// state and reason are guarded by r.mu.
	state  State
	reason string
}

// Set moves the condition to state, with reason (ignored for OK). A change of state is logged.
func (c *Condition) Set(state State, reason string) {
	if state == OK {
		reason = ""
	}
	c.r.mu.Lock()
	changed := state != c.state
	c.state, c.reason = state, reason
	c.r.mu.Unlock()
	if !changed {
		return
	}
	if state == OK {
		c.r.log.Info("readiness condition", "condition", c.name, "state", state.String())
	} else {
		c.r.log.Warn("readiness condition", "condition", c.name, "state", state.String(), "reason", reason)
	}
}

// State returns the condition's state and reason.
func (c *Condition) State() (State, string) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.state, c.reason
}

// Status is one condition in a Report.
type Status struct {
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// Report is what the probe answers.
type Report struct {
	// Status is "ready", "degraded" or "not_ready".
	Status     string            `json:"status"`
	Conditions map[string]Status `json:"conditions"`
}

// Ready reports whether the process can serve: no condition is Down.
func (r *Readiness) Ready() bool { return r.Report().Status != "not_ready" }

// Report evaluates every condition.
func (r *Readiness) Report() Report {
	type entry struct {
		name  string
		state State
		why   string
	}
	r.mu.Lock()
	entries := make([]entry, 0, len(r.conds)+len(r.checks))
	for name, c := range r.conds {
		entries = append(entries, entry{name, c.state, c.reason})
	}
	checks := make(map[string]func() (State, string), len(r.checks))
	for name, fn := range r.checks {
		checks[name] = fn
	}
	r.mu.Unlock()
	for name, fn := range checks {
		s, why := fn()
		entries = append(entries, entry{name, s, why})
	}
	worst := OK
	rep := Report{Conditions: make(map[string]Status, len(entries))}
	for _, e := range entries {
		worst = max(worst, e.state)
		st := Status{State: e.state.String()}
		if e.state != OK {
			st.Reason = e.why
		}
		rep.Conditions[e.name] = st
	}
	switch worst {
	case OK:
		rep.Status = "ready"
	case Degraded:
		rep.Status = "degraded"
	default:
		rep.Status = "not_ready"
	}
	return rep
}

// Handler serves the readiness probe: 200 when ready (or degraded), 503 when not, with the
// Report as JSON. The answer is never cached.
func (r *Readiness) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rep := r.Report()
		body, _ := json.Marshal(rep)
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		if rep.Status == "not_ready" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write(append(body, '\n'))
	})
}
