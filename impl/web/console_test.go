package web_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/connect"
)

// TestKeyCreatedShowsSettings: the page that shows a new key also shows, for Claude Code,
// Codex, opencode, the OpenAI and Anthropic SDKs and MCP clients, the settings of package
// connect filled with the gateway's public URL and this key, each with a copy button (hidden
// until copy.js shows it), and for a key limited to chat models it says why Claude Code and
// the Anthropic SDKs have none. The old page showed the key and a line about bearer tokens.
func TestKeyCreatedShowsSettings(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	b.get("/keys/new")
	p := b.post("/keys", url.Values{"name": {"laptop"}})
	if p.Status != http.StatusCreated {
		t.Fatalf("create: %d %.300s", p.Status, p.Body)
	}
	plain := plainKeyRe.FindStringSubmatch(p.Body)[1]
	tg := connect.Target{BaseURL: e.URL, Key: plain, ChatModel: "service-flint", MessagesModel: "service-sonnet",
		Chat: connect.Facts(e.Config, "service-flint")}
	for _, s := range connect.All(tg) {
		if !strings.Contains(p.Body, `<details class="setup" id="setup-`+s.ID+`"`) {
			t.Errorf("no section for %s", s.Client)
		}
		for i, bl := range s.Blocks {
			if !strings.Contains(p.Body, html.EscapeString(bl.Text)) {
				t.Errorf("the page lacks %s's %s:\n%s", s.Client, bl.Where, bl.Text)
			}
			id := "setup-" + s.ID + "-" + string(rune('0'+i))
			if !strings.Contains(p.Body, `data-copy="`+id+`"`) {
				t.Errorf("%s's %s has no copy button", s.Client, bl.Where)
			}
		}
	}
	for _, want := range []string{`data-copy="key" data-status="key-copy-status" hidden>Copy the key</button>`, `src="/static/copy.js"`,
		"ANTHROPIC_BASE_URL=" + e.URL + "\n", `base_url = &#34;` + e.URL + `/v1&#34;`} {
		if !strings.Contains(p.Body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if js := b.get("/static/copy.js"); js.Status != http.StatusOK || !strings.Contains(js.Body, "navigator.clipboard") || !strings.Contains(js.Body, "Ctrl+C") {
		t.Errorf("copy.js: %d", js.Status)
	}

	// A key limited to service-flint: no Messages model for Claude Code or the Anthropic SDKs.
	b.get("/keys/new")
	p = b.post("/keys", url.Values{"name": {"chat-only"}, "models": {"service-flint"}})
	if p.Status != http.StatusCreated {
		t.Fatalf("create: %d %.300s", p.Status, p.Body)
	}
	claude := sectionOf(p.Body, "claude-code")
	if !strings.Contains(claude, "This key may use no model served on Anthropic Messages") || strings.Contains(claude, "ANTHROPIC_BASE_URL") {
		t.Errorf("Claude Code's section for a chat-only key:\n%s", claude)
	}
	if codex := sectionOf(p.Body, "codex"); !strings.Contains(codex, `model = &#34;service-flint&#34;`) {
		t.Errorf("Codex's section for a chat-only key:\n%s", codex)
	}
}

// sectionOf is the page's section of the client id.
func sectionOf(body, id string) string {
	_, s, _ := strings.Cut(body, `id="setup-`+id+`"`)
	s, _, _ = strings.Cut(s, "</details>")
	return s
}

// TestHomePageSummary: the home page shows the balance, the spend this month, the keys in use,
// the approvals waiting and the agents running, each a link to its page. The old home page
// showed the balance and the plan.
func TestHomePageSummary(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	acme := e.account(t, "acme", aliceEmail, "owner")
	key, err := e.Accounts.CreateKey(ctx, acme.ID, "ci", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Accounts.CreateKey(ctx, acme.ID, "spare", 0); err != nil {
		t.Fatal(err)
	}
	e.pendingApproval(t, acme.ID, key.Key.ID, "spawn", `{"purpose":"one"}`)
	e.pendingApproval(t, acme.ID, key.Key.ID, "spawn", `{"purpose":"two"}`)
	e.agentSession(t, acme.ID, "main")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	p := b.get("/")
	if p.Status != http.StatusOK {
		t.Fatalf("home: %d %.300s", p.Status, p.Body)
	}
	body := html.UnescapeString(p.Body)
	for _, want := range []string{
		`href="/usage" id="home-balance"><span class="card-title">Balance</span> <span class="card-value"><span class="money">$10.00</span>`,
		`href="/usage" id="home-spend"><span class="card-title">Spent this month</span> <span class="card-value"><span class="money">$0.00</span>`,
		`href="/keys" id="home-keys"><span class="card-title">Keys in use</span> <span class="card-value">2 active</span>`,
		`href="/approvals" id="home-approvals"><span class="card-title">Pending approvals</span> <span class="card-value">2</span>`,
		`href="/agents" id="home-agents"><span class="card-title">Running agents</span> <span class="card-value">1</span>`,
		"of 1 slot<",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the home page lacks %q:\n%.3000s", want, body)
		}
	}
}

// TestHomePageOffersAFreeSlot: with an agent slot free, the home page offers to start an agent
// next to creating a key, saying how many slots are free; with every slot running a session it
// does not. Before, a key was the home page's only next step (newcomer walk s11h3: make run's
// account has a free slot, and the way to a working agent was the Agents link, unsaid).
func TestHomePageOffersAFreeSlot(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	e.agentSession(t, acme.ID, "main")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	if p := b.get("/"); p.Status != http.StatusOK || strings.Contains(p.Body, `id="home-start-agent"`) {
		t.Fatalf("every slot busy: the home page (%d) offers to start an agent:\n%.3000s", p.Status, p.Body)
	}
	if _, err := db.New(e.Store.Pool()).InsertAgentSlot(context.Background(), db.InsertAgentSlotParams{AccountID: acme.ID, Name: "spare"}); err != nil {
		t.Fatal(err)
	}
	const want = `<a class="button" href="/agents" id="home-start-agent">Start an agent</a> <span class="help">in a free slot (1 of 2 free) and follow it live`
	if p := b.get("/"); !strings.Contains(html.UnescapeString(p.Body), want) {
		t.Errorf("a slot free: the home page lacks %q:\n%.3000s", want, p.Body)
	}
}

// TestDatasetNamesFromFiles: an upload without a name takes one from the file's name by the
// documented rule ("Q3 sales.csv" is q3_sales; it used to be refused); a typed name that is not
// a dataset name is still refused, with one that is offered; and an owner's upload under an
// existing name replaces it only when the form says so (its "replace" box): otherwise 409, and
// the dataset is as it was.
func TestDatasetNamesFromFiles(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	if p := alice.upload(nil, "Q3 sales.csv", []byte(salesCSV)); p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "uploaded=q3_sales") {
		t.Fatalf("upload of Q3 sales.csv: %d %s %.600s", p.Status, p.Location, p.Body)
	}
	if p := alice.get("/datasets"); !strings.Contains(p.Body, `<th scope="row">q3_sales</th>`) {
		t.Fatalf("q3_sales is not listed: %.1500s", p.Body)
	}
	if p := alice.upload(map[string]string{"name": "Q3 sales"}, "x.csv", []byte(salesCSV)); p.Status != http.StatusUnprocessableEntity ||
		!strings.Contains(html.UnescapeString(p.Body), `The name "Q3 sales" is not a dataset name`) || !strings.Contains(p.Body, "(such as q3_sales)") {
		t.Errorf("a typed name that is not a dataset name: %d %.800s", p.Status, p.Body)
	}
	bigger := salesCSV + "east,5\n"
	p := alice.upload(nil, "Q3 sales.csv", []byte(bigger))
	if p.Status != http.StatusConflict || !strings.Contains(p.Body, "A dataset named q3_sales exists (CSV, 30 B, stored ") ||
		!strings.Contains(p.Body, `id="dataset-replace" name="replace" value="yes"`) {
		t.Fatalf("an owner's upload over q3_sales without replace: %d %.1500s", p.Status, p.Body)
	}
	if p := alice.get("/datasets"); !strings.Contains(p.Body, "<td>30 B</td>") {
		t.Fatalf("the unconfirmed upload replaced the dataset: %.1500s", p.Body)
	}
	if p := alice.upload(map[string]string{"replace": "yes"}, "Q3 sales.csv", []byte(bigger)); p.Status != http.StatusSeeOther {
		t.Fatalf("the confirmed replacement: %d %.600s", p.Status, p.Body)
	}
	if p := alice.get("/datasets"); !strings.Contains(p.Body, "<td>37 B</td>") {
		t.Fatalf("the confirmed upload did not replace the dataset: %.1500s", p.Body)
	}
}

// TestNamesNotIDs: the Sessions page names the browser ("Chrome on Linux", the User-Agent in
// its title); the Audit log names the actor by name and e-mail, a key by its name and
// prefix…last four instead of its id, the sign-in's browser likewise, and amounts to the cent.
// The old pages showed raw User-Agent headers and "key <uuid>".
func TestNamesNotIDs(t *testing.T) {
	const chrome = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	b.userAgent = chrome
	b.signIn(e, aliceEmail, alicePass)
	b.get("/keys/new")
	if p := b.post("/keys", url.Values{"name": {"laptop"}, "credit_cap": {"2.505"}}); p.Status != http.StatusCreated {
		t.Fatalf("create: %d %.300s", p.Status, p.Body)
	}
	keys, _ := e.Store.ListAPIKeys(context.Background(), acme.ID)
	k := keys[0]

	sessions := b.get("/sessions").Body
	if !strings.Contains(sessions, `<span title="`+chrome+`">Chrome on Linux</span> (this session)`) {
		t.Errorf("the Sessions page does not name the browser: %.1500s", sessions)
	}
	auditPage := html.UnescapeString(b.get("/audit").Body)
	for _, want := range []string{
		`<td title="` + aliceEmail + `">Alice (` + aliceEmail + `)</td>`,
		`<td title="key ` + k.ID.String() + `">key laptop (` + k.DisplayPrefix + "…" + k.DisplaySuffix + `)</td>`,
		`<li>browser: <span title="` + chrome + `">Chrome on Linux</span></li>`,
		`<li>credit cap: <span title="$2.505000">$2.51</span></li>`,
		`Created a key <code class="help">key.created</code>`,
	} {
		if !strings.Contains(auditPage, want) {
			t.Errorf("the audit log lacks %q", want)
		}
	}
	if regexp.MustCompile(`>key [0-9a-f]{8}-`).MatchString(auditPage) {
		t.Errorf("the audit log shows a key's id where its name goes: %.3000s", auditPage)
	}
}

// TestKeyCreatedWarnsOfASmallCap (newcomer trial: a key made with a $0.25 daily cap got Claude
// Code's settings, and every turn was refused with a 402): the key-created page says, beside
// Claude Code's settings, that the cap is below what a turn holds and what to do; a key
// without a cap is told nothing of the kind.
func TestKeyCreatedWarnsOfASmallCap(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	b.get("/keys/new")
	p := b.post("/keys", url.Values{"name": {"small"}, "credit_cap": {"0.25"}, "cap_period": {"daily"}})
	if p.Status != http.StatusCreated {
		t.Fatalf("create: %d %.300s", p.Status, p.Body)
	}
	claude := html.UnescapeString(sectionOf(p.Body, "claude-code"))
	for _, want := range []string{`<p class="warning" role="note">Warning: this key's credit cap ($0.25)`, "about $0.65",
		"Raise the key's credit cap to $0.65 or more", "export CLAUDE_CODE_MAX_OUTPUT_TOKENS=5000", "CLAUDE_CODE_AUTO_COMPACT_WINDOW=200000"} {
		if !strings.Contains(claude, want) {
			t.Errorf("Claude Code's section for a $0.25 key lacks %q:\n%s", want, claude)
		}
	}
	b.get("/keys/new")
	p = b.post("/keys", url.Values{"name": {"open"}})
	if claude := sectionOf(p.Body, "claude-code"); strings.Contains(claude, "Warning") {
		t.Errorf("Claude Code's section for a key without a cap warns:\n%s", claude)
	}
}

// TestKeyLimitsWarnOfASmallCap (h3): a key's credit cap lowered on the Keys page to $0.25 a day
// was saved with "Saved" alone, though every Claude Code turn with the key is then refused with
// a 402, which the key-created page warns of. Now the page the change leads to gives the same
// warning (connect.ClaudeCodeCapWarning), naming the key; a cap that holds a turn, and a key
// with no Messages model, get none, and another account's key named in the address is not
// spoken of.
func TestKeyLimitsWarnOfASmallCap(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	ctx := context.Background()
	tenDollars := int64(10_000_000)
	big, err := e.Accounts.CreateKeyWith(ctx, acme.ID, accounts.KeyOptions{Name: "big", RPM: -1, CreditCapMicros: &tenDollars,
		CapPeriod: store.CapPeriodDaily, CreatedBy: aliceEmail})
	if err != nil {
		t.Fatal(err)
	}
	chat, err := e.Accounts.CreateKeyWith(ctx, acme.ID, accounts.KeyOptions{Name: "chat-only", RPM: -1, CreditCapMicros: &tenDollars,
		CapPeriod: store.CapPeriodDaily, Models: []string{"service-flint"}, CreatedBy: aliceEmail})
	if err != nil {
		t.Fatal(err)
	}
	other := e.account(t, "globex", "", "")
	quarter := int64(250_000)
	theirs, err := e.Accounts.CreateKeyWith(ctx, other.ID, accounts.KeyOptions{Name: "theirs", RPM: -1, CreditCapMicros: &quarter,
		CapPeriod: store.CapPeriodDaily})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	// setCap changes the key's cap on the Keys page and returns the page the change leads to.
	setCap := func(id uuid.UUID, dollars string) string {
		t.Helper()
		p := b.post("/keys/"+id.String()+"/limits", url.Values{"rpm": {"60"}, "credit_cap": {dollars}, "cap_period": {"daily"}})
		if p.Status != http.StatusSeeOther {
			t.Fatalf("limits: %d %.300s", p.Status, p.Body)
		}
		keys := b.get(p.Location)
		if keys.Status != http.StatusOK || !strings.Contains(keys.Body, "Saved: the key") {
			t.Fatalf("after the change, %s: %d %.300s", p.Location, keys.Status, keys.Body)
		}
		return html.UnescapeString(keys.Body)
	}

	page := setCap(big.Key.ID, "0.25")
	for _, want := range []string{`<p class="warning" role="note">Warning for key “big” (` + big.Key.DisplayPrefix,
		"this key's credit cap ($0.25) is below what one Claude Code turn on service-sonnet holds", "about $0.65",
		"Raise the key's credit cap to $0.65 or more", "export CLAUDE_CODE_MAX_OUTPUT_TOKENS=5000"} {
		if !strings.Contains(page, want) {
			t.Errorf("the Keys page after lowering the cap to $0.25 lacks %q:\n%.3000s", want, page)
		}
	}
	if page := setCap(big.Key.ID, "5"); strings.Contains(page, `class="warning"`) {
		t.Errorf("a $5 cap, which holds a turn, is warned of:\n%.2000s", page)
	}
	if page := setCap(chat.Key.ID, "0.25"); strings.Contains(page, `class="warning"`) {
		t.Errorf("a key with no Messages model is warned of Claude Code:\n%.2000s", page)
	}
	if page := b.get("/keys?done=limits&key=" + theirs.Key.ID.String()).Body; strings.Contains(page, "theirs") || strings.Contains(page, `class="warning"`) {
		t.Errorf("the Keys page speaks of another account's key:\n%.2000s", page)
	}
}
