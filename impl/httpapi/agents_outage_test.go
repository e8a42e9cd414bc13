package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/sse"
)

// readUntilHeartbeat reads the stream's lines up to its first heartbeat comment (the log read
// to its end, the session idle) and returns them.
func readUntilHeartbeat(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	var read strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before a heartbeat: %v\n%s", err, read.String())
		}
		if strings.HasPrefix(line, ": heartbeat") {
			return read.String()
		}
		read.WriteString(line)
	}
}

// logEvents parses the log events of a stream's text (events with an id), and returns them with
// the stream's events without an id (its in-band errors).
func logEvents(t *testing.T, text string) (events []streamedEvent, errs []sse.Event) {
	t.Helper()
	r := sse.NewReader(strings.NewReader(text))
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return events, errs
		}
		if err != nil {
			t.Fatalf("the stream: %v\n%s", err, text)
		}
		if ev.ID == "" {
			errs = append(errs, sse.Event{Name: ev.Name, Data: append([]byte(nil), ev.Data...)})
			continue
		}
		got, err := readEvents(t, sse.NewReader(strings.NewReader(string(sse.AppendEvent(nil, ev)))), 1)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, got...)
	}
}

// TestAgentEventsEndWithErrorOnDatabaseLoss (issue 23 item 6): an agent's event stream that
// loses its database sends an `error` event (no id, the 503 of a database outage in the
// chat-completions envelope) and a `retry:` field (also sent at the stream's start) before it
// closes, instead of ending silently; once the database is back, a reconnection with
// Last-Event-ID continues with exactly the events that followed, those appended while no
// stream was open among them, to the session's end. Every answer and event is checked against
// the OpenAPI document.
//
// On the code before, the stream ended without an error event or a retry field: the first
// check after the database stops fails.
func TestAgentEventsEndWithErrorOnDatabaseLoss(t *testing.T) {
	o := pgtest.NewOutage(t)
	g := apitest.Start(t, apitest.Options{ConnString: o.ConnString(), Heartbeat: 50 * time.Millisecond})
	tn := g.NewTenant(t, "acme", 0, 5_000_000)
	g.AssignSlot(t, tn.Account.ID, "main")
	a := newAgentsClient(t, g, tn.Key)
	sp := a.spawn("main", scriptPrompt)
	a.waitState("main", "ready")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := a.openEvents(ctx, "main", "", nil)
	br := bufio.NewReader(res.Body)
	firstLine, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	before := readUntilHeartbeat(t, br)
	if firstLine != "retry: 2000\n" {
		t.Errorf("the stream's first line %q, want the retry field", firstLine)
		before = firstLine + before
	}

	o.Stop()
	ended := make(chan struct{})
	var rest []byte
	var restErr error
	go func() {
		defer close(ended)
		rest, restErr = io.ReadAll(br)
	}()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		res.Body.Close()
		<-ended
		t.Fatalf("the stream was still open 30 s after the database stopped:\n%s", rest)
	}
	res.Body.Close()
	if restErr != nil {
		t.Fatalf("the stream did not end cleanly: %v\n%s", restErr, rest)
	}
	first, errs := logEvents(t, before+string(rest))
	if len(first) == 0 {
		t.Fatal("no event before the database stopped")
	}
	if len(errs) != 1 || errs[0].Name != "error" {
		t.Fatalf("the stream ended without one error event: %+v\n%s", errs, rest)
	}
	var env struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(errs[0].Data, &env); err != nil || env.Error.Type != "service_unavailable_error" ||
		env.Error.Code != "dependency_unavailable" || !strings.Contains(env.Error.Message, "database") {
		t.Errorf("the error event's data %s (%v)", errs[0].Data, err)
	}
	if i := strings.Index(string(rest), "event: error\n"); i < 0 || !strings.HasSuffix(string(rest[i:]), "\n\nretry: 2000\n\n") {
		t.Errorf("the stream does not end with the error event and then the retry field:\n%s", rest)
	}

	// The database comes back. The session takes a message while no stream is open; then a
	// reconnection with the last id seen gets what followed, and follows the session to its end.
	o.Start()
	waitUntil(t, "a message is accepted again", func() bool {
		status, _, _ := a.do("POST", "/v1/agents/main/messages", `{"text":"and again?"}`, nil)
		return status == http.StatusAccepted
	})
	a.waitState("main", "ready")
	lastID := first[len(first)-1].ID
	var resumed *http.Response
	waitUntil(t, "the stream reopens", func() bool {
		req, _ := http.NewRequestWithContext(ctx, "GET", g.URL+"/v1/agents/main/events", nil)
		req.Header.Set("Authorization", "Bearer "+tn.Key)
		req.Header.Set("Last-Event-ID", lastID)
		r, err := a.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode != http.StatusOK {
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
			return false
		}
		resumed = r
		return true
	})
	defer resumed.Body.Close()
	rbr := bufio.NewReader(resumed.Body)
	pending := readUntilHeartbeat(t, rbr)
	a.json("DELETE", "/v1/agents/main", "", http.StatusAccepted, nil)
	after, err := io.ReadAll(rbr)
	if err != nil {
		t.Fatalf("the resumed stream: %v", err)
	}
	second, errs := logEvents(t, pending+string(after))
	if len(errs) != 0 {
		t.Errorf("in-band errors on the resumed stream: %+v", errs)
	}
	got := append(first, second...)
	want, err := g.Agents.Events(ctx, auth.Principal{AccountID: tn.Account.ID}, sp.SessionID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d events over the two connections, the log has %d", len(got), len(want))
	}
	for i, e := range got {
		if e.Seq != want[i].Seq || e.Kind != want[i].Kind {
			t.Errorf("event %d: seq %d kind %s, want seq %d kind %s", i, e.Seq, e.Kind, want[i].Seq, want[i].Kind)
		}
	}
	sawMessage := false
	for _, e := range second {
		sawMessage = sawMessage || e.Kind == "message_in"
	}
	if !sawMessage {
		t.Errorf("the resumed stream lacks the message sent while no stream was open: %+v", second)
	}
}
