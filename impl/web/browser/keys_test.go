package browser_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/impl/apikey"
	"github.com/tollgate/tollgate/impl/config"
)

// keyID is the id of the account's key named name.
func (s *site) keyID(t *testing.T, name string) string {
	t.Helper()
	keys, err := s.GW.Store.ListAPIKeys(context.Background(), s.Account.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Name == name {
			return k.ID.String()
		}
	}
	t.Fatalf("the account has no key named %q", name)
	return ""
}

// createKey creates a key named name on the Keys page, starting from any signed-in page, and
// returns its full value as the page shows it (once). fill sets more fields of the form.
func (s *site) createKey(p *tour, name string, fill func()) string {
	p.t.Helper()
	p.at(p.Follow("Keys"), http.StatusOK, s.URL+"/keys")
	p.shot("keys")
	p.at(p.Follow("Create a key"), http.StatusOK, s.URL+"/keys/new")
	p.Fill("Name (optional)", name)
	if fill != nil {
		fill()
	}
	p.shot("key-form")
	p.at(p.Submit("Create key"), http.StatusCreated, s.URL+"/keys")
	p.shot("key-created")
	key := p.value("#key")
	if _, err := apikey.Parse(key); err != nil {
		p.t.Fatalf("the page shows %q as the new key: %v", key, err)
	}
	return key
}

// TestKeyShownOnceUsedAndRevoked creates a key on the Keys page: its full value is shown in
// the page that created it and never again (not on the Keys page, which shows its prefix and
// last four characters, nor when the browser goes back); it works on /v1/models; its row's
// Revoke asks for a confirmation that names it (and Cancel leaves it working); revoked from
// the confirmation, it is refused (401) within a second.
func TestKeyShownOnceUsedAndRevoked(t *testing.T) {
	s := start(t)
	p := newTour(t)
	s.signIn(p)
	key := s.createKey(p, "ci", nil)
	prefix, lastFour := key[:apikey.DisplayLen], key[len(key)-4:]

	p.at(p.Follow("Back to the keys"), http.StatusOK, s.URL+"/keys")
	p.shot("keys-after-create")
	if strings.Contains(p.html(), key) {
		t.Fatal("the Keys page shows the full key again")
	}
	row := p.Text("tbody tr")
	if !strings.Contains(row, prefix+"…") {
		t.Errorf("the key's row does not show its prefix %s…: %q", prefix, row)
	}
	if !strings.Contains(row, "…"+lastFour) {
		t.Errorf("the key's row does not show its last four characters as %s…%s (impl/web/templates/keys.html): %q",
			prefix, lastFour, row)
	}

	// Back in the browser's history: no cache shows the key again. (Chromium replaced the
	// entry of the page that showed it, at /keys, with the Keys page at the same address, so
	// this is the form.)
	p.Do(chromedp.NavigateBack())
	p.shot("back-to-created")
	if strings.Contains(p.html(), key) {
		t.Error("going back in the browser's history shows the full key again")
	}
	p.at(p.Navigate(s.URL+"/keys"), http.StatusOK, s.URL+"/keys")
	p.shot("keys")

	if status, body := s.api(t, http.MethodGet, "/v1/models", key, ""); status != http.StatusOK {
		t.Fatalf("GET /v1/models with the new key: %d %s", status, body)
	}

	// The row's Revoke asks first, on a page of its own that names the key and what stops
	// working; Cancel leaves the key working.
	keyID := s.keyID(t, "ci")
	p.at(p.Submit("Revoke key ci "+prefix), http.StatusOK, s.URL+"/keys/"+keyID+"/revoke")
	p.shot("revoke-confirm")
	if got, want := p.Text("#confirm-what"), "Revoking key “ci” ("+prefix+"…"+lastFour+") stops every client that uses it, at once"; !strings.Contains(got, want) {
		t.Errorf("the confirmation says %q, want it to say %q", got, want)
	}
	p.at(p.Follow("Cancel"), http.StatusOK, s.URL+"/keys")
	if status, body := s.api(t, http.MethodGet, "/v1/models", key, ""); status != http.StatusOK {
		t.Fatalf("GET /v1/models with the key after cancelling its revocation: %d %s", status, body)
	}
	p.at(p.Submit("Revoke key ci "+prefix), http.StatusOK, s.URL+"/keys/"+keyID+"/revoke")
	p.at(p.Submit("Revoke key “ci”"), http.StatusOK, s.URL+"/keys")
	p.shot("key-revoked")
	if got := p.Text("[role=status]"); !strings.HasPrefix(got, "Revoked") {
		t.Errorf("after revoking, the page says %q", got)
	}
	if row := p.Text("tbody tr"); !strings.Contains(row, "revoked") {
		t.Errorf("the revoked key's row says %q", row)
	}
	// Revocation reaches every gateway process through the database's notification; the
	// specification allows it a second.
	deadline := time.Now().Add(time.Second)
	for {
		status, body := s.api(t, http.MethodGet, "/v1/models", key, "")
		if status == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/models with the revoked key a second after revoking it: %d %s", status, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKeyFormSendsOnce: a second click on "Create key" while the form is on its way is
// cancelled (static/submit-once.js), so the browser shows the answer to the one post the server
// acted on, with the new key's secret, and the account has one key of the name. Without it a
// double click sent the form twice: the server created one key (its claim of the form) and
// answered the second post 409, and the browser showed that answer, having dropped the first,
// which held the secret.
func TestKeyFormSendsOnce(t *testing.T) {
	s := start(t)
	p := newTour(t)
	s.signIn(p)
	p.at(p.Follow("Keys"), http.StatusOK, s.URL+"/keys")
	p.at(p.Follow("Create a key"), http.StatusOK, s.URL+"/keys/new")
	p.Fill("Name (optional)", "twice")
	// Two clicks in one task, before the first submission leaves; a listener added after the
	// page's own notes whether each submission was cancelled.
	cancelled := eval[[]bool](p, `(function () {
		var form = document.querySelector('form[action="/keys"]'), seen = [];
		form.addEventListener("submit", function (ev) { seen.push(ev.defaultPrevented); });
		var button = form.querySelector("button[type=submit]");
		button.click();
		button.click();
		return seen;
	})()`)
	if len(cancelled) != 2 || cancelled[0] || !cancelled[1] {
		t.Errorf("submissions cancelled: %v, want the second one only", cancelled)
	}
	p.WaitVisible("#key")
	p.shot("key-created-after-two-clicks")
	if key := p.value("#key"); !strings.HasPrefix(key, "tgk_") {
		t.Fatalf("the page shows %q as the new key", key)
	}
	keys, err := s.GW.Store.ListAPIKeys(context.Background(), s.Account.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range keys {
		if k.Name == "twice" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the account has %d keys named twice, want 1", n)
	}
}

// TestKeyFormOffersOnlyCallableModels: with sim-anthropic configured account_keys: required
// and no upstream key of the account's for it, service-sonnet (on it alone) is granted but
// cannot be called. In Chromium the new-key form offers service-flint and service-flint-base,
// not service-sonnet, and says beside them why it is left out (the provider, the operator's
// command); the Plan & limits page marks service-sonnet "Not yet" with the same reason and
// the others "Yes". Once the operator has set the account's key, the form offers it: a key
// limited to it is created there, and GET /v1/models with that key lists it.
func TestKeyFormOffersOnlyCallableModels(t *testing.T) {
	s := startWith(t, func(c *config.Config) {
		for i := range c.Providers {
			if c.Providers[i].Name == "sim-anthropic" {
				c.Providers[i].AccountKeys = config.AccountKeysRequired
			}
		}
	})
	p := newTour(t)
	s.signIn(p)
	const reason = "the provider sim-anthropic serves only accounts with an upstream key of their own, and this account has none for it; " +
		"the operator sets one with tollgate admin provider-key set acme sim-anthropic"
	p.at(p.Follow("Keys"), http.StatusOK, s.URL+"/keys")
	p.at(p.Follow("Create a key"), http.StatusOK, s.URL+"/keys/new")
	p.shot("key-form-without-sonnet")
	if labels := p.labels(); slices.Contains(labels, "service-sonnet") || !slices.Contains(labels, "service-flint") || !slices.Contains(labels, "service-flint-base") {
		t.Errorf("the key form's models: %q; want service-flint and service-flint-base, not service-sonnet", labels)
	}
	if got := p.Text("#models-unreachable"); !strings.Contains(got, "service-sonnet: "+reason+".") {
		t.Errorf("the key form says of the model it leaves out: %q", got)
	}
	p.at(p.Follow("Plan & limits"), http.StatusOK, s.URL+"/plan")
	p.shot("plan-sonnet-not-callable")
	rows := eval[[]string](p, `[...document.querySelectorAll("#plan-models tbody tr")].map((r) => [...r.cells].map((c) => c.textContent.trim()).join(" | "))`)
	for _, r := range rows {
		model, _, _ := strings.Cut(r, " | ")
		want := " | Yes"
		if model == "service-sonnet" {
			want = " | Not yet: " + reason + ". Until then its requests are refused."
		}
		if !strings.HasSuffix(r, want) {
			t.Errorf("the plan page's row %q does not end %q", r, want)
		}
	}
	if len(rows) != 3 {
		t.Errorf("the plan page's models: %q", rows)
	}

	s.GW.SetUpstreamKey(t, s.Account.ID, "sim-anthropic", "sk-ant-acme-own-key")
	// The key reaches the gateway's cache through the database's notification.
	deadline := time.Now().Add(10 * time.Second)
	for p.at(p.Navigate(s.URL+"/keys/new"), http.StatusOK, s.URL+"/keys/new"); !slices.Contains(p.labels(), "service-sonnet"); p.at(p.Navigate(s.URL+"/keys/new"), http.StatusOK, s.URL+"/keys/new") {
		if time.Now().After(deadline) {
			t.Fatalf("the key form does not offer service-sonnet once the account's key is set: %q", p.labels())
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.Fill("Name (optional)", "sonnet-only")
	p.Check("service-sonnet", true)
	p.shot("key-form-with-sonnet")
	p.at(p.Submit("Create key"), http.StatusCreated, s.URL+"/keys")
	key := p.value("#key")
	status, body := s.api(t, http.MethodGet, "/v1/models", key, "")
	if status != http.StatusOK || !strings.Contains(string(body), `"service-sonnet"`) || strings.Contains(string(body), `"service-flint"`) {
		t.Errorf("GET /v1/models with the key limited to service-sonnet: %d %s", status, body)
	}
}
