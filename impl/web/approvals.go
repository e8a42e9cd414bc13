package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/plaintext"
	"github.com/tollgate/tollgate/impl/web/audit"
)

// The Approvals page: the account's agent actions waiting for a person (agent_spawn and
// agent_prompt requested by an API key through MCP), each with its exact arguments, and the
// ones already resolved. Owners approve or deny them; each decision is made exactly once by
// agent.Service.Resolve (one conditional update), and only the decision that won is audited.

func (a *App) approvalsRoutes(mux *router) {
	mux.Handle("GET /approvals", a.member(a.approvalsPage))
	mux.Handle("POST /approvals/{id}/approve", a.owner(a.decide(true)))
	mux.Handle("POST /approvals/{id}/deny", a.owner(a.decide(false)))
}

// approvalsShown bounds the approvals the page lists (pending and resolved together).
const approvalsShown = 200

// approvalRow is one approval as the page shows it.
type approvalRow struct {
	agent.Approval
	// Pretty is the arguments, indented.
	Pretty string
	// Requester names the key that asked (its name and prefix, or its id), or the connected
	// app and member of the OAuth grant that did.
	Requester string
	// Summary says in words what the arguments ask for ("" when they cannot be read).
	Summary string
}

type approvalsData struct {
	Available bool
	Pending   []approvalRow
	Resolved  []approvalRow
	// NoFreeSlot says that every slot of the account runs a session: a spawn approved now
	// fails (trial h6: it was approved, then failed, with no word before).
	NoFreeSlot bool
	// Notice is the result of the decision just made (from the redirect's query).
	Notice string
}

func (a *App) approvalsPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	d := approvalsData{Available: a.agents != nil}
	if a.agents != nil {
		acct := v.Account.AccountID
		list, err := a.agents.ListApprovals(r.Context(), &acct, "", approvalsShown)
		if err != nil {
			a.failInternal(w, r, v, "list approvals", err)
			return
		}
		keys, err := a.keyNames(r, acct)
		if err != nil {
			a.failInternal(w, r, v, "list keys", err)
			return
		}
		slots, err := a.agents.Overview(r.Context(), principal(v))
		if err != nil {
			a.failInternal(w, r, v, "agent overview", err)
			return
		}
		d.NoFreeSlot = true
		for _, s := range slots {
			if s.Session == nil || agent.Ended(s.Session.State) {
				d.NoFreeSlot = false
			}
		}
		for _, ap := range list {
			row := approvalRow{Approval: ap, Pretty: prettyJSON(ap.Arguments), Requester: keys.name(ap.KeyID),
				Summary: actionSummary(ap.Action, ap.Arguments)}
			if ap.KeyID == "" && ap.RequestedBy != "" {
				// Asked through a connected app's OAuth grant, which holds no key.
				row.Requester = plaintext.Visible(ap.RequestedBy, false) + ", a connected app"
			}
			if ap.State == "pending" {
				d.Pending = append(d.Pending, row)
			} else {
				d.Resolved = append(d.Resolved, row)
			}
		}
	}
	switch r.URL.Query().Get("decided") {
	case "approved":
		d.Notice = "Approved: the action is queued."
	case "denied":
		d.Notice = "Denied: the action will not run."
	}
	a.render(w, r, v, http.StatusOK, "approvals", "Approvals", d)
}

// decide approves or denies the {id} approval of the visitor's account. Resolve makes the
// decision exactly once: of two decisions at the same time one wins, the other is told the
// approval is already resolved (409). Another account's id is not found, as an unknown id.
func (a *App) decide(approve bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, v *Visitor) {
		if a.agents == nil {
			a.fail(w, r, v, http.StatusNotFound, "There is no such approval.")
			return
		}
		id := r.PathValue("id")
		if _, err := uuid.Parse(id); err != nil {
			a.fail(w, r, v, http.StatusNotFound, "There is no such approval.")
			return
		}
		acct := v.Account.AccountID
		ap, err := a.agents.Resolve(r.Context(), &acct, id, approve, actorName(v.User))
		var conflict *agent.ConflictError
		switch {
		case errors.Is(err, agent.ErrNotFound):
			a.fail(w, r, v, http.StatusNotFound, "There is no such approval.")
			return
		case errors.As(err, &conflict):
			a.fail(w, r, v, http.StatusConflict, conflict.Message+". Nothing was changed.")
			return
		case err != nil:
			a.failInternal(w, r, v, "resolve approval", err)
			return
		}
		before := map[string]any{"state": "pending", "action": ap.Action, "arguments_hash": ap.ArgumentsHash}
		after := map[string]any{"state": ap.State, "action": ap.Action, "arguments_hash": ap.ArgumentsHash,
			"resolved_by": ap.ResolvedBy}
		if ap.ActionStatus != "" {
			after["action_status"] = ap.ActionStatus
		}
		a.record(r, v, audit.ActionApproval, "approval "+ap.ID, before, after)
		http.Redirect(w, r, "/approvals?"+url.Values{"decided": {ap.State}}.Encode(), http.StatusSeeOther)
	}
}

// keyNamer names the account's keys for the pages that show who did something.
type keyNamer map[string]string

// keyNames loads the names of the account's keys.
func (a *App) keyNames(r *http.Request, account uuid.UUID) (keyNamer, error) {
	keys, err := a.store.ListAPIKeys(r.Context(), account)
	if err != nil {
		return nil, err
	}
	n := keyNamer{}
	for _, k := range keys {
		label := k.DisplayPrefix + "…" + k.DisplaySuffix // as the Keys page and the audit log show it
		if k.Name != "" {
			label = k.Name + " (" + label + ")"
		}
		n[k.ID.String()] = label
	}
	return n, nil
}

// name is the key's label, its id when it is not one of the account's keys any more, or "—".
func (n keyNamer) name(id string) string {
	if id == "" {
		return "—"
	}
	if label, ok := n[id]; ok {
		return label
	}
	return "key " + id
}

// actionSummary says in plain words what an approval's arguments ask for, beside the exact
// JSON: max_spend is in micro-units of a dollar, and an approver reading 100000 as dollars
// would approve ten thousand times what was asked ("max spend $0.10"). Limits that are absent
// are the resource profile's. Text from the arguments goes through visible, as in the JSON.
// Arguments that cannot be read give "" (the JSON alone is shown).
func actionSummary(action string, raw json.RawMessage) string {
	switch action {
	case "spawn":
		var a agent.SpawnAction
		if err := json.Unmarshal(raw, &a); err != nil {
			return ""
		}
		parts := []string{"the resource profile's max spend", "the resource profile's max turns", "the default model"}
		if a.MaxSpend != nil {
			parts[0] = "max spend " + plainUSD(*a.MaxSpend)
		}
		if a.MaxTurns != nil {
			parts[1] = fmt.Sprintf("max turns %d", *a.MaxTurns)
		}
		if a.Model != "" {
			parts[2] = "model " + plaintext.Visible(a.Model, true)
		}
		for _, f := range []struct{ name, value string }{{"resource profile", a.ResourceProfile},
			{"environment", a.TargetEnvironment}, {"agent name", a.AgentName}} {
			if f.value != "" {
				parts = append(parts, f.name+" "+plaintext.Visible(f.value, true))
			}
		}
		return "Start a session: " + strings.Join(parts, ", ") + "."
	case "prompt":
		var p struct {
			SessionID string `json:"session_id"`
			Prompt    string `json:"prompt"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return ""
		}
		n := utf8.RuneCountInString(p.Prompt)
		unit := "characters"
		if n == 1 {
			unit = "character"
		}
		return fmt.Sprintf("Send session %s a prompt of %d %s.", plaintext.Visible(p.SessionID, true), n, unit)
	}
	return ""
}

// plainUSD shows micro-units as dollars with cents and as many further digits as the amount
// has ("$0.10", "$5.00", "$0.000125").
func plainUSD(micros int64) string {
	s := strings.TrimRight(apierror.USD(micros), "0")
	if i := strings.IndexByte(s, '.'); len(s)-i-1 < 2 {
		s += strings.Repeat("0", 2-(len(s)-i-1))
	}
	return s
}

// prettyJSON indents raw JSON for reading (raw as it is when it is not JSON), with every
// character that does not show itself (bidirectional overrides, zero-width and other format
// characters, C1 controls, spaces other than ' ') written as its \u escape: the arguments
// are an API key holder's text, and an approver must see exactly what will run, not text
// reordered or hidden by such characters. The escaped JSON is the same JSON.
func prettyJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return plaintext.Visible(string(raw), true)
	}
	return plaintext.Visible(buf.String(), true)
}
