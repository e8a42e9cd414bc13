package web

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/plaintext"
	"github.com/tollgate/tollgate/impl/usageview"
	"github.com/tollgate/tollgate/impl/web/audit"
	"github.com/tollgate/tollgate/impl/web/members"
)

// The Audit log page names what a person reads: the actor by name and e-mail, keys by their
// names and prefix…last four (not their ids), the browser of a sign-in as "Chrome on Linux"
// (the User-Agent header in its title), amounts to the cent; the record's codes and ids stay
// in the titles, for whoever needs them.

// auditRow is one entry of the audit log as the page shows it.
type auditRow struct {
	At time.Time
	// Actor names who did it; ActorTitle is what was recorded, when that says more; ActorURL
	// is the page of an agent's session, when the account has it.
	Actor, ActorTitle, ActorURL string
	// Action says what was done in words; Code is the recorded action ("key.revoked").
	Action, Code string
	// Target names what it was done to; TargetTitle is the recorded target (with its id).
	Target, TargetTitle string
	Before, After       auditState
}

// auditState is the state before or after the change: fields when it is a JSON object, else
// Raw ("" with no fields: none).
type auditState struct {
	Fields []auditField
	Raw    string
}

// auditField is one field of a state: Title holds what Value summarises (the exact amount,
// the whole User-Agent header), when it does.
type auditField struct {
	Name, Value, Title string
}

// auditActions says each recorded action in words.
var auditActions = map[string]string{
	audit.ActionSignIn:             "Signed in",
	audit.ActionKeyCreated:         "Created a key",
	audit.ActionKeyRevoked:         "Revoked a key",
	audit.ActionKeyChanged:         "Changed a key's status",
	audit.ActionLimitChanged:       "Changed a key's limits",
	audit.ActionApproval:           "Decided an agent action",
	audit.ActionDatasetUploaded:    "Stored a dataset",
	actionAgentStarted:             "Started an agent session",
	actionAgentStopped:             "Stopped an agent session",
	audit.ActionDatasetDeleted:     "Deleted a dataset",
	"member.added":                 "Added a member",
	"member.removed":               "Removed a member",
	audit.ActionModelGranted:       "Granted a model",
	audit.ActionModelRevoked:       "Withdrew a model",
	audit.ActionCreditGranted:      "Added credit",
	audit.ActionSlotAssigned:       "Gave an agent slot",
	audit.ActionSlotRemoved:        "Took an agent slot away",
	audit.ActionTicketOpened:       "Opened a ticket",
	audit.ActionTicketClosed:       "Closed a ticket",
	audit.ActionAgentSessionsEnded: "Ended agent sessions",
	audit.ActionUpstreamKeySet:     "Set the account's own provider key",
	audit.ActionUpstreamKeyRemoved: "Removed the account's own provider key",
}

// auditRows turns the entries into rows, naming users by the members service and keys by the
// account's keys.
func (a *App) auditRows(ctx context.Context, acct uuid.UUID, entries []audit.Entry) ([]auditRow, error) {
	keys, err := a.store.ListAPIKeys(ctx, acct)
	if err != nil {
		return nil, err
	}
	keyLabels := map[string]string{}
	for _, k := range keys {
		keyLabels[k.ID.String()] = usageview.KeyLabelLastFour(k.Name, k.DisplayPrefix, k.DisplaySuffix)
	}
	users := map[uuid.UUID]*members.User{}
	agents := map[string]agentActor{}
	rows := make([]auditRow, 0, len(entries))
	for _, e := range entries {
		row := auditRow{At: e.At, Actor: e.Actor, Code: e.Action, Action: auditActions[e.Action],
			Target: e.Target, Before: stateOf(e.Before), After: stateOf(e.After)}
		if row.Action == "" {
			row.Action = e.Action
		}
		if e.ActorUserID != uuid.Nil {
			u, seen := users[e.ActorUserID]
			if !seen {
				if got, err := a.members.User(ctx, e.ActorUserID); err == nil {
					u = &got
				}
				users[e.ActorUserID] = u
			}
			if u != nil {
				row.Actor = personName(u)
				if row.Actor != e.Actor {
					row.ActorTitle = e.Actor
				}
			}
		}
		if id, ok := strings.CutPrefix(e.Actor, agentActorPrefix); ok && e.ActorUserID == uuid.Nil {
			who, seen := agents[id]
			if !seen {
				who = a.agentActorOf(ctx, acct, id)
				agents[id] = who
			}
			row.Actor, row.ActorTitle, row.ActorURL = who.name, e.Actor, who.url
		}
		row.Target, row.TargetTitle = auditTarget(e, keyLabels)
		rows = append(rows, row)
	}
	return rows, nil
}

// agentActorPrefix starts the actor of an entry an agent recorded, before its session's id
// ("agent:<session>", as the tickets it opens name it).
const agentActorPrefix = "agent:"

// agentActor is an agent as the Audit log page names it.
type agentActor struct {
	name, url string
}

// agentActorOf names the agent of session id as a person reads it: "agent in slot main
// (session 1a2b3c4d)", linking to the session's page. A session the account does not have (or
// no agent service) is named by its short id alone, with no link.
func (a *App) agentActorOf(ctx context.Context, acct uuid.UUID, id string) agentActor {
	short := id
	if len(short) > 8 {
		short = short[:8]
	}
	if a.agents != nil {
		if s, err := a.findSession(ctx, auth.Principal{AccountID: acct}, id); err == nil {
			return agentActor{name: "agent in slot " + s.Slot + " (session " + short + ")", url: "/agents/" + s.ID}
		}
	}
	return agentActor{name: "agent (session " + short + ")"}
}

// personName is a user as a person reads them: "Alice (alice@example.com)", or the one of the
// two there is.
func personName(u *members.User) string {
	switch {
	case u.Name != "" && u.Email != "" && u.Name != u.Email:
		return u.Name + " (" + u.Email + ")"
	case u.Email != "":
		return u.Email
	case u.Name != "":
		return u.Name
	}
	return "user " + u.ID.String()
}

// auditTarget names an entry's target: a key by its label ("key ci (tgk_ab12…wxyz)"), an
// approval by its action; the recorded target goes to the title when the name differs.
func auditTarget(e audit.Entry, keyLabels map[string]string) (string, string) {
	kind, rest, _ := strings.Cut(e.Target, " ")
	switch kind {
	case "key":
		id, note, _ := strings.Cut(rest, " ")
		if label, ok := keyLabels[id]; ok && label != "" {
			name := "key " + label
			if note != "" {
				name += " " + note
			}
			return name, e.Target
		}
	case "approval":
		var st struct {
			Action string `json:"action"`
		}
		if raw, ok := e.After.(json.RawMessage); ok && json.Unmarshal(raw, &st) == nil && st.Action != "" {
			return "approval of agent_" + st.Action, e.Target
		}
	}
	return e.Target, ""
}

// stateOf turns a recorded state into fields (a JSON object) or its raw text.
func stateOf(v any) auditState {
	raw, ok := v.(json.RawMessage)
	if !ok || len(raw) == 0 || string(raw) == "null" {
		return auditState{}
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return auditState{Raw: string(raw)}
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	st := auditState{}
	for _, k := range names {
		st.Fields = append(st.Fields, auditFieldOf(k, m[k]))
	}
	return st
}

// auditFieldOf writes one field of a state for people.
func auditFieldOf(name string, v any) auditField {
	f := auditField{Name: strings.ReplaceAll(name, "_", " ")}
	switch {
	case name == "user_agent":
		ua := fmt.Sprint(v)
		return auditField{Name: "browser", Value: browserSummary(ua), Title: ua}
	case strings.HasSuffix(name, "_micros"):
		if n, ok := v.(json.Number); ok {
			if micros, err := n.Int64(); err == nil {
				f.Name = strings.TrimSuffix(f.Name, " micros")
				f.Value = moneyText(micros)
				if moneyRounded(micros) {
					f.Title = moneyExact(micros)
				}
				return f
			}
		}
	}
	switch t := v.(type) {
	case nil:
		f.Value = "—"
	case string:
		f.Value = plaintext.Visible(t, true)
	case []any:
		parts := make([]string, len(t))
		for i, p := range t {
			parts[i] = fmt.Sprint(p)
		}
		f.Value = plaintext.Visible(strings.Join(parts, ", "), true)
	case map[string]any:
		b, _ := json.Marshal(t)
		f.Value = plaintext.Visible(string(b), true)
	default:
		f.Value = fmt.Sprint(t)
	}
	return f
}
