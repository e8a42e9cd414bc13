package web_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/gen/db"
)

// pendingApproval writes a pending approval of the account, requested by the key, as the
// agent_spawn or agent_prompt tool writes it, and returns its id.
func (e *env) pendingApproval(t *testing.T, account, key uuid.UUID, action, arguments string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(arguments))
	ap, err := db.New(e.Store.Pool()).InsertAgentApproval(context.Background(), db.InsertAgentApprovalParams{
		ID: uuid.New(), AccountID: account, KeyID: pgtype.UUID{Bytes: key, Valid: true}, Action: action,
		Arguments: []byte(arguments), ArgumentsHash: hex.EncodeToString(sum[:]), ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return ap.ID.String()
}

func (e *env) approvalState(t *testing.T, id string) string {
	t.Helper()
	var state string
	if err := e.Store.Pool().QueryRow(context.Background(), `SELECT state FROM agent_approvals WHERE id = $1`, id).Scan(&state); err != nil {
		t.Fatal(err)
	}
	return state
}

// TestApprovalsPage: a member sees the pending action with its exact arguments (indented),
// their hash and expiry, and the buttons disabled with the reason; a member's decision is
// refused (403) and changes nothing. An owner denies one, which is listed as resolved with
// who decided, and audited with before and after.
func TestApprovalsPage(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	if _, err := e.Members.Add(context.Background(), acme.ID, bobEmail, "member"); err != nil {
		t.Fatal(err)
	}
	key, err := e.Accounts.CreateKey(context.Background(), acme.ID, "ci-bot", 0)
	if err != nil {
		t.Fatal(err)
	}
	spawn := e.pendingApproval(t, acme.ID, key.Key.ID, "spawn", `{"purpose":"fix the flaky test","max_turns":5}`)

	bob := e.browser(t)
	bob.signIn(e, bobEmail, bobPass)
	p := bob.get("/approvals")
	// The requester's key as the Keys page shows it: prefix and last four (trial h6).
	if k := key.Key; k.DisplaySuffix == "" || !strings.Contains(p.Body, "ci-bot ("+k.DisplayPrefix+"…"+k.DisplaySuffix+")") {
		t.Errorf("the approval does not name the key as %s…%s", k.DisplayPrefix, k.DisplaySuffix)
	}
	for _, want := range []string{spawn, "Start an agent session", "<dt>Requested by</dt><dd>ci-bot (", "&#34;purpose&#34;: &#34;fix the flaky test&#34;,\n  &#34;max_turns&#34;: 5",
		"Only the account's owners may approve or deny", `disabled aria-describedby="owners-only">Approve`} {
		if !strings.Contains(p.Body, want) {
			t.Errorf("member's approvals page lacks %q", want)
		}
	}
	if p.Status != http.StatusOK || strings.Contains(p.Body, `action="/approvals/`+spawn+`/approve"`) {
		t.Fatalf("member's approvals page: %d %.2000s", p.Status, p.Body)
	}
	if r := bob.post("/approvals/"+spawn+"/approve", nil); r.Status != http.StatusForbidden {
		t.Errorf("member approves: %d", r.Status)
	}
	if s := e.approvalState(t, spawn); s != "pending" {
		t.Fatalf("after the member's attempt: %s", s)
	}

	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	if p := alice.get("/approvals"); !strings.Contains(p.Body, `action="/approvals/`+spawn+`/deny"`) {
		t.Fatalf("owner's approvals page has no deny form: %.2000s", p.Body)
	}
	r := alice.post("/approvals/"+spawn+"/deny", nil)
	if r.Status != http.StatusSeeOther {
		t.Fatalf("deny: %d %.300s", r.Status, r.Body)
	}
	if s := e.approvalState(t, spawn); s != "denied" {
		t.Fatalf("after deny: %s", s)
	}
	p = alice.follow(r, nil)
	if !strings.Contains(p.Body, "Denied: the action will not run.") || !strings.Contains(p.Body, "Nothing is waiting for a decision.") ||
		!strings.Contains(p.Body, "<td>denied</td>") || !strings.Contains(p.Body, "<td>"+aliceEmail+"</td>") {
		t.Errorf("after deny: %.3000s", p.Body)
	}
	var n int
	if err := e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE account_id = $1 AND action = 'approval.decided'
		AND actor = $2 AND target = $3 AND before->>'state' = 'pending' AND after->>'state' = 'denied' AND after->>'resolved_by' = $2`,
		acme.ID, aliceEmail, "approval "+spawn).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the decision audited: %d %v", n, err)
	}
}

// TestApprovalDecidedExactlyOnce: two owners' decisions on one approval at the same time:
// exactly one wins (303), the other is told it is already decided (409), and one decision is
// audited. Deciding it again later says the same.
func TestApprovalDecidedExactlyOnce(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	if _, err := e.Members.Add(context.Background(), acme.ID, bobEmail, "owner"); err != nil {
		t.Fatal(err)
	}
	key, err := e.Accounts.CreateKey(context.Background(), acme.ID, "ci-bot", 0)
	if err != nil {
		t.Fatal(err)
	}
	alice, bob := e.browser(t), e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	bob.signIn(e, bobEmail, bobPass)
	for round := 0; round < 3; round++ {
		id := e.pendingApproval(t, acme.ID, key.Key.ID, "spawn", `{"purpose":"round","max_turns":1}`)
		var wg sync.WaitGroup
		results := make([]page, 2)
		for i, b := range []*browser{alice, bob} {
			verb := []string{"approve", "deny"}[i]
			wg.Go(func() { results[i] = b.post("/approvals/"+id+"/"+verb, nil) })
		}
		wg.Wait()
		won, lost := 0, 0
		for _, r := range results {
			switch {
			case r.Status == http.StatusSeeOther:
				won++
			case r.Status == http.StatusConflict && strings.Contains(r.Body, "already"):
				lost++
			default:
				t.Errorf("round %d: %d %.300s", round, r.Status, r.Body)
			}
		}
		if won != 1 || lost != 1 {
			t.Fatalf("round %d: %d won, %d told already decided", round, won, lost)
		}
		state := e.approvalState(t, id)
		if state != "approved" && state != "denied" {
			t.Fatalf("round %d: state %s", round, state)
		}
		var n int
		if err := e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'approval.decided' AND target = $1 AND after->>'state' = $2`,
			"approval "+id, state).Scan(&n); err != nil || n != 1 {
			t.Fatalf("round %d: %d decisions audited (%v)", round, n, err)
		}
		again := alice.post("/approvals/"+id+"/approve", nil)
		if again.Status != http.StatusConflict || !strings.Contains(again.Body, "already "+state) {
			t.Fatalf("round %d: deciding again: %d %.300s", round, again.Status, again.Body)
		}
	}
}

// TestApprovalOtherAccountNotFound: another account's approval id, an unknown one and a
// malformed one all answer 404 on approve and deny; the other account's approval stays
// pending and is never listed.
func TestApprovalOtherAccountNotFound(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	globex := e.account(t, "globex", bobEmail, "owner")
	theirKey, err := e.Accounts.CreateKey(context.Background(), globex.ID, "theirs", 0)
	if err != nil {
		t.Fatal(err)
	}
	theirs := e.pendingApproval(t, globex.ID, theirKey.Key.ID, "spawn", `{"purpose":"secret plan"}`)
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	if p := alice.get("/approvals"); p.Status != http.StatusOK || strings.Contains(p.Body, theirs) || strings.Contains(p.Body, "secret plan") {
		t.Fatalf("another account's approval is listed: %d", p.Status)
	}
	for _, id := range []string{theirs, uuid.NewString(), "not-a-uuid"} {
		for _, verb := range []string{"approve", "deny"} {
			if p := alice.post("/approvals/"+id+"/"+verb, nil); p.Status != http.StatusNotFound || !strings.Contains(p.Body, "There is no such approval.") {
				t.Errorf("%s %s: %d", verb, id, p.Status)
			}
		}
	}
	if s := e.approvalState(t, theirs); s != "pending" {
		t.Fatalf("the other account's approval: %s", s)
	}
}

// TestApprovalRequestedThroughOAuth: an approval asked for through a connected app's OAuth
// grant (no key) names the app and the member who granted it on the Approvals page, not "—".
func TestApprovalRequestedThroughOAuth(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	args := `{"purpose":"triage the backlog"}`
	sum := sha256.Sum256([]byte(args))
	ap, err := db.New(e.Store.Pool()).InsertAgentApproval(context.Background(), db.InsertAgentApprovalParams{
		ID: uuid.New(), AccountID: acme.ID, Action: "spawn", Arguments: []byte(args), ArgumentsHash: hex.EncodeToString(sum[:]),
		ExpiresAt: time.Now().Add(time.Hour), RequestedBy: "Claude Code (" + aliceEmail + ")"})
	if err != nil {
		t.Fatal(err)
	}
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	p := alice.get("/approvals")
	if want := "<dt>Requested by</dt><dd>Claude Code (" + aliceEmail + "), a connected app</dd>"; p.Status != http.StatusOK || !strings.Contains(p.Body, want) {
		t.Fatalf("approvals page (%d) lacks %q:\n%.3000s", p.Status, want, p.Body)
	}
	if strings.Contains(p.Body, "<dd>—</dd>") {
		t.Errorf("the requester of %s is still a dash", ap.ID)
	}
}

// TestApprovalWarnsWhenNoSlotIsFree: a pending spawn says, before anyone approves it, that no
// slot is free while every slot runs a session (trial h6: approving it failed with no word
// before), and says nothing once one is free.
func TestApprovalWarnsWhenNoSlotIsFree(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	key, err := e.Accounts.CreateKey(context.Background(), acme.ID, "ci-bot", 0)
	if err != nil {
		t.Fatal(err)
	}
	e.pendingApproval(t, acme.ID, key.Key.ID, "spawn", `{"purpose":"fix the flaky test"}`)
	session := e.agentSession(t, acme.ID, "main")
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	const warning = "No slot is free now"
	if p := alice.get("/approvals"); !strings.Contains(p.Body, warning) {
		t.Errorf("every slot busy: the pending spawn does not warn: %.2000s", p.Body)
	}
	e.agentEvent(t, acme.ID, session, 1, "state", map[string]any{"from": "ready", "to": "stopped", "reason": "user_stop"})
	if p := alice.get("/approvals"); strings.Contains(p.Body, warning) {
		t.Errorf("a free slot: the pending spawn still warns")
	}
}
