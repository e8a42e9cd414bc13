package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/plaintext"
)

// The -json output of the admin commands that list or show: one JSON array (or, for credit
// show and key list, one object) on stdout, for scripts. Field names are snake_case and stable, the OpenAPI
// document's where it has the same thing (balance_micros and balance_usd of CreditBalance,
// cap_micros, period and spent_micros of KeyCreditCap, expires_at and models of KeyAllowance,
// slot of AgentSlot, a model's id), the usage statement's for a usage record's tokens and cost;
// a time is RFC 3339 in UTC, and a thing that is not there is null. A slot's session is the id
// of its live session (AgentSlot's is the session itself), and session_state that session's
// state.

// jsonFlag adds -json to the flag set of a command that lists or shows.
func jsonFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("json", false, "print one JSON document (snake_case fields) instead of the table")
}

// writeJSON prints v as indented JSON on stdout, with every rune that does not show itself (a
// terminal's escape, a bidirectional override in a tenant's ticket title or an agent's
// arguments) written as its \u escape, as the tables write them: the same JSON, safe to look at.
func (a *admin) writeJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(a.out, plaintext.Visible(string(b), true))
	return err
}

// utc is t in UTC, for JSON.
func utc(t time.Time) time.Time { return t.UTC() }

// utcOrNil is *t in UTC, or nil.
func utcOrNil(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// balanceUSD is micros in US dollars as a JSON number, as CreditBalance's balance_usd is (GET
// /v1/credits): the same field of the same thing has the same type in every document. The
// tables keep their "$9.982170" for people.
func balanceUSD(micros int64) float64 { return float64(micros) / 1e6 }

// idOrNull is id as a string, nil for uuid.Nil (none): a usage record's key or agent session.
func idOrNull(id uuid.UUID) *string {
	if id == uuid.Nil {
		return nil
	}
	s := id.String()
	return &s
}

// nilIfEmpty is s, or nil when it is empty.
func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

type accountJSON struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	Plan          string    `json:"plan"`
	BalanceMicros int64     `json:"balance_micros"`
	BalanceUSD    float64   `json:"balance_usd"`
	CreatedAt     time.Time `json:"created_at"`
}

type keyCapJSON struct {
	CapMicros   int64  `json:"cap_micros"`
	Period      string `json:"period"`
	SpentMicros int64  `json:"spent_micros"`
}

type keyJSON struct {
	ID         string      `json:"id"`
	Name       string      `json:"name"`
	Prefix     string      `json:"prefix"`
	LastFour   string      `json:"last_four"`
	Status     string      `json:"status"`
	RPMLimit   int         `json:"rpm_limit"`
	ExpiresAt  *time.Time  `json:"expires_at"`
	CreditCap  *keyCapJSON `json:"credit_cap"`
	Models     []string    `json:"models"`
	CreatedBy  string      `json:"created_by"`
	CreatedAt  time.Time   `json:"created_at"`
	LastUsedAt *time.Time  `json:"last_used_at"`
}

// keyListJSON is key list's -json: the account's keys and the table's footer, the keys that
// count against the plan's max_keys (those not revoked) and the quota (null: the plan has none).
type keyListJSON struct {
	AccountID string    `json:"account_id"`
	Account   string    `json:"account"`
	Plan      string    `json:"plan"`
	KeysHeld  int       `json:"keys_held"`
	MaxKeys   *int      `json:"max_keys"`
	Keys      []keyJSON `json:"keys"`
}

type ledgerEntryJSON struct {
	ID                 int64     `json:"id"`
	CreatedAt          time.Time `json:"created_at"`
	Reason             string    `json:"reason"`
	AmountMicros       int64     `json:"amount_micros"`
	BalanceAfterMicros int64     `json:"balance_after_micros"`
	IdempotencyKey     string    `json:"idempotency_key"`
	Note               string    `json:"note"`
}

type creditJSON struct {
	AccountID     string            `json:"account_id"`
	Account       string            `json:"account"`
	BalanceMicros int64             `json:"balance_micros"`
	BalanceUSD    float64           `json:"balance_usd"`
	Entries       []ledgerEntryJSON `json:"entries"`
}

type usageJSON struct {
	FinishedAt         time.Time        `json:"finished_at"`
	RequestID          string           `json:"request_id"`
	Model              string           `json:"model"`
	Route              string           `json:"route"`
	APIKeyID           *string          `json:"api_key_id"`
	AgentSessionID     *string          `json:"agent_session_id"`
	Provider           string           `json:"provider"`
	UpstreamModel      string           `json:"upstream_model"`
	InputTokens        int64            `json:"input_tokens"`
	CacheReadTokens    int64            `json:"cache_read_tokens"`
	CacheWrite5mTokens int64            `json:"cache_write_5m_tokens"`
	CacheWrite1hTokens int64            `json:"cache_write_1h_tokens"`
	OutputTokens       int64            `json:"output_tokens"`
	HostedToolCalls    map[string]int64 `json:"hosted_tool_calls"`
	HostedToolMicros   int64            `json:"hosted_tool_micros"`
	CostMicros         int64            `json:"cost_micros"`
	Status             string           `json:"status"`
	OnCredit           bool             `json:"on_credit"`
	TraceID            *string          `json:"trace_id"`
}

type modelGrantJSON struct {
	ID        string    `json:"id"`
	Family    *string   `json:"family"`
	GrantedAt time.Time `json:"granted_at"`
}

type memberJSON struct {
	Email        string     `json:"email"`
	Role         string     `json:"role"`
	AddedAt      time.Time  `json:"added_at"`
	LastSignInAt *time.Time `json:"last_sign_in_at"`
}

type datasetLoadJSON struct {
	Rows     int64     `json:"rows"`
	LoadedAt time.Time `json:"loaded_at"`
}

type datasetJSON struct {
	Name      string           `json:"name"`
	Format    string           `json:"format"`
	SizeBytes int64            `json:"size_bytes"`
	UpdatedAt time.Time        `json:"updated_at"`
	Loaded    *datasetLoadJSON `json:"loaded"`
}

type slotJSON struct {
	AccountID    string    `json:"account_id"`
	Account      string    `json:"account"`
	Slot         string    `json:"slot"`
	Session      *string   `json:"session"`
	SessionState *string   `json:"session_state"`
	AssignedAt   time.Time `json:"assigned_at"`
}

type ticketJSON struct {
	ID        string     `json:"id"`
	AccountID string     `json:"account_id"`
	Account   string     `json:"account"`
	State     string     `json:"state"`
	OpenedBy  string     `json:"opened_by"`
	SessionID *string    `json:"session_id"`
	CreatedAt time.Time  `json:"created_at"`
	ClosedAt  *time.Time `json:"closed_at"`
	Title     string     `json:"title"`
}

type approvalJSON struct {
	ID            string          `json:"id"`
	AccountID     string          `json:"account_id"`
	Account       string          `json:"account"`
	State         string          `json:"state"`
	Action        string          `json:"action"`
	Arguments     json.RawMessage `json:"arguments"`
	ArgumentsHash string          `json:"arguments_hash"`
	KeyID         *string         `json:"key_id"`
	RequestedBy   *string         `json:"requested_by"`
	CreatedAt     time.Time       `json:"created_at"`
	ExpiresAt     time.Time       `json:"expires_at"`
	ResolvedAt    *time.Time      `json:"resolved_at"`
	ResolvedBy    *string         `json:"resolved_by"`
	ActionStatus  *string         `json:"action_status"`
	SessionID     *string         `json:"session_id"`
	MessageID     *string         `json:"message_id"`
	Failure       *string         `json:"failure"`
}

type auditJSON struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Before any       `json:"before"`
	After  any       `json:"after"`
}
