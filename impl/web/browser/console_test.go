package browser_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/browsertest"
	"github.com/tollgate/tollgate/impl/web/connect"
)

// clipboard sets the page's clipboard permissions for the site: granted (read and write, so
// that the test can read back what was copied) or denied (as a browser may refuse them
// without asking).
func (s *site) clipboard(p *tour, granted bool) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.Context(), browsertest.ActionTimeout)
	defer cancel()
	setting := browser.PermissionSettingGranted
	if !granted {
		setting = browser.PermissionSettingDenied
	}
	bc := chromedp.FromContext(p.Context()).BrowserContextID
	for _, name := range []string{"clipboard-write", "clipboard-read"} {
		if _, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
			Permission: &browser.PermissionDescriptor{Name: name}, Setting: setting, Origin: s.URL, BrowserContextID: bc}); err != nil {
			p.t.Fatalf("set the %s permission: %v", name, err)
		}
	}
}

// eval evaluates a JavaScript expression in the page (awaiting a promise) and returns its value.
func eval[T any](p *tour, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.Context(), browsertest.ActionTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitText waits until the element the selector finds has some text, and returns it.
func waitText(p *tour, selector string) string {
	p.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if s := eval[string](p, `(document.querySelector(`+jsQuote(selector)+`) || {}).textContent || ""`); s != "" || time.Now().After(deadline) {
			return s
		}
	}
}

// jsQuote is s as a JavaScript string literal.
func jsQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// TestKeyCreatedCopyAndSettings creates a key and uses what its page offers: each client's
// settings (package connect), filled with the gateway's address and the new key, and a copy
// button for the key and for each of them. With the clipboard permitted, "Copy the key" puts
// the key on the clipboard and says so; with the permission refused, as a browser may refuse
// it without asking, a copy button does not fail silently: the text is selected (so Ctrl+C
// copies it) and the page says what happened.
func TestKeyCreatedCopyAndSettings(t *testing.T) {
	s := start(t)
	p := newTour(t)
	s.signIn(p)
	key := s.createKey(p, "laptop", nil)
	// Focus for the clipboard API: a headless page is not focused by itself.
	p.Do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true})
		return err
	}))

	// The settings shown are connect's, to the byte, for this gateway and key.
	tg := connect.Target{BaseURL: s.URL, Key: key, ChatModel: "service-flint", MessagesModel: "service-sonnet",
		Chat: connect.Facts(config.Default(), "service-flint")}
	for _, setup := range connect.All(tg) {
		for i, b := range setup.Blocks {
			id := "setup-" + setup.ID + "-" + string(rune('0'+i))
			if got := eval[string](p, `document.getElementById(`+jsQuote(id)+`).textContent`); got != b.Text {
				t.Errorf("%s, %s: the page shows\n%s\nwant\n%s", setup.Client, b.Where, got, b.Text)
			}
		}
	}

	s.clipboard(p, true)
	p.Click("Copy the key")
	if got := waitText(p, "#key-copy-status"); got != "Copied." {
		t.Errorf("after Copy the key, the page says %q", got)
	}
	if got := eval[string](p, `navigator.clipboard.readText()`); got != key {
		t.Errorf("the clipboard holds %q, want the key", got)
	}

	// Each client's settings are closed until opened (a details element: no script needed).
	s.clipboard(p, false)
	p.Do(chromedp.Click(chromedp.CSS("#setup-codex > summary")))
	p.WaitVisible("#setup-codex-0")
	where := connect.Codex(tg).Blocks[0].Where
	p.Click("Copy Codex CLI: " + where)
	status := waitText(p, "#setup-codex-0-status")
	if status == "" || status == "Copied." {
		t.Errorf("with the clipboard refused, the Codex copy button says %q", status)
	}
	// (A selection's text leaves out the block's final newline.)
	if got := eval[string](p, `window.getSelection().toString()`); got != strings.TrimSuffix(connect.Codex(tg).Blocks[0].Text, "\n") {
		t.Errorf("with the clipboard refused, the selection is %q, want Codex's config.toml", got)
	}
	t.Logf("with the clipboard refused: %q", status)
	eval[bool](p, `window.getSelection().removeAllRanges(), true`)
	p.shot("key-created-copied")
}

// TestConfirmations follows each destructive action of the console in a browser with
// JavaScript turned off, so that nothing but the server stands between a click and the
// action: disabling a key, revoking it, revoking all keys and deleting a dataset each answer
// with a page that says what will stop working, change nothing until that page's button is
// pressed (Cancel changes nothing at all), and revoke all also asks for the account's name.
func TestConfirmations(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	ci, ciID := s.GW.NewKey(t, s.Account.ID, 0)
	if _, err := s.GW.Store.Pool().Exec(ctx, `UPDATE api_keys SET name = 'ci-runner' WHERE id = $1`, ciID); err != nil {
		t.Fatal(err)
	}
	spare, _ := s.GW.NewKey(t, s.Account.ID, 0)
	if _, err := s.GW.Datasets.Put(ctx, s.Account.ID, "sales", "csv", strings.NewReader("region,units\nnorth,3\n")); err != nil {
		t.Fatal(err)
	}
	p := newTour(t)
	p.Do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	}))
	s.signIn(p)
	works := func(key string) bool {
		status, _ := s.api(t, http.MethodGet, "/v1/models", key, "")
		return status == http.StatusOK
	}
	refusedSoon := func(key, what string) {
		t.Helper()
		for deadline := time.Now().Add(time.Second); works(key); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the key still works a second after %s", what)
			}
		}
	}
	prefix := ci[:12]

	// Disable: the page names the key, Cancel keeps it working, the button disables it.
	p.at(p.Follow("Keys"), http.StatusOK, s.URL+"/keys")
	p.at(p.Submit("Disable key ci-runner "+prefix), http.StatusOK, s.URL+"/keys/"+ciID.String()+"/disable")
	p.shot("disable-confirm")
	if got := p.Text("#confirm-what"); !strings.Contains(got, "Disabling key “ci-runner” ("+prefix+"…") || !strings.Contains(got, "You can enable it again") {
		t.Errorf("the disable confirmation says %q", got)
	}
	p.at(p.Follow("Cancel"), http.StatusOK, s.URL+"/keys")
	if !works(ci) {
		t.Fatal("the key stopped working although its disabling was cancelled")
	}
	p.at(p.Submit("Disable key ci-runner "+prefix), http.StatusOK, s.URL+"/keys/"+ciID.String()+"/disable")
	p.at(p.Submit("Disable key “ci-runner”"), http.StatusOK, s.URL+"/keys")
	refusedSoon(ci, "disabling it")

	// Revoke all: the account's name must be typed; a wrong one changes nothing.
	p.at(p.Submit("Revoke all keys"), http.StatusOK, s.URL+"/keys/revoke-all")
	if got := p.Text("#confirm-what"); !strings.Contains(got, "Revoking all keys of acme stops every client and agent that uses any of its 2 keys") ||
		!strings.Contains(got, "“ci-runner” ("+prefix+"…") {
		t.Errorf("the revoke-all confirmation says %q", got)
	}
	p.Fill("Type acme to confirm", "acne")
	p.shot("revoke-all-confirm")
	p.at(p.Submit("Revoke all keys of acme"), http.StatusUnprocessableEntity, s.URL+"/keys/revoke-all")
	if !works(spare) {
		t.Fatal("a key stopped working although the account's name was mistyped")
	}
	p.Fill("Type acme to confirm", "acme")
	p.at(p.Submit("Revoke all keys of acme"), http.StatusOK, s.URL+"/keys")
	refusedSoon(spare, "revoking all keys")

	// Delete a dataset: the page says what the keys and agents lose.
	p.at(p.Follow("Datasets"), http.StatusOK, s.URL+"/datasets")
	p.at(p.Submit("Delete dataset sales"), http.StatusOK, s.URL+"/datasets/sales/delete")
	p.shot("delete-dataset-confirm")
	if got := p.Text("#confirm-what"); !strings.Contains(got, "Deleting dataset “sales” (CSV, ") || !strings.Contains(got, "can no longer load or query it") {
		t.Errorf("the delete confirmation says %q", got)
	}
	p.at(p.Follow("Cancel"), http.StatusOK, s.URL+"/datasets")
	if got := p.Text("main table tbody"); !strings.Contains(got, "sales") {
		t.Fatalf("the dataset is gone although its deletion was cancelled: %q", got)
	}
	p.at(p.Submit("Delete dataset sales"), http.StatusOK, s.URL+"/datasets/sales/delete")
	p.at(p.Submit("Delete dataset sales"), http.StatusOK, s.URL+"/datasets")
	if got := p.Text("[role=status]"); got != "Dataset sales deleted." {
		t.Errorf("after deleting, the page says %q", got)
	}
}

// TestDatasetNameFromFileName chooses a file named "Q3 sales.csv" on the Datasets page: before
// anything is sent the name field shows the dataset name it gives, q3_sales, and says so;
// uploaded, the dataset is listed under that name.
func TestDatasetNameFromFileName(t *testing.T) {
	s := start(t)
	file := filepath.Join(t.TempDir(), "Q3 sales.csv")
	if err := os.WriteFile(file, []byte("region,units\nnorth,3\nsouth,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newTour(t)
	s.signIn(p)
	p.at(p.Follow("Datasets"), http.StatusOK, s.URL+"/datasets")
	p.Do(chromedp.SetUploadFiles(chromedp.CSS("#dataset-file"), []string{file}))
	if got := p.value("#dataset-name"); got != "q3_sales" {
		t.Errorf("after choosing Q3 sales.csv the name field holds %q, want q3_sales", got)
	}
	if got := waitText(p, "#dataset-name-derived"); got != "“Q3 sales.csv” will be stored as q3_sales." {
		t.Errorf("the page says %q about the name", got)
	}
	p.shot("datasets-name-from-file")
	p.at(p.Submit("Upload"), http.StatusOK, s.URL+"/datasets")
	if got := p.Text("[role=status]"); got != "Dataset q3_sales stored." {
		t.Errorf("after the upload the page says %q", got)
	}
	if got := p.Text("main table tbody"); !strings.Contains(got, "q3_sales") {
		t.Errorf("the datasets listed: %q", got)
	}
	p.shot("datasets")
}
