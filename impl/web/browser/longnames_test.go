package browser_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/impl/agent"
)

// TestLongNamesWrap (task h10): a key named with 100 characters without a break, a dataset
// and an agent slot named with 64 and an account named with 120 do not widen the Keys,
// Datasets or Agents page past a 1,280-pixel window (a newcomer trial saw the Keys page 2,089
// pixels wide); they wrap within a bounded cell. On a 375-pixel screen, where a wide table
// scrolls within itself, the name cell stays wide enough to read the name in pieces, not
// letter by letter, and the confirmation that names the key stays within the screen.
func TestLongNamesWrap(t *testing.T) {
	s := start(t)
	account := strings.Repeat("acmecorporation", 8)
	if _, err := s.GW.Store.Pool().Exec(context.Background(), `UPDATE accounts SET name = $1 WHERE id = $2`,
		account, s.Account.ID); err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("abcdefghij", 10)
	dataset := strings.Repeat("q3salesdata", 6)[:64]
	slot := strings.Repeat("nightlybuild", 6)[:64]
	operator, err := agent.New(agent.Options{Store: s.GW.Store, Config: s.GW.Config})
	if err != nil {
		t.Fatal(err)
	}
	if err := operator.AssignSlot(context.Background(), s.Account.ID, slot); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "sales.csv")
	if err := os.WriteFile(file, []byte("region,units\nnorth,3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newTour(t)
	s.signIn(p)
	s.createKey(p, key, nil)
	p.at(p.Follow("Datasets"), http.StatusOK, s.URL+"/datasets")
	p.Do(chromedp.SetUploadFiles(chromedp.CSS("#dataset-file"), []string{file}))
	p.Do(chromedp.SetValue(chromedp.CSS("#dataset-name"), dataset))
	p.at(p.Submit("Upload"), http.StatusOK, s.URL+"/datasets")
	for _, page := range []struct{ path, name string }{{"/keys", key}, {"/datasets", dataset}, {"/agents", slot}} {
		p.Do(chromedp.EmulateViewport(1280, 800))
		p.at(p.Navigate(s.URL+page.path), http.StatusOK, s.URL+page.path)
		p.shot("long-names-wide" + strings.ReplaceAll(page.path, "/", "-"))
		if width := p.width(); width > 1280 {
			t.Errorf("%s with a long name is %d pixels wide in a 1,280-pixel window", page.path, width)
		}
		p.Do(chromedp.EmulateViewport(375, 800))
		p.at(p.Navigate(s.URL+page.path), http.StatusOK, s.URL+page.path)
		p.shot("long-names-narrow" + strings.ReplaceAll(page.path, "/", "-"))
		if width := p.width(); width > 375 {
			t.Errorf("%s with a long name is %d pixels wide on a 375-pixel screen", page.path, width)
		}
		if width := eval[int](p, fmt.Sprintf(`Math.round([...document.querySelectorAll("tbody th")].find((c) => c.textContent.trim() === %s).getBoundingClientRect().width)`,
			jsQuote(page.name))); width < 100 {
			t.Errorf("%s's name cell is %d pixels wide on a 375-pixel screen: the name breaks every few letters", page.path, width)
		}
	}
	// The confirmation of the key's revocation names it too.
	p.at(p.Navigate(s.URL+"/keys"), http.StatusOK, s.URL+"/keys")
	p.Do(chromedp.Evaluate[chromedp.Void](`document.querySelector("tbody form[action$='/revoke']").submit()`))
	if got := waitText(p, "#confirm-what"); !strings.Contains(got, key) {
		t.Fatalf("the confirmation of the revocation says %q, without the key's name", got)
	}
	p.shot("long-names-narrow-confirm")
	if width := p.width(); width > 375 {
		t.Errorf("the confirmation of a long-named key's revocation is %d pixels wide on a 375-pixel screen", width)
	}
}
