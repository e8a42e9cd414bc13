package web

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strings"
)

type nonceKey struct{}

// cspNonce is the request's Content-Security-Policy nonce (for <script nonce="…">).
func cspNonce(r *http.Request) string {
	n, _ := r.Context().Value(nonceKey{}).(string)
	return n
}

// refuseAPIKeys refuses every request that carries an API key: the web application never
// reads Authorization (nor x-api-key), and a request with one is a mistake or an attack.
func refuseAPIKeys(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != "" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte("API keys are not accepted by the web application.\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// securityHeaders sets the response's security headers, with a fresh script nonce in the
// Content-Security-Policy. form-action allows the provider's origins: Chromium checks
// form-action on the redirects that follow a form submission, and signing out (a form) ends
// at the provider's end_session_endpoint, as a re-authentication after a key form does at its
// authorization endpoint.
func (a *App) securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 18)
		_, _ = rand.Read(b)
		nonce := base64.StdEncoding.EncodeToString(b)
		formAction := "'self'"
		for _, o := range a.rp.Origins() {
			formAction += " " + o
		}
		h := w.Header()
		h.Set("Content-Security-Policy", strings.Join([]string{
			"default-src 'none'",
			"script-src 'nonce-" + nonce + "'",
			"style-src 'self'",
			"img-src 'self' data:",
			"connect-src 'self'",
			"font-src 'self'",
			"form-action " + formAction,
			"frame-ancestors 'none'",
			"base-uri 'none'",
		}, "; "))
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), nonceKey{}, nonce)))
	})
}
