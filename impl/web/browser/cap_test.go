package browser_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/impl/devkit/browsertest"
)

// The credit cap fields of the key form, by their labels.
const (
	capLabel    = "Credit cap in USD (empty: none)"
	periodLabel = "The cap resets"
)

// keyCap is the cap the test sets: a cent, a few of the requests below.
const (
	keyCap       = "0.01"
	keyCapMicros = 10_000
)

// capRequest asks for about 2,000 words with room for 4,000 tokens: at service-flint-base's
// prices its worst case is about 6,000 micro-dollars and its cost some 3,000, so a cent of cap
// answers a few of them and then 402.
const capRequest = `{"model":"service-flint-base","max_tokens":4000,` +
	`"messages":[{"role":"user","content":"Write at length. [[sim words=2000]]"}]}`

// TestKeyCreditCap creates a key with a credit cap of one cent on the Keys page, spends with
// it on /v1/chat/completions (the upstream simulator answering) until the gateway answers
// 402, and checks that the spend the Keys page shows for the key is more than nothing and not
// more than the cap.
func TestKeyCreditCap(t *testing.T) {
	s := start(t)
	p := newTour(t)
	s.signIn(p)
	key := s.createKey(p, "capped", func() {
		requireLabels(t, p, "the per-key credit cap (impl/web/templates/keynew.html, impl/web/keys.go)", capLabel, periodLabel)
		p.Fill(capLabel, keyCap)
		p.Select(periodLabel, "none")
	})
	p.at(p.Follow("Back to the keys"), http.StatusOK, s.URL+"/keys")
	p.shot("keys-capped")
	if got := keyCell(t, p, "capped", "Credit cap"); !strings.Contains(got, "$0.01, no reset") {
		t.Fatalf("the key's row shows the credit cap %q, want $0.01, no reset", got)
	}

	var answered int
	for {
		status, body := s.api(t, http.MethodPost, "/v1/chat/completions", key, capRequest)
		if status == http.StatusPaymentRequired {
			if !strings.Contains(string(body), "credit cap") {
				t.Errorf("the 402 does not say the key's credit cap is reached: %s", body)
			}
			break
		}
		if status != http.StatusOK {
			t.Fatalf("request %d with the capped key: %d %s", answered+1, status, body)
		}
		answered++
		if answered > 20 {
			t.Fatalf("%d requests answered under a cap of %s: no 402", answered, keyCap)
		}
	}
	if answered == 0 {
		t.Fatal("the cap refused the first request: the test's requests are too dear for its cap")
	}

	// The usage of the answered requests is written in the background: wait until it is all
	// in the database (a bound against a hang only), then read the page. The key is the
	// account's only spender, so the page must show what the account's usage records cost.
	var records, cost int64
	for deadline := time.Now().Add(20 * time.Second); records < int64(answered); {
		var err error
		if records, cost, err = s.GW.Store.UsageTotals(context.Background(), s.Account.ID); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d usage records written for %d answered requests", records, answered)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.at(p.Navigate(s.URL+"/keys"), http.StatusOK, s.URL+"/keys")
	spent := usdMicros(t, keyMoney(t, p, "capped", "This period"))
	p.shot("keys-capped-spend")
	t.Logf("%d requests answered, then 402; the Keys page shows %d micro-dollars spent of a %d cap", answered, spent, keyCapMicros)
	if spent != cost {
		t.Errorf("the Keys page shows %d micro-dollars spent, the key's usage records cost %d", spent, cost)
	}
	if spent > keyCapMicros {
		t.Errorf("the Keys page shows %d micro-dollars spent, past the key's cap of %d", spent, keyCapMicros)
	}
	// Beside what it spent, the key's row says what its requests in flight reserve (nothing,
	// now) and what its cap leaves: the figures GET /v1/credits gives the key (h3).
	figures := keyFigures(t, p, "capped", "This period")
	if figures["Spent"] != spent || figures["Reserved"] != 0 || figures["Remaining"] != keyCapMicros-spent {
		t.Errorf("the capped key's period on the Keys page: %v, want %d spent, 0 reserved and %d remaining", figures, spent, keyCapMicros-spent)
	}
	// On a phone the figures stay readable: one named figure a line, the page no wider than
	// the screen (the table scrolls within itself, TestNarrowScreen).
	p.Do(chromedp.EmulateViewport(375, 800))
	p.at(p.Navigate(s.URL+"/keys"), http.StatusOK, s.URL+"/keys")
	p.shot("keys-capped-narrow")
	if width := p.width(); width > 375 {
		t.Errorf("the Keys page is %d pixels wide on a 375-pixel screen", width)
	}
}

// TestKeyCapLoweredWarns (h3): an owner lowers a key's credit cap to $0.25 a day with the
// row's Change form; the page the change leads to warns, as the key-created page does, that a
// Claude Code turn holds more than that and what to do, and stays within a phone's width.
func TestKeyCapLoweredWarns(t *testing.T) {
	s := start(t)
	p := newTour(t)
	s.signIn(p)
	s.createKey(p, "agent", func() {
		p.Fill(capLabel, "10")
		p.Select(periodLabel, "daily")
	})
	p.at(p.Follow("Back to the keys"), http.StatusOK, s.URL+"/keys")
	p.Do(chromedp.Click(chromedp.CSS("tbody details > summary")))
	p.Fill("Credit cap (USD, empty: none)", "0.25")
	p.shot("keys-lower-cap")
	p.at(p.Submit("Save limits"), http.StatusOK, s.URL+"/keys")
	p.shot("keys-cap-lowered")
	warning := p.Text("p.warning")
	for _, want := range []string{"Warning for key “agent”", "this key's credit cap ($0.25) is below what one Claude Code turn",
		"Raise the key's credit cap to"} {
		if !strings.Contains(warning, want) {
			t.Errorf("the page after lowering the cap warns %q, without %q", warning, want)
		}
	}
	p.Do(chromedp.EmulateViewport(375, 800))
	p.at(p.Navigate(p.URL()), http.StatusOK, s.URL+"/keys")
	p.shot("keys-cap-lowered-narrow")
	if width := p.width(); width > 375 {
		t.Errorf("the Keys page with the warning is %d pixels wide on a 375-pixel screen", width)
	}
}

// keyFigures are the named amounts of the column headed column in the Keys page's row of the
// key named name (a capped key's period: Spent, Reserved, Remaining), exactly, in micro-dollars.
func keyFigures(t *testing.T, p *tour, name, column string) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.Context(), browsertest.ActionTimeout)
	defer cancel()
	js := fmt.Sprintf(`(() => {
		const heads = [...document.querySelectorAll("thead th")].map((h) => h.textContent.trim());
		const row = [...document.querySelectorAll("tbody tr")].find((r) => r.children[0].textContent.trim() === %q);
		const out = {};
		for (const dt of row ? row.children[heads.indexOf(%q)].querySelectorAll("dl dt") : []) {
			const money = dt.nextElementSibling.querySelector(".money");
			if (money) out[dt.textContent.trim()] = money.title || money.textContent.trim() + "0000";
		}
		return out;
	})()`, name, column)
	texts, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](js))
	if err != nil {
		t.Fatalf("read the %s of key %s: %v", column, name, err)
	}
	out := make(map[string]int64, len(texts))
	for k, v := range texts {
		out[k] = usdMicros(t, v)
	}
	return out
}

// requireLabels fails the test, naming what is missing, unless the page has every label.
func requireLabels(t *testing.T, p *tour, what string, labels ...string) {
	t.Helper()
	have := p.labels()
	for _, want := range labels {
		found := false
		for _, l := range have {
			found = found || l == want
		}
		if !found {
			p.shot("missing-" + strings.ReplaceAll(strings.ToLower(want), " ", "-"))
			t.Fatalf("%s is missing: the page %s has no field labelled %q (its labels: %q)", what, p.URL(), want, have)
		}
	}
}

// keyCell is the text of the column headed column in the Keys page's row of the key named name.
func keyCell(t *testing.T, p *tour, name, column string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.Context(), browsertest.ActionTimeout)
	defer cancel()
	js := fmt.Sprintf(`(() => {
		const heads = [...document.querySelectorAll("thead th")].map((h) => h.textContent.trim());
		const col = heads.indexOf(%q);
		if (col < 0) return "no column " + %q + " among " + JSON.stringify(heads);
		const row = [...document.querySelectorAll("tbody tr")].find((r) => r.children[0].textContent.trim() === %q);
		if (!row) return "no row for the key " + %q;
		return row.children[col].textContent.trim();
	})()`, column, column, name, name)
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("read the %s of key %s: %v", column, name, err)
	}
	return s
}

// keyMoney is the exact amount of the column headed column in the Keys page's row of the key
// named name: the title of its amount when it was rounded to the cent (impl/web/money.go),
// else the amount itself with its micro-dollars ("$0.01" is "$0.010000").
func keyMoney(t *testing.T, p *tour, name, column string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.Context(), browsertest.ActionTimeout)
	defer cancel()
	js := fmt.Sprintf(`(() => {
		const heads = [...document.querySelectorAll("thead th")].map((h) => h.textContent.trim());
		const row = [...document.querySelectorAll("tbody tr")].find((r) => r.children[0].textContent.trim() === %q);
		const money = row && row.children[heads.indexOf(%q)].querySelector(".money");
		if (!money) return "no amount";
		return money.title || money.textContent.trim() + "0000";
	})()`, name, column)
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("read the %s of key %s: %v", column, name, err)
	}
	return s
}

// usdMicros reads an amount as the pages print it ("$0.012345") in micro-dollars.
func usdMicros(t *testing.T, s string) int64 {
	t.Helper()
	whole, frac, ok := strings.Cut(strings.ReplaceAll(strings.TrimPrefix(strings.TrimSpace(s), "$"), ",", ""), ".")
	w, err1 := strconv.ParseInt(whole, 10, 64)
	f, err2 := strconv.ParseInt(frac, 10, 64)
	if !ok || len(frac) != 6 || err1 != nil || err2 != nil {
		t.Fatalf("%q is not an amount in dollars", s)
	}
	return w*1_000_000 + f
}
