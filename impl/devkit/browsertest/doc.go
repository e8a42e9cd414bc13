// Package browsertest drives Debian's Chromium from tests, through chromedp, so
// that the web application's pages are tested in a real browser.
//
// It is a test-only helper: import it only from tests. It owns the browser
// process of a test binary, its flags and its throwaway profile, one isolated
// browser context (its own cookie jar) per Page, the helpers that act on a
// page the way a person does (by the labels and the accessible names that a
// screen reader reads), the screenshots written as test artefacts, and the
// console errors and Content-Security-Policy violations a page reports.
//
// A test package calls Main from its TestMain, so that the browser starts at
// most once per test binary and stops when the tests are done:
//
//	func TestMain(m *testing.M) { browsertest.Main(m) }
//
// A TestMain that also needs other helpers' cleanup calls Begin before m.Run
// and Shutdown after it instead. Without either, every Page starts and stops a
// browser of its own, which works but is slower.
//
// A test then opens a Page and acts on it:
//
//	p := browsertest.New(t)
//	p.Navigate(app.URL + "/keys")
//	p.Fill("Name", "ci")
//	p.Submit("Create key")
//	key := p.Text("#new-key")
//	p.Screenshot("key-created")
//	c := p.RequireHostCookie(app.URL, "__Host-tollgate")
//
// The helpers: Navigate, Submit (click a button and wait for the page it
// leads to, through redirects to other sites), Follow (a link), Click (a
// button, no navigation), Fill (a field by its label), Select (an option of a
// list), Check (a checkbox or radio), Text, Title, URL, WaitVisible, Cookies,
// Cookie, RequireHostCookie, Screenshot, ConsoleErrors, TakeCSPViolations,
// and Do for any other chromedp action. Buttons, links and fields are found
// by their accessible name, through Chromium's accessibility tree, so a test
// that finds them shows that a screen reader can too.
//
// Every helper fails the test (t.Fatalf) when the browser cannot do what it
// asks, naming the label, the name or the selector it looked for.
//
// # The browser
//
// The browser is the chromium executable on PATH (Debian's package
// "chromium"; .ci/run installs it). When it is not installed, a test that asks
// for a Page is skipped with the reason, or fails when the CI environment
// variable is "true". It runs headless with a fixed window size of 1280×900
// and flags that work as root and offline: --no-sandbox when the process runs
// as root (Chromium refuses to start as root with its sandbox), no first-run
// page or default-browser check, and no background networking, sync,
// component updates, translation, domain reliability reports or other calls
// home, which a closed network refuses or leaves hanging. Its profile is a
// fresh temporary directory that chromedp creates and removes, with any child
// process left behind, when the browser stops.
//
// # Screenshots
//
// Screenshot writes a full-page PNG to
// <artefacts>/<TestName>/<name>.png. The artefact directory is
// $TOLLGATE_TEST_ARTEFACTS/<package directory relative to the module root>
// when that variable is set (so one directory gathers every package's
// screenshots, for a CI job to keep), and otherwise testdata/artefacts in the
// test's package directory (for example impl/web/testdata/artefacts after
// `make test`), which holds a .gitignore so that git ignores it. A test's
// directory is emptied at its first screenshot in a run, so it holds that
// run's screenshots only. The path is logged with t.Logf.
//
// # Console errors and CSP violations
//
// A Page records the console errors, uncaught exceptions and browser log
// errors of every document it loads (ConsoleErrors), and every
// Content-Security-Policy violation (the securitypolicyviolation event,
// reported to the test through a binding installed before any page script
// runs). A violation fails the test when the Page closes, unless the test took
// it with TakeCSPViolations: the application's pages use a nonce-based policy,
// and an inline script or style without the nonce is a bug.
package browsertest
