package realclients_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
)

// TestCodexFittedToItsCredit drives the pinned Codex CLI on its custom Responses provider
// (connect.Codex's settings) on an account granted $1 (1,000,000 micro-units) on
// service-flint, whose whole output bound with Codex's web search tool held about $1.64 a
// turn (docs/billing.md): Codex sends no max_output_tokens and cannot be told to, so the
// gateway fits the bound to the credit. One `codex exec` turn completes; each answered
// Responses request carries x-tollgate-fitted-output-bound, and its usage record keeps the
// same bound in fitted_output_tokens (> 0); every record holds the usage the answer reported,
// billed at its price with nothing waived (checkSessionBilled); and the account's balance
// never went below zero (no ledger entry leaves it negative). Before f231f67 the reservation
// at the whole bound was refused with 402 on every try and Codex failed the turn.
func TestCodexFittedToItsCredit(t *testing.T) {
	c := findClients(t)
	fx := startGateway(t)
	tenant := fx.gw.NewTenant(t, "fitted-codex", 0, 1_000_000)
	rec := newRecorder(t, fx.gw.URL, tenant.Key)
	sb := codexSandbox(t, c, fixture{gw: fx.gw, key: tenant.Key}, rec, false, false)
	codexTurn(t, run(t, rec, sb, append(c.codex(), "exec", "--json", "--strict-config", "--skip-git-repo-check", "Say hi")...))

	bounds := map[string]int64{}
	for _, ex := range rec.snapshot() {
		if ex.Path() != "/v1/responses" || ex.Method != http.MethodPost {
			continue
		}
		if ex.Status != http.StatusOK {
			t.Errorf("POST /v1/responses answered %d: %s", ex.Status, shorten(ex.ResponseBody, 400))
			continue
		}
		fitted, err := strconv.ParseInt(ex.ResponseHeader.Get("X-Tollgate-Fitted-Output-Bound"), 10, 64)
		if err != nil || fitted <= 0 {
			t.Errorf("request %s: x-tollgate-fitted-output-bound %q, want a fitted bound", ex.ResponseHeader.Get("X-Request-Id"), ex.ResponseHeader.Get("X-Tollgate-Fitted-Output-Bound"))
		}
		bounds[ex.ResponseHeader.Get("X-Request-Id")] = fitted
	}
	if len(bounds) == 0 {
		t.Fatal("Codex sent no Responses request the gateway answered")
	}
	checkSessionBilled(t, fx, rec, tenant.Account.ID, "/v1/responses")
	for _, u := range usageRecords(t, fx.gw, tenant.Account.ID, len(bounds)) {
		if want, ok := bounds[u.RequestID]; ok && (u.FittedOutputTokens <= 0 || u.FittedOutputTokens != want || u.OutputTokens > u.FittedOutputTokens) {
			t.Errorf("request %s: fitted_output_tokens %d (the answer said %d), output %d", u.RequestID, u.FittedOutputTokens, want, u.OutputTokens)
		}
	}
	var lowest int64
	if err := fx.gw.Store.Pool().QueryRow(context.Background(),
		`SELECT min(balance_after_micros) FROM credit_ledger WHERE account_id = $1`, tenant.Account.ID).Scan(&lowest); err != nil {
		t.Fatal(err)
	}
	if lowest < 0 {
		t.Errorf("the account's balance went down to %d micro-units", lowest)
	}
}
