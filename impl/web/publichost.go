package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// toPublicHost wraps next so that a GET of "/" or of the /signin tree whose Host is not
// publicURL's is answered with 303 to the same path and query on publicURL's scheme and host
// (Options.RedirectToPublicURL). A sign-in begun elsewhere would set its cookie on the other
// host and fail at the callback, which the provider sends to publicURL's host.
func toPublicHost(publicURL string, next http.Handler) (http.Handler, error) {
	u, err := url.Parse(publicURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("web: public_url %q has no host", publicURL)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		entry := p == "/" || p == "/signin" || strings.HasPrefix(p, "/signin/")
		if r.Method == http.MethodGet && entry && !strings.EqualFold(r.Host, u.Host) {
			target := url.URL{Scheme: u.Scheme, Host: u.Host, Path: p, RawQuery: r.URL.RawQuery}
			http.Redirect(w, r, target.String(), http.StatusSeeOther)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}
