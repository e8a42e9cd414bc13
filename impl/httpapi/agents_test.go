package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/sim"
	"github.com/tollgate/tollgate/impl/sse"
)

// agentsClient calls the agent routes with one tenant's key through the validating transport:
// every answer is checked against the OpenAPI document.
type agentsClient struct {
	t   *testing.T
	g   *apitest.Gateway
	c   *http.Client
	key string
}

func newAgentsClient(t *testing.T, g *apitest.Gateway, key string) *agentsClient {
	return &agentsClient{t: t, g: g, c: g.Client(t), key: key}
}

// do sends one request and returns its status, headers and body.
func (a *agentsClient) do(method, path, body string, header map[string]string) (int, http.Header, []byte) {
	a.t.Helper()
	h := map[string]string{"Authorization": "Bearer " + a.key}
	for k, v := range header {
		h[k] = v
	}
	return do(a.t, a.c, a.g.URL, request{method, path, body}, h)
}

// json sends one request and decodes a 2xx answer into out.
func (a *agentsClient) json(method, path, body string, want int, out any) {
	a.t.Helper()
	status, _, b := a.do(method, path, body, nil)
	if status != want {
		a.t.Fatalf("%s %s: %d, want %d: %s", method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			a.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

type spawned struct {
	Ok            bool   `json:"ok"`
	CommandID     string `json:"commandId"`
	AllocatedSlot string `json:"allocatedSlot"`
	Status        string `json:"status"`
	SessionID     string `json:"sessionId"`
}

func (a *agentsClient) spawn(slot, prompt string) spawned {
	a.t.Helper()
	body, _ := json.Marshal(map[string]string{"slot": slot, "prompt": prompt})
	var s spawned
	a.json("POST", "/v1/agents", string(body), http.StatusAccepted, &s)
	if !s.Ok || s.Status != "provisioning" || s.AllocatedSlot != slot || s.SessionID == "" || s.CommandID == "" {
		a.t.Fatalf("spawn answer %+v", s)
	}
	return s
}

type slotView struct {
	Slot    string `json:"slot"`
	Session *struct {
		ID        string  `json:"id"`
		State     string  `json:"state"`
		EndReason *string `json:"endReason"`
		Turns     int     `json:"turns"`
	} `json:"session"`
}

// slots is GET /v1/agents.
func (a *agentsClient) slots() []slotView {
	a.t.Helper()
	var out struct {
		Object string     `json:"object"`
		Data   []slotView `json:"data"`
	}
	a.json("GET", "/v1/agents", "", http.StatusOK, &out)
	return out.Data
}

// waitState polls GET /v1/agents until the slot's session is in one of states.
func (a *agentsClient) waitState(slot string, states ...string) slotView {
	a.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, s := range a.slots() {
			if s.Slot == slot && s.Session != nil {
				for _, st := range states {
					if s.Session.State == st {
						return s
					}
				}
			}
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("slot %s never reached %v: %+v", slot, states, a.slots())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// streamedEvent is one event of the events route.
type streamedEvent struct {
	ID        string
	Name      string
	Seq       int64           `json:"seq"`
	Kind      string          `json:"kind"`
	SessionID string          `json:"sessionId"`
	Data      json.RawMessage `json:"data"`
}

// openEvents opens GET /v1/agents/{slot}/events with the given query and headers.
func (a *agentsClient) openEvents(ctx context.Context, slot, query string, header map[string]string) *http.Response {
	a.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", a.g.URL+"/v1/agents/"+slot+"/events"+query, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := a.c.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		a.t.Fatalf("events: %d %s", res.StatusCode, b)
	}
	return res
}

// readEvents reads n events (n < 0: until the stream ends) and checks each event's id and
// name against its data.
func readEvents(t *testing.T, r *sse.Reader, n int) ([]streamedEvent, error) {
	t.Helper()
	var out []streamedEvent
	for n < 0 || len(out) < n {
		ev, err := r.Next()
		if err != nil {
			return out, err
		}
		var e streamedEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			t.Fatalf("event data %s: %v", ev.Data, err)
		}
		e.ID, e.Name = ev.ID, ev.Name
		if e.ID != e.SessionID+":"+strconv.FormatInt(e.Seq, 10) || e.Name != e.Kind {
			t.Errorf("event id %q / name %q do not match its data session %s, seq %d / kind %q", e.ID, e.Name, e.SessionID, e.Seq, e.Kind)
		}
		out = append(out, e)
	}
	return out, nil
}

// scriptPrompt is a prompt the simulator plays as an agent's model: two query_datasets calls,
// then an answer.
var scriptPrompt = "List my datasets. " + sim.Script(sim.ScriptStep{Tool: "query_datasets"}, sim.ScriptStep{Tool: "query_datasets"})

// TestAgentRoutesStatuses walks the decided statuses of the agent routes: 202 for spawn,
// message and stop; 400 naming slot or text; 409 for a spawn on a live slot, a message or stop
// after the session ended, an Idempotency-Key reused for another request; the same key and
// request answered again with the same ids; a malformed key or Last-Event-ID 400; a slot that
// never ran a session 409 on the events route.
func TestAgentRoutesStatuses(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tn := g.NewTenant(t, "acme", 0, 5_000_000)
	g.AssignSlot(t, tn.Account.ID, "main")
	g.AssignSlot(t, tn.Account.ID, "idle")
	a := newAgentsClient(t, g, tn.Key)

	if got := a.slots(); len(got) != 2 || got[0].Session != nil || got[1].Session != nil {
		t.Fatalf("slots before any session: %+v", got)
	}
	for _, c := range []struct{ method, path, body, param string }{
		{"POST", "/v1/agents", `{"prompt":"hi"}`, "slot"},
		{"POST", "/v1/agents", `{"slot":""}`, "slot"},
		{"POST", "/v1/agents/main/messages", `{}`, "text"},
		{"POST", "/v1/agents/main/messages", `{"text":""}`, "text"},
	} {
		status, _, body := a.do(c.method, c.path, c.body, nil)
		env := errorEnvelopeOf(body)
		if status != http.StatusBadRequest || env.Error.Param == nil || *env.Error.Param != c.param || env.Error.Type != "invalid_request_error" {
			t.Errorf("%s %s %s: %d %s, want 400 naming %s", c.method, c.path, c.body, status, body, c.param)
		}
	}
	status, _, body := a.do("GET", "/v1/agents/idle/events", "", nil)
	if env := errorEnvelopeOf(body); status != http.StatusConflict || env.Error.Type != "conflict" || !strings.Contains(env.Error.Message, "has no session") {
		t.Errorf("events of a slot without a session: %d %s", status, body)
	}
	status, _, body = a.do("POST", "/v1/agents/idle/messages", `{"text":"hello"}`, nil)
	if status != http.StatusConflict {
		t.Errorf("a message to a slot without a session: %d %s", status, body)
	}

	// Idempotency: the same key and request, the same answer; another request, 409.
	key := map[string]string{"Idempotency-Key": "spawn-1"}
	status, _, first := a.do("POST", "/v1/agents", `{"slot":"main","prompt":"`+scriptPrompt+`"}`, key)
	if status != http.StatusAccepted {
		t.Fatalf("spawn: %d %s", status, first)
	}
	status, _, again := a.do("POST", "/v1/agents", `{"slot":"main","prompt":"`+scriptPrompt+`"}`, key)
	if status != http.StatusAccepted || string(again) != string(first) {
		t.Errorf("the same Idempotency-Key and request: %d %s, want the first answer %s", status, again, first)
	}
	status, _, body = a.do("POST", "/v1/agents", `{"slot":"main","prompt":"something else"}`, key)
	if env := errorEnvelopeOf(body); status != http.StatusConflict || !strings.Contains(env.Error.Message, "spawn-1") {
		t.Errorf("the key reused for another request: %d %s", status, body)
	}
	for _, bad := range []string{strings.Repeat("k", 256), "tab\there"} {
		status, _, body = a.do("DELETE", "/v1/agents/main", "", map[string]string{"Idempotency-Key": bad})
		if env := errorEnvelopeOf(body); status != http.StatusBadRequest || env.Error.Param == nil || *env.Error.Param != "Idempotency-Key" {
			t.Errorf("Idempotency-Key %q: %d %s", bad, status, body)
		}
	}
	var sp spawned
	_ = json.Unmarshal(first, &sp)

	// A spawn on the live slot is a 409 naming the session.
	status, _, body = a.do("POST", "/v1/agents", `{"slot":"main"}`, nil)
	if env := errorEnvelopeOf(body); status != http.StatusConflict || !strings.Contains(env.Error.Message, sp.SessionID) {
		t.Errorf("spawn on a live slot: %d %s", status, body)
	}
	a.waitState("main", "ready")
	var msg struct {
		MessageID string `json:"messageId"`
		Slot      string `json:"slot"`
		SessionID string `json:"sessionId"`
	}
	mkey := map[string]string{"Idempotency-Key": "msg-1"}
	status, _, m1 := a.do("POST", "/v1/agents/main/messages", `{"text":"and again?"}`, mkey)
	_ = json.Unmarshal(m1, &msg)
	if status != http.StatusAccepted || msg.MessageID == "" || msg.Slot != "main" || msg.SessionID != sp.SessionID {
		t.Fatalf("message: %d %s", status, m1)
	}
	if status, _, m2 := a.do("POST", "/v1/agents/main/messages", `{"text":"and again?"}`, mkey); status != http.StatusAccepted || string(m2) != string(m1) {
		t.Errorf("the same message key: %d %s, want %s", status, m2, m1)
	}
	var stop struct {
		CommandID string `json:"commandId"`
		Status    string `json:"status"`
	}
	a.json("DELETE", "/v1/agents/main", "", http.StatusAccepted, &stop)
	if stop.Status != "stopping" || stop.CommandID == "" {
		t.Errorf("stop: %+v", stop)
	}
	ended := a.waitState("main", "stopped", "failed")
	if ended.Session.State != "stopped" || ended.Session.EndReason == nil || *ended.Session.EndReason != "user_stop" {
		t.Errorf("after stop: %+v", *ended.Session)
	}
	status, _, body = a.do("POST", "/v1/agents/main/messages", `{"text":"still there?"}`, nil)
	if env := errorEnvelopeOf(body); status != http.StatusConflict || env.Error.Type != "conflict" || !strings.Contains(env.Error.Message, "stopped") {
		t.Errorf("a message after the session ended: %d %s", status, body)
	}
	if status, _, body = a.do("DELETE", "/v1/agents/main", "", nil); status != http.StatusConflict {
		t.Errorf("stop after the session ended: %d %s", status, body)
	}
	for _, bad := range []string{"x", "-1"} {
		status, _, body = a.do("GET", "/v1/agents/main/events", "", map[string]string{"Last-Event-ID": bad})
		if env := errorEnvelopeOf(body); status != http.StatusBadRequest || env.Error.Param == nil || *env.Error.Param != "Last-Event-ID" {
			t.Errorf("Last-Event-ID %q: %d %s", bad, status, body)
		}
	}
	// A new session on the same slot after the end.
	a.spawn("main", "")
}

// TestAgentEventsResume reads some events of a live session, disconnects, and reconnects with
// Last-Event-ID (and once with ?after): the union is every event of the session exactly once,
// in order, and the stream ends by itself after the final state event. While the session is
// idle the stream sends heartbeat comments.
func TestAgentEventsResume(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Heartbeat: 50 * time.Millisecond})
	tn := g.NewTenant(t, "acme", 0, 5_000_000)
	g.AssignSlot(t, tn.Account.ID, "main")
	a := newAgentsClient(t, g, tn.Key)
	sp := a.spawn("main", scriptPrompt)
	a.waitState("main", "ready")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// First connection: three events, then the client goes away.
	res := a.openEvents(ctx, "main", "", nil)
	got, err := readEvents(t, sse.NewReader(res.Body), 3)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Second connection, resumed with ?after: two more.
	res = a.openEvents(ctx, "main", "?after="+got[len(got)-1].ID, nil)
	more, err := readEvents(t, sse.NewReader(res.Body), 2)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, more...)

	// Third connection, resumed with Last-Event-ID (which wins over ?after=0): it follows the
	// session while it is idle (heartbeats), through a stop, to the end of the stream.
	res = a.openEvents(ctx, "main", "?after=0", map[string]string{"Last-Event-ID": got[len(got)-1].ID})
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	var pending strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("before a heartbeat: %v", err)
		}
		if strings.HasPrefix(line, ": heartbeat") {
			break
		}
		pending.WriteString(line)
	}
	a.json("DELETE", "/v1/agents/main", "", http.StatusAccepted, nil)
	rest, err := readEvents(t, sse.NewReader(io.MultiReader(strings.NewReader(pending.String()), br)), -1)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("the stream did not end cleanly after the final state: %v", err)
	}
	got = append(got, rest...)

	want, err := g.Agents.Events(ctx, auth.Principal{AccountID: tn.Account.ID}, sp.SessionID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d events streamed over three connections, the log has %d", len(got), len(want))
	}
	for i, e := range got {
		if e.Seq != int64(i+1) || e.Seq != want[i].Seq || e.Kind != want[i].Kind {
			t.Errorf("event %d: seq %d kind %s, want seq %d kind %s", i, e.Seq, e.Kind, want[i].Seq, want[i].Kind)
		}
	}
	last := got[len(got)-1]
	if last.Kind != "state" || !strings.Contains(string(last.Data), `"to":"stopped"`) {
		t.Errorf("the stream's last event %s %s is not the final state", last.Kind, last.Data)
	}
	// An ended session's stream sends what follows the cursor and ends.
	res2 := a.openEvents(ctx, "main", "?after="+strconv.Itoa(len(want)-2), nil)
	tail, err := readEvents(t, sse.NewReader(res2.Body), -1)
	res2.Body.Close()
	if !errors.Is(err, io.EOF) || len(tail) != 2 || tail[1].Seq != int64(len(want)) {
		t.Errorf("the ended session's tail: %d events, %v", len(tail), err)
	}

	// The slot's next session: a client that followed the first one and reconnects with its
	// last id (or, as ids were before, a bare sequence number beyond the new session's log)
	// gets the new session from its first event (trial h13 D1: from after the old cursor).
	next := a.spawn("main", "")
	for _, h := range []map[string]string{{"Last-Event-ID": last.ID}, {"Last-Event-ID": strconv.FormatInt(last.Seq, 10)}} {
		res := a.openEvents(ctx, "main", "", h)
		first, err := readEvents(t, sse.NewReader(res.Body), 1)
		res.Body.Close()
		if err != nil || len(first) != 1 || first[0].Seq != 1 || first[0].SessionID != next.SessionID {
			t.Errorf("resumed with %v after the slot's next session began: %+v, %v; want its event 1", h, first, err)
		}
	}
	// A cursor of this session resumes within it, and a malformed one is refused.
	res3 := a.openEvents(ctx, "main", "?after="+next.SessionID+":1", nil)
	second, err := readEvents(t, sse.NewReader(res3.Body), 1)
	res3.Body.Close()
	if err != nil || len(second) != 1 || second[0].Seq != 2 {
		t.Errorf("resumed after the new session's event 1: %+v, %v", second, err)
	}
	for _, bad := range []string{"nope:3", next.SessionID + ":x", next.SessionID + ":-1"} {
		status, _, body := a.do("GET", "/v1/agents/main/events", "", map[string]string{"Last-Event-ID": bad})
		if status != http.StatusBadRequest {
			t.Errorf("Last-Event-ID %q: %d %s", bad, status, body)
		}
	}
}

// mcpText calls a tool and returns its text and isError.
func mcpText(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	return callTool(t, cs, tool, args)
}

var cursorLine = regexp.MustCompile(`(?m)^cursor: (\d+)$`)

// tailEvents reads the events and the cursor of a tail_agent_session answer.
func tailEvents(t *testing.T, text string) ([]int64, int64) {
	t.Helper()
	lines := strings.Split(text, "\n")
	m := cursorLine.FindStringSubmatch(lines[len(lines)-1])
	if m == nil {
		t.Fatalf("no cursor line at the end of %q", text)
	}
	cursor, _ := strconv.ParseInt(m[1], 10, 64)
	var seqs []int64
	for _, l := range lines[1 : len(lines)-1] {
		var e struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("event line %q: %v", l, err)
		}
		seqs = append(seqs, e.Seq)
	}
	return seqs, cursor
}

// TestTailAgentSessionBounds: max_lines above 500 and max_seconds above 30 are refused by the
// schema; without a cursor the newest max_lines events come back; the cursor continues without
// gap or duplicate to the session's last event; a tail with nothing new returns after
// max_seconds with the cursor unchanged.
func TestTailAgentSessionBounds(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tn := g.NewTenant(t, "acme", 0, 5_000_000)
	g.AssignSlot(t, tn.Account.ID, "main")
	a := newAgentsClient(t, g, tn.Key)
	sp := a.spawn("main", scriptPrompt)
	a.waitState("main", "ready")
	a.json("DELETE", "/v1/agents/main", "", http.StatusAccepted, nil)
	a.waitState("main", "stopped")
	all, err := g.Agents.Events(context.Background(), auth.Principal{AccountID: tn.Account.ID}, sp.SessionID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(all))
	if n < 8 {
		t.Fatalf("only %d events", n)
	}
	cs := mcpSession(t, g, tn.Key)

	for _, args := range []map[string]any{
		{"session_id": sp.SessionID, "max_lines": 501},
		{"session_id": sp.SessionID, "max_seconds": 31},
	} {
		if text, isErr := mcpText(t, cs, "tail_agent_session", args); !isErr || !strings.Contains(text, "maximum") {
			t.Errorf("tail %v: %q (isError %v), want a refusal", args, text, isErr)
		}
	}
	text, isErr := mcpText(t, cs, "tail_agent_session", map[string]any{"session_id": sp.SessionID, "max_lines": 3})
	seqs, cursor := tailEvents(t, text)
	if isErr || len(seqs) != 3 || seqs[0] != n-2 || seqs[2] != n || cursor != n || !strings.Contains(text, "stopped (user_stop)") {
		t.Fatalf("the newest 3 events: %v cursor %d (isError %v)\n%s", seqs, cursor, isErr, text)
	}
	// From the first event on, two at a time.
	var union []int64
	cursor = 1
	union = append(union, 1)
	for cursor < n {
		text, isErr = mcpText(t, cs, "tail_agent_session", map[string]any{"session_id": sp.SessionID, "cursor": cursor, "max_lines": 2})
		var page []int64
		page, next := tailEvents(t, text)
		if isErr || len(page) == 0 || len(page) > 2 || next != page[len(page)-1] {
			t.Fatalf("tail after %d: %v next %d\n%s", cursor, page, next, text)
		}
		union, cursor = append(union, page...), next
	}
	for i, s := range union {
		if s != int64(i+1) {
			t.Fatalf("tail pages %v have a gap or a duplicate", union)
		}
	}
	start := time.Now()
	text, isErr = mcpText(t, cs, "tail_agent_session", map[string]any{"session_id": sp.SessionID, "cursor": n, "max_seconds": 1})
	seqs, cursor = tailEvents(t, text)
	if isErr || len(seqs) != 0 || cursor != n || !strings.Contains(text, "No events after cursor") {
		t.Errorf("a tail with nothing new: %v cursor %d\n%s", seqs, cursor, text)
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Errorf("a tail with nothing new returned after %v, before its max_seconds", waited)
	}
}

// TestAgentOwnershipMatrix: two tenants; every agent route and tool given the other tenant's
// slot, session or approval id answers exactly as for an id that does not exist, and changes
// nothing; the listings show only the caller's own sessions, tickets and approvals.
func TestAgentOwnershipMatrix(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	owner := g.NewTenant(t, "owner", 0, 5_000_000)
	intruder := g.NewTenant(t, "intruder", 0, 5_000_000)
	g.AssignSlot(t, owner.Account.ID, "secret")
	g.AssignSlot(t, intruder.Account.ID, "mine")
	oa := newAgentsClient(t, g, owner.Key)
	sp := oa.spawn("secret", scriptPrompt)
	oa.waitState("secret", "ready")
	ocs := mcpSession(t, g, owner.Key)
	text, _ := mcpText(t, ocs, "agent_spawn", map[string]any{"purpose": "owner's plan"})
	approvalID := regexp.MustCompile(`^Approval (\S+) created`).FindStringSubmatch(text)
	if approvalID == nil {
		t.Fatalf("agent_spawn: %s", text)
	}
	ticket, err := g.Agents.OpenTicket(ctx, owner.Account.ID, nil, "owner's ticket", "", "operator")
	if err != nil {
		t.Fatal(err)
	}
	p := auth.Principal{AccountID: owner.Account.ID}
	before, err := g.Agents.Events(ctx, p, sp.SessionID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}

	ia := newAgentsClient(t, g, intruder.Key)
	// REST: the owner's slot name and a name nobody has get the same answer, but for the name.
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/agents", `{"slot":"%s","prompt":"hi"}`},
		{"POST", "/v1/agents/%s/messages", `{"text":"hi"}`},
		{"DELETE", "/v1/agents/%s", ""},
		{"GET", "/v1/agents/%s/events", ""},
	} {
		answer := func(slot string) (int, string) {
			path, body := r.path, r.body
			if strings.Contains(path, "%s") {
				path = strings.Replace(path, "%s", slot, 1)
			} else {
				body = strings.Replace(body, "%s", slot, 1)
			}
			status, _, b := ia.do(r.method, path, body, map[string]string{"Idempotency-Key": "k-" + slot + r.method + r.path})
			return status, strings.ReplaceAll(string(b), slot, "SLOT")
		}
		fs, fb := answer("secret")
		ms, mb := answer("nowhere")
		env := errorEnvelopeOf([]byte(fb))
		if fs != http.StatusForbidden || env.Error.Type != "permission_error" || fs != ms || fb != mb {
			t.Errorf("%s %s: the owner's slot %d %s; a missing slot %d %s", r.method, r.path, fs, fb, ms, mb)
		}
	}
	// Names no slot can have (PostgreSQL's text holds no NUL and only UTF-8): nobody's slot, the
	// same 403, not a database error.
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/agents", `{"slot":"ma\u0000in","prompt":"hi"}`},
		{"POST", "/v1/agents/main%00/messages", `{"text":"hi"}`},
		{"POST", "/v1/agents/%C0%AF/messages", `{"text":"hi"}`},
		{"DELETE", "/v1/agents/%FF%FE", ""},
		{"GET", "/v1/agents/main%00/events", ""},
	} {
		status, _, b := ia.do(r.method, r.path, r.body, nil)
		if env := errorEnvelopeOf(b); status != http.StatusForbidden || env.Error.Type != "permission_error" {
			t.Errorf("%s %s %s: %d %s", r.method, r.path, r.body, status, b)
		}
	}
	if got := ia.slots(); len(got) != 1 || got[0].Slot != "mine" {
		t.Errorf("the intruder's GET /v1/agents: %+v", got)
	}

	// MCP: the owner's session and approval ids, a random id and a malformed one, the same text
	// but for the id.
	ics := mcpSession(t, g, intruder.Key)
	missing := uuid.NewString()
	for _, c := range []struct {
		tool string
		args func(id string) map[string]any
		id   string
	}{
		{"tail_agent_session", func(id string) map[string]any { return map[string]any{"session_id": id} }, sp.SessionID},
		{"tail_agent_session", func(id string) map[string]any { return map[string]any{"session_id": id, "cursor": 1, "max_seconds": 1} }, sp.SessionID},
		{"agent_prompt", func(id string) map[string]any { return map[string]any{"session_id": id, "prompt": "hi"} }, sp.SessionID},
		{"agent_action_status", func(id string) map[string]any { return map[string]any{"approval_id": id} }, approvalID[1]},
	} {
		foreign, fErr := mcpText(t, ics, c.tool, c.args(c.id))
		for _, other := range []string{missing, "not-an-id"} {
			text, isErr := mcpText(t, ics, c.tool, c.args(other))
			if !fErr || !isErr || strings.ReplaceAll(foreign, c.id, "ID") != strings.ReplaceAll(text, other, "ID") || !strings.Contains(text, "is not owned by the caller") {
				t.Errorf("%s: the owner's id %q; id %s %q", c.tool, foreign, other, text)
			}
		}
	}
	for tool, hidden := range map[string]string{"list_agent_sessions": sp.SessionID, "list_agent_tickets": ticket.ID} {
		if text, isErr := mcpText(t, ics, tool, map[string]any{}); isErr || strings.Contains(text, hidden) {
			t.Errorf("%s of the intruder shows the owner's %s: %s", tool, hidden, text)
		}
		if text, _ := mcpText(t, ocs, tool, map[string]any{}); !strings.Contains(text, hidden) {
			t.Errorf("%s of the owner lacks %s: %s", tool, hidden, text)
		}
	}
	if text, _ := mcpText(t, ics, "list_agent_tickets", map[string]any{"state": "all"}); strings.Contains(text, ticket.ID) {
		t.Errorf("the intruder's tickets (all) show the owner's: %s", text)
	}

	// Nothing changed: the owner's session has the same events and state, its approval is
	// pending, and no approval was made for the owner by the intruder's agent_prompt.
	after, err := g.Agents.Events(ctx, p, sp.SessionID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("the owner's session has %d events, had %d", len(after), len(before))
	}
	if s := oa.waitState("secret", "ready"); s.Session.ID != sp.SessionID {
		t.Errorf("the owner's slot now runs %+v", *s.Session)
	}
	aps, err := g.Agents.ListApprovals(ctx, &owner.Account.ID, "all", 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(aps) != 1 || aps[0].State != agent.ApprovalPending {
		t.Errorf("the owner's approvals: %+v", aps)
	}
	mine, err := g.Agents.ListApprovals(ctx, &intruder.Account.ID, "all", 50)
	if err != nil || len(mine) != 0 {
		t.Errorf("the intruder's refused calls made approvals: %+v %v", mine, err)
	}
}

// TestAPIKeyCannotResolveApprovals: an approval made by agent_spawn stays pending whatever an
// API key tries: no MCP tool resolves one (tools/list has none; calling a made-up one is an
// unknown tool), and no route does (every path that could is 404 or 405).
func TestAPIKeyCannotResolveApprovals(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tn := g.NewTenant(t, "acme", 0, 5_000_000)
	g.AssignSlot(t, tn.Account.ID, "main")
	cs := mcpSession(t, g, tn.Key)
	text, isErr := mcpText(t, cs, "agent_spawn", map[string]any{"purpose": "count the rows"})
	m := regexp.MustCompile(`^Approval (\S+) created`).FindStringSubmatch(text)
	if isErr || m == nil {
		t.Fatalf("agent_spawn: %s", text)
	}
	id := m[1]
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		for _, word := range []string{"approve", "resolve", "deny"} {
			if strings.Contains(tool.Name, word) {
				t.Errorf("tool %s looks like it resolves approvals", tool.Name)
			}
		}
	}
	for _, name := range []string{"approve", "approve_agent_action", "resolve_approval", "agent_approve"} {
		_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: map[string]any{"approval_id": id}})
		if err == nil || !strings.Contains(err.Error(), "unknown tool") {
			t.Errorf("tools/call %s: %v, want an unknown tool", name, err)
		}
	}
	// Routes: none of these exists (the transport only validates documented operations, so
	// they go out through a plain client).
	for _, r := range []request{
		{"POST", "/v1/approvals/" + id + "/approve", ""},
		{"POST", "/v1/agents/approvals/" + id, `{"approve":true}`},
		{"PATCH", "/v1/agents/main", `{"approval_id":"` + id + `"}`},
		{"PUT", "/v1/agents", `{"approval_id":"` + id + `","state":"approved"}`},
	} {
		status, _, body := do(t, http.DefaultClient, g.URL, r, map[string]string{"Authorization": "Bearer " + tn.Key})
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d %s", r.method, r.path, status, body)
		}
	}
	text, _ = mcpText(t, cs, "agent_action_status", map[string]any{"approval_id": id})
	if !strings.Contains(text, "is pending") || !strings.Contains(text, `"state":"pending"`) {
		t.Errorf("after every attempt: %s", text)
	}
	if got := newAgentsClient(t, g, tn.Key).slots(); len(got) != 1 || got[0].Session != nil {
		t.Errorf("a session started without approval: %+v", got)
	}
}

// TestAgentMessagesAreBounded: what a tenant can make the gateway keep for an agent without
// paying for it is bounded (trial h5: five queued messages added 146 MB to the database, not
// billed): a prompt or message above 262,144 characters is refused (400 naming the field), and a
// busy session queues at most 16 messages for its next turn (409 beyond).
func TestAgentMessagesAreBounded(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tn := g.NewTenant(t, "acme", 0, 5_000_000)
	g.AssignSlot(t, tn.Account.ID, "main")
	a := newAgentsClient(t, g, tn.Key)
	long := strings.Repeat("x", 262_145)
	for _, c := range []struct{ path, body, param string }{
		{"/v1/agents", `{"slot":"main","prompt":"` + long + `"}`, "prompt"},
		{"/v1/agents/main/messages", `{"text":"` + long + `"}`, "text"},
	} {
		status, _, body := a.do("POST", c.path, c.body, nil)
		env := errorEnvelopeOf(body)
		if status != http.StatusBadRequest || env.Error.Param == nil || *env.Error.Param != c.param {
			t.Errorf("%s with 262,145 characters: %d %.300s, want 400 naming %s", c.path, status, body, c.param)
		}
	}
	// The first turn's model call stalls: the session stays busy.
	if status, _, body := a.do("POST", "/v1/agents", `{"slot":"main","prompt":"hold [[sim fault=stall_before ms=30000]]"}`, nil); status != http.StatusAccepted {
		t.Fatalf("spawn: %d %s", status, body)
	}
	a.waitState("main", "busy")
	// The prompt waits with them until the first turn takes it: 15 or 16 more are queued.
	accepted := 0
	for range 40 {
		status, _, body := a.do("POST", "/v1/agents/main/messages", `{"text":"queued `+strings.Repeat("y", 1000)+`"}`, nil)
		if status == http.StatusAccepted && strings.Contains(string(body), `"queued":true`) {
			accepted++
			continue
		}
		if env := errorEnvelopeOf(body); status != http.StatusConflict || !strings.Contains(env.Error.Message, "16 messages waiting") {
			t.Errorf("after %d queued messages: %d %s, want 409", accepted, status, body)
		}
		break
	}
	if accepted < 15 || accepted > 16 {
		t.Errorf("%d messages queued, want 16 waiting at most", accepted)
	}
	if status, _, body := a.do("DELETE", "/v1/agents/main", "", nil); status != http.StatusAccepted {
		t.Errorf("stop: %d %s", status, body)
	}
}

// TestAgentSpawnSettings: POST /v1/agents takes the settings agent_spawn takes: a model, a
// resource profile, a name and bounds that lower the profile's; bounds above the profile's, or
// out of the contract's range, are refused with 400 naming them. Trial h13 D5: they were left
// out without a word, and a caller that capped its session at one turn got twenty.
func TestAgentSpawnSettings(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tn := g.NewTenant(t, "acme", 0, 5_000_000)
	g.AssignSlot(t, tn.Account.ID, "main")
	a := newAgentsClient(t, g, tn.Key)
	for _, c := range []struct{ body, param string }{
		{`{"slot":"main","prompt":"hi","max_turns":1000}`, "max_turns"},
		{`{"slot":"main","prompt":"hi","max_spend":0}`, "max_spend"},
	} {
		status, _, body := a.do("POST", "/v1/agents", c.body, nil)
		if env := errorEnvelopeOf(body); status != http.StatusBadRequest || env.Error.Param == nil || !strings.Contains(*env.Error.Param, c.param) {
			t.Errorf("%s: %d %s", c.body, status, body)
		}
	}
	var sp spawned
	a.json("POST", "/v1/agents", `{"slot":"main","prompt":"hi","max_turns":1,"max_spend":5000,"agent_name":"scout"}`, http.StatusAccepted, &sp)
	var out struct {
		Data []struct {
			Slot    string `json:"slot"`
			Session struct {
				ID             string `json:"id"`
				MaxTurns       int    `json:"maxTurns"`
				MaxSpendMicros int64  `json:"maxSpendMicros"`
				AgentName      string `json:"agentName"`
			} `json:"session"`
		} `json:"data"`
	}
	a.json("GET", "/v1/agents", "", http.StatusOK, &out)
	for _, s := range out.Data {
		if s.Slot == "main" && (s.Session.ID != sp.SessionID || s.Session.MaxTurns != 1 || s.Session.MaxSpendMicros != 5000 || s.Session.AgentName != "scout") {
			t.Errorf("the session's settings: %+v", s.Session)
		}
	}
}

// TestAgentSpawnOnALiveSlotChecksTheRequestFirst: a spawn with a bad setting (a bound above the
// profile's, an unknown profile or environment, a model the account lacks) on a slot that runs
// a session is a 400 naming the setting, as on a free slot: the request is checked before the
// slot. On the old code it was the 409 of the busy slot, and the caller who stopped the
// session to retry met the 400 only then. A good spawn on the live slot is still the 409.
func TestAgentSpawnOnALiveSlotChecksTheRequestFirst(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tn := g.NewTenant(t, "acme", 0, 5_000_000)
	g.AssignSlot(t, tn.Account.ID, "main")
	a := newAgentsClient(t, g, tn.Key)
	var sp spawned
	a.json("POST", "/v1/agents", `{"slot":"main","prompt":"hi"}`, http.StatusAccepted, &sp)
	for _, c := range []struct{ body, param string }{
		{`{"slot":"main","prompt":"hi","max_turns":1000}`, "max_turns"},
		{`{"slot":"main","prompt":"hi","max_spend":9007199254740991}`, "max_spend"},
		{`{"slot":"main","prompt":"hi","resource_profile":"enormous"}`, "resource_profile"},
		{`{"slot":"main","prompt":"hi","target_environment":"elsewhere"}`, "target_environment"},
		{`{"slot":"main","prompt":"hi","model":"no-such-model"}`, "model"},
	} {
		status, _, body := a.do("POST", "/v1/agents", c.body, nil)
		if env := errorEnvelopeOf(body); status != http.StatusBadRequest || env.Error.Param == nil || *env.Error.Param != c.param {
			t.Errorf("%s on a live slot: %d %s; want 400 naming %s", c.body, status, body, c.param)
		}
	}
	status, _, body := a.do("POST", "/v1/agents", `{"slot":"main","prompt":"hi","max_turns":1}`, nil)
	if env := errorEnvelopeOf(body); status != http.StatusConflict || !strings.Contains(env.Error.Message, "already runs session "+sp.SessionID) {
		t.Errorf("a good spawn on the live slot: %d %s; want 409 naming the session", status, body)
	}
}

// TestIdempotencyKeyOfAnotherAPIKey: Idempotency-Keys are per account. One used by another API
// key of the account is a 409 that says so, the same for the same request and for another one,
// naming nothing of the other key's request (on the old code it said the key "was already used
// with a different request", also of the very same request); the key that used it is told of a
// different request as before. Another account's use of the same Idempotency-Key is no
// conflict: its request runs, answered with its own session, and learns nothing of the first.
func TestIdempotencyKeyOfAnotherAPIKey(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	acme := g.NewTenant(t, "acme", 0, 5_000_000)
	g.AssignSlot(t, acme.Account.ID, "main")
	g.AssignSlot(t, acme.Account.ID, "second")
	otherKey, _ := g.NewKey(t, acme.Account.ID, 0)
	globex := g.NewTenant(t, "globex", 0, 5_000_000)
	g.AssignSlot(t, globex.Account.ID, "main")
	a, b, x := newAgentsClient(t, g, acme.Key), newAgentsClient(t, g, otherKey), newAgentsClient(t, g, globex.Key)

	key := map[string]string{"Idempotency-Key": "shared-1"}
	spawn := `{"slot":"main","prompt":"` + scriptPrompt + `"}`
	status, _, first := a.do("POST", "/v1/agents", spawn, key)
	if status != http.StatusAccepted {
		t.Fatalf("spawn: %d %s", status, first)
	}
	var sp spawned
	_ = json.Unmarshal(first, &sp)

	var answers []string
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/agents", spawn},
		{"POST", "/v1/agents", `{"slot":"second","prompt":"hi"}`},
		{"POST", "/v1/agents/main/messages", `{"text":"hi"}`},
		{"DELETE", "/v1/agents/main", ""},
	} {
		status, _, body := b.do(r.method, r.path, r.body, key)
		env := errorEnvelopeOf(body)
		if status != http.StatusConflict || env.Error.Type != "conflict" ||
			!strings.Contains(env.Error.Message, "'shared-1' was already used by another API key of this account") ||
			strings.Contains(env.Error.Message, "different request") || strings.Contains(string(body), sp.SessionID) {
			t.Errorf("another key of the account, %s %s %s: %d %s; want 409 saying another API key used it", r.method, r.path, r.body, status, body)
		}
		answers = append(answers, string(body))
	}
	for _, ans := range answers[1:] {
		if ans != answers[0] {
			t.Errorf("another key's answers differ with its request (%s, %s): they would tell it whether the first request was the same", answers[0], ans)
		}
	}
	status, _, body := a.do("POST", "/v1/agents", `{"slot":"main","prompt":"something else"}`, key)
	if env := errorEnvelopeOf(body); status != http.StatusConflict || !strings.Contains(env.Error.Message, "already used with a different request") {
		t.Errorf("the same key, another request: %d %s", status, body)
	}

	status, _, theirs := x.do("POST", "/v1/agents", spawn, key)
	var xs spawned
	_ = json.Unmarshal(theirs, &xs)
	if status != http.StatusAccepted || xs.SessionID == "" || xs.SessionID == sp.SessionID {
		t.Errorf("another account with the same Idempotency-Key: %d %s; want its own 202 (the first: %s)", status, theirs, first)
	}
}

// TestStalledAgentEventsClientIsLetGo: a client of a session's events stream that takes no byte
// for four heartbeat intervals (here 4 × 200 ms) is let go: its write fails, the stream ends
// and the gateway closes the connection, as for an inference stream (trial h16 D2). On the old
// code the handler waited in its write for as long as the client kept the connection open, a
// goroutine and a connection held each.
func TestStalledAgentEventsClientIsLetGo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Heartbeat: 200 * time.Millisecond, Listener: apitest.SmallSendBuffers(ln)})
	tn := g.NewTenant(t, "acme", 0, 50_000_000)
	g.AssignSlot(t, tn.Account.ID, "main")
	a := newAgentsClient(t, g, tn.Key)
	// A long answer: its event alone is more than the connection's buffers hold.
	a.spawn("main", "Tell me everything. [[sim words=8000]]")
	a.waitState("main", "ready")

	c, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET /v1/agents/main/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", tn.Key)
	time.Sleep(3 * time.Second) // the client reads nothing: far past the bound of 800 ms
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("after %d bytes the stream was still open: the stalled client was not let go", n)
	}
	if n == 0 {
		t.Fatal("the client read nothing")
	}
}
