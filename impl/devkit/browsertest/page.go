package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// ActionTimeout bounds one helper's work in the browser (a navigation with its
// redirects, a lookup that waits for an element). It is a bound against a hung
// test, not a speed assertion.
const ActionTimeout = 30 * time.Second

// cspBinding is the name of the function through which a page reports its
// Content-Security-Policy violations to the test.
const cspBinding = "__browsertestCSPViolation"

// cspListener is evaluated in every document before the page's own scripts:
// it forwards each securitypolicyviolation event to the binding. Scripts that
// the DevTools protocol adds are not subject to the page's policy.
const cspListener = `(() => {
	const report = globalThis.` + cspBinding + `;
	if (typeof report !== "function") return;
	globalThis.addEventListener("securitypolicyviolation", (e) => {
		report(JSON.stringify({
			document: e.documentURI, directive: e.effectiveDirective, blocked: e.blockedURI,
			source: e.sourceFile, line: e.lineNumber, sample: e.sample, disposition: e.disposition,
		}));
	}, true);
})();`

// CSPViolation is one Content-Security-Policy violation that a page reported.
type CSPViolation struct {
	Document    string `json:"document"`    // the URL of the document whose policy was violated
	Directive   string `json:"directive"`   // the effective directive, such as script-src-elem
	Blocked     string `json:"blocked"`     // what was blocked: "inline", "eval" or a URL
	Source      string `json:"source"`      // the file whose code caused it, when known
	Line        int    `json:"line"`        // the line in Source, when known
	Sample      string `json:"sample"`      // the start of the blocked inline code, when the policy reports samples
	Disposition string `json:"disposition"` // "enforce", or "report" for a report-only policy
}

// String describes the violation in one line.
func (v CSPViolation) String() string {
	s := fmt.Sprintf("%s blocked %q on %s", v.Directive, v.Blocked, v.Document)
	if v.Source != "" {
		s += fmt.Sprintf(" (%s:%d)", v.Source, v.Line)
	}
	if v.Sample != "" {
		s += fmt.Sprintf(" sample %q", v.Sample)
	}
	if v.Disposition == "report" {
		s += " [report-only]"
	}
	return s
}

// Page is one browser tab in a browser context of its own: cookies, storage
// and cache are not shared with any other Page. It is not safe for use by
// several goroutines at once.
type Page struct {
	t      testing.TB
	ctx    context.Context
	cancel context.CancelFunc

	mu            sync.Mutex
	consoleErrors []string
	violations    []CSPViolation
	closed        bool
}

// New opens a Page for t in a new browser context, and closes it (and fails t
// on any CSP violation left untaken) in t's cleanup. It skips t when Chromium
// is not installed, or fails it then under CI=true.
func New(t testing.TB) *Page {
	t.Helper()
	b := acquire(t)
	p := &Page{t: t}
	p.ctx, p.cancel = chromedp.NewContext(b.ctx,
		chromedp.WithNewBrowserContext(),
		chromedp.WithListener(p.onEvent),
	)
	t.Cleanup(p.Close)
	ctx, cancel := context.WithTimeout(p.ctx, startTimeout)
	defer cancel()
	// The first run opens the tab; the binding and the listener are then in
	// place for every document it loads.
	err := chromedp.Do(p.ctx, chromedp.Func(func(_ context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, runtime.AddBinding, runtime.AddBindingParams{Name: cspBinding}); err != nil {
			return fmt.Errorf("add the CSP binding: %w", err)
		}
		if _, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument,
			page.AddScriptToEvaluateOnNewDocumentParams{Source: cspListener}); err != nil {
			return fmt.Errorf("add the CSP listener: %w", err)
		}
		return nil
	}))
	if err != nil {
		t.Fatalf("browsertest: open a page: %v\n%s", err, b.out.String())
	}
	return p
}

// onEvent records the events of the tab the test may ask about. It runs in the
// tab's event loop, so it only appends.
func (p *Page) onEvent(ev any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventBindingCalled:
		if ev.Name != cspBinding {
			return
		}
		var v CSPViolation
		if err := json.Unmarshal([]byte(ev.Payload), &v); err != nil {
			v = CSPViolation{Directive: "unreadable report", Sample: ev.Payload}
		}
		p.violations = append(p.violations, v)
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != runtime.ConsoleAPICalledTypeAssert {
			return
		}
		var parts []string
		for _, a := range ev.Args {
			switch {
			case a.Value != nil:
				var s string
				if json.Unmarshal(a.Value, &s) == nil {
					parts = append(parts, s)
				} else {
					parts = append(parts, string(a.Value))
				}
			case a.Description != "":
				parts = append(parts, a.Description)
			default:
				parts = append(parts, string(a.Type))
			}
		}
		p.consoleErrors = append(p.consoleErrors, "console."+string(ev.Type)+": "+strings.Join(parts, " "))
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg += " " + d.Exception.Description
		}
		p.consoleErrors = append(p.consoleErrors, fmt.Sprintf("exception: %s (%s:%d)", msg, d.URL, d.LineNumber+1))
	case *log.EventEntryAdded:
		if e := ev.Entry; e != nil && e.Level == log.EntryLevelError {
			p.consoleErrors = append(p.consoleErrors, fmt.Sprintf("%s: %s (%s)", e.Source, e.Text, e.URL))
		}
	}
}

// Context returns the page's chromedp context, for actions that no helper
// offers. Derive a context with a timeout from it for each action.
func (p *Page) Context() context.Context { return p.ctx }

// Do runs chromedp actions on the page within ActionTimeout, failing the test
// on an error.
func (p *Page) Do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("browsertest: %v", err)
	}
}

// Navigate loads url, following its redirects, waits until the final page has
// loaded and returns that page's HTTP status.
func (p *Page) Navigate(url string) int {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout)
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(url))
	if err != nil {
		p.t.Fatalf("browsertest: navigate to %s: %v", url, err)
	}
	return int(resp.Status)
}

// URL returns the address of the page now loaded.
func (p *Page) URL() string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout)
	defer cancel()
	u, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		p.t.Fatalf("browsertest: read the location: %v", err)
	}
	return u
}

// Title returns the title of the page now loaded.
func (p *Page) Title() string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout)
	defer cancel()
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		p.t.Fatalf("browsertest: read the title: %v", err)
	}
	return title
}

// Fill types value into the form field whose accessible name (its <label>,
// aria-label or aria-labelledby) is label, replacing what it held.
func (p *Page) Fill(label, value string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout)
	defer cancel()
	by := byAccessibleName(label, fieldRoles)
	// Clear fails on an empty <textarea> (it looks for the text node of the textarea's
	// content): one with nothing to clear is typed into as it is.
	err := chromedp.Do(ctx, chromedp.Clear("field "+label, by))
	if err != nil && strings.Contains(err.Error(), "does not have child #text node") {
		err = nil
	}
	if err == nil {
		err = chromedp.Do(ctx, chromedp.SendKeys("field "+label, value, by))
	}
	if err != nil {
		p.t.Fatalf("browsertest: fill the field labelled %q: %v", label, err)
	}
}

// Select chooses, in the <select> whose accessible name is label, the option
// whose text, label or value is option, and fires the input and change events
// a person's choice fires.
func (p *Page) Select(label, option string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout)
	defer cancel()
	const choose = `function(option) {
		const o = [...this.options].find((o) => o.text.trim() === option || o.label === option || o.value === option);
		if (!o) throw new Error("no option " + JSON.stringify(option) + " among " + JSON.stringify([...this.options].map((o) => o.text.trim())));
		this.value = o.value;
		this.dispatchEvent(new Event("input", {bubbles: true}));
		this.dispatchEvent(new Event("change", {bubbles: true}));
		return true;
	}`
	by := byAccessibleName(label, []string{"combobox", "listbox"})
	if _, err := chromedp.Run(ctx, chromedp.QueryAfter("select "+label, func(ctx context.Context, t *chromedp.Target, nodes []*chromedp.Node) (chromedp.Void, error) {
		obj, err := cdp.Call(ctx, t, dom.ResolveNode, dom.ResolveNodeParams{NodeID: nodes[0].NodeID})
		if err != nil {
			return chromedp.Void{}, err
		}
		_, err = chromedp.CallFunctionOn[bool](choose, func(c *runtime.CallFunctionOnParams) {
			c.ObjectID = obj.Object.ObjectID
		}, option)(ctx, t)
		return chromedp.Void{}, err
	}, by, chromedp.NodeVisible)); err != nil {
		p.t.Fatalf("browsertest: choose %q in the list labelled %q: %v", option, label, err)
	}
}

// Check sets the checkbox, radio button or switch whose accessible name is
// label to checked (on) or not, by clicking it when it is not so already.
func (p *Page) Check(label string, on bool) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout)
	defer cancel()
	by := byAccessibleName(label, []string{"checkbox", "radio", "switch"})
	checked, err := chromedp.Run(ctx, chromedp.JavascriptAttribute[bool]("checkbox "+label, "checked", by))
	if err == nil && checked != on {
		err = chromedp.Do(ctx, chromedp.Click("checkbox "+label, by))
	}
	if err != nil {
		p.t.Fatalf("browsertest: set the checkbox labelled %q to %v: %v", label, on, err)
	}
}

// Click clicks the button (a <button>, an <input type=submit> or an element
// with role=button) whose accessible name is name. It does not wait for a
// navigation; use Submit when the click submits a form.
func (p *Page) Click(name string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Click("button "+name, byAccessibleName(name, buttonRoles))); err != nil {
		p.t.Fatalf("browsertest: click the button %q: %v", name, err)
	}
}

// Submit clicks the button whose accessible name is name, waits for the
// navigation it causes (with its redirects, to other sites too) to load, and
// returns the final page's HTTP status.
func (p *Page) Submit(name string) int {
	p.t.Helper()
	return p.navigateBy("button", name, buttonRoles)
}

// Follow clicks the link whose accessible name is name, waits for the page it
// leads to, and returns that page's HTTP status.
func (p *Page) Follow(name string) int {
	p.t.Helper()
	return p.navigateBy("link", name, []string{"link"})
}

// navigateBy clicks the element of one of roles named name and waits for the
// navigation it causes.
func (p *Page) navigateBy(what, name string, roles []string) int {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(what+" "+name, byAccessibleName(name, roles)))
	if err != nil {
		p.t.Fatalf("browsertest: click the %s %q and wait for the next page: %v", what, name, err)
	}
	return int(resp.Status)
}

// Text returns the visible text of the first element that the CSS selector
// matches, waiting until one is visible.
func (p *Page) Text(selector string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(selector), chromedp.NodeVisible))
	if err != nil {
		p.t.Fatalf("browsertest: read the text of %q: %v", selector, err)
	}
	return s
}

// WaitVisible waits until an element that the CSS selector matches is visible.
func (p *Page) WaitVisible(selector string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(selector))); err != nil {
		p.t.Fatalf("browsertest: wait for %q to be visible: %v", selector, err)
	}
}

// Cookies returns the cookies the browser would send to url, with their
// attributes.
func (p *Page) Cookies(url string) []*network.Cookie {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
	if err != nil {
		p.t.Fatalf("browsertest: read the cookies for %s: %v", url, err)
	}
	return res.Cookies
}

// Cookie returns the cookie called name that the browser would send to url,
// or nil when it has none.
func (p *Page) Cookie(url, name string) *network.Cookie {
	p.t.Helper()
	for _, c := range p.Cookies(url) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// RequireHostCookie returns the cookie called name that the browser would
// send to url, failing the test when it is missing or is not what a session
// cookie must be: Secure, HttpOnly, SameSite=Lax, Path=/ and bound to the
// host (no Domain attribute), as the __Host- prefix promises.
func (p *Page) RequireHostCookie(url, name string) *network.Cookie {
	p.t.Helper()
	c := p.Cookie(url, name)
	if c == nil {
		p.t.Fatalf("browsertest: no cookie %q for %s", name, url)
	}
	if problems := HostCookieProblems(c); len(problems) > 0 {
		p.t.Fatalf("browsertest: cookie %q for %s: %s", name, url, strings.Join(problems, "; "))
	}
	return c
}

// HostCookieProblems lists what makes c fall short of a session cookie:
// Secure, HttpOnly, SameSite=Lax, Path=/, host-only (a Domain attribute makes
// the browser store the domain with a leading dot).
func HostCookieProblems(c *network.Cookie) []string {
	var problems []string
	if !c.Secure {
		problems = append(problems, "not Secure")
	}
	if !c.HTTPOnly {
		problems = append(problems, "not HttpOnly")
	}
	if c.SameSite != network.CookieSameSiteLax {
		problems = append(problems, fmt.Sprintf("SameSite=%q, not Lax", c.SameSite))
	}
	if c.Path != "/" {
		problems = append(problems, fmt.Sprintf("Path=%q, not /", c.Path))
	}
	if strings.HasPrefix(c.Domain, ".") {
		problems = append(problems, fmt.Sprintf("Domain=%q, not host-only", c.Domain))
	}
	return problems
}

// ConsoleErrors returns the console errors, uncaught exceptions and browser
// log errors (a failed subresource, a refused script) of the page so far.
func (p *Page) ConsoleErrors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.consoleErrors...)
}

// TakeCSPViolations returns the Content-Security-Policy violations reported so
// far and forgets them, so that they no longer fail the test. Only a test that
// expects a violation calls it.
func (p *Page) TakeCSPViolations() []CSPViolation {
	p.t.Helper()
	p.settle()
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.violations
	p.violations = nil
	return v
}

// settle lets the events that the page has queued reach the test: a
// violation event is dispatched in a task of its own after the violation.
func (p *Page) settle() {
	ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout)
	defer cancel()
	_, _ = chromedp.Run(ctx, chromedp.Evaluate[bool](
		`new Promise((resolve) => setTimeout(() => resolve(true), 0))`, chromedp.EvalAwaitPromise))
}

// Close closes the tab and disposes of its browser context, then fails the
// test if the page reported a CSP violation that the test did not take, and
// logs the console errors. New registers it as a cleanup; calling it earlier
// is allowed and the cleanup then does nothing.
func (p *Page) Close() {
	p.t.Helper()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	p.settle()
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.consoleErrors {
		p.t.Logf("browsertest: %s", e)
	}
	if len(p.violations) > 0 {
		lines := make([]string, len(p.violations))
		for i, v := range p.violations {
			lines[i] = "  " + v.String()
		}
		p.t.Errorf("browsertest: the page violated its Content-Security-Policy %d time(s):\n%s",
			len(p.violations), strings.Join(lines, "\n"))
	}
}

// Roles of the elements the helpers look up by accessible name.
var (
	fieldRoles  = []string{"textbox", "searchbox", "combobox", "spinbutton", "TextField"}
	buttonRoles = []string{"button"}
)

// byAccessibleName finds the elements whose computed accessible name is name
// and whose role is one of roles, as a screen reader would find them.
func byAccessibleName(name string, roles []string) chromedp.QueryOption {
	return chromedp.ByFunc(func(ctx context.Context, t *chromedp.Target, n *chromedp.Node) ([]cdp.NodeID, error) {
		res, err := cdp.Call(ctx, t, accessibility.QueryAXTree, accessibility.QueryAXTreeParams{
			NodeID:         n.NodeID,
			AccessibleName: name,
		})
		if err != nil {
			return nil, err
		}
		var ids []cdp.BackendNodeID
		for _, ax := range res.Nodes {
			if ax.Ignored || ax.BackendDOMNodeID == 0 || ax.Role == nil {
				continue
			}
			var role string
			if json.Unmarshal(ax.Role.Value, &role) != nil {
				continue
			}
			for _, r := range roles {
				if role == r {
					ids = append(ids, ax.BackendDOMNodeID)
					break
				}
			}
		}
		if len(ids) == 0 {
			// Not there yet: the query is retried until the timeout.
			return nil, nil
		}
		pushed, err := cdp.Call(ctx, t, dom.PushNodesByBackendIDsToFrontend,
			dom.PushNodesByBackendIDsToFrontendParams{BackendNodeIDs: ids})
		if err != nil {
			return nil, err
		}
		return pushed.NodeIDs, nil
	})
}
