// Package browser holds the browser tests of the signed-in web application (issue 14, "must
// show" 1): Debian's Chromium, driven through impl/devkit/browsertest, signs in at the development
// OpenID provider (impl/devkit/devoidc) and uses the pages of impl/web served by a real gateway
// (impl/devkit/apitest, with the upstream simulator and a throwaway PostgreSQL).
//
// The application is addressed as http://localhost:PORT and the provider as
// http://127.0.0.1:PORT: two sites, so that a cookie that would not survive the cross-site
// round trip of a sign-in or a sign-out (a SameSite mistake) fails a test. Each test is one
// flow a person follows (sign in; create a key, see it once, use it and revoke it; cap a key's
// credit; approve an agent action; sign out; end another session) and writes a screenshot of
// every page it visits, in order, under testdata/artefacts/<TestName>/ (or
// $TOLLGATE_TEST_ARTEFACTS/impl/web/browser/<TestName>/). Every page is used by the labels and
// accessible names a screen reader reads, and a Content-Security-Policy violation on any page
// fails the test.
//
// The package has no code of its own: only its tests.
package browser
