package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// The web application's defaults (see Web).
const (
	DefaultSessionIdleTimeout     = 2 * time.Hour
	DefaultSessionAbsoluteTimeout = 24 * time.Hour
	DefaultReauthAfter            = 10 * time.Minute
	// DefaultDatasetUploadMaxBytes bounds a dataset uploaded on the Datasets page (100 MiB).
	DefaultDatasetUploadMaxBytes = 100 << 20
	// DefaultDatasetAccountMaxBytes and DefaultDatasetAccountMaxCount bound what the Datasets
	// page lets an account store in all (1 GiB, 100 datasets).
	DefaultDatasetAccountMaxBytes = 1 << 30
	DefaultDatasetAccountMaxCount = 100
)

// Web configures the signed-in web application (impl/web): sign-in through an OpenID Connect
// provider, and its sessions. The application is served when Issuer is set.
type Web struct {
	// Issuer is the OpenID provider's issuer URL (its discovery document is at
	// Issuer + "/.well-known/openid-configuration").
	Issuer string `yaml:"issuer"`
	// ClientID is the application's client at the provider.
	ClientID string `yaml:"client_id"`
	// ClientSecret is filled in by cmd/ from TOLLGATE_OIDC_CLIENT_SECRET; it is never read
	// from the file.
	ClientSecret string `yaml:"-"`
	// PublicURL is the application's address as browsers see it, e.g. https://tollgate.example.com/
	// (the provider sends users back to it after sign-out).
	PublicURL string `yaml:"public_url"`
	// RedirectURL is the sign-in callback registered at the provider (default: PublicURL's
	// /auth/callback).
	RedirectURL string `yaml:"redirect_url"`
	// SignupPlan, when set, lets a person with no membership create an account on this plan,
	// as its owner (self-service sign-up). Empty: only the operator adds members.
	SignupPlan string `yaml:"signup_plan"`
	// SessionIdleTimeout ends a session unused this long (default 2 h).
	SessionIdleTimeout time.Duration `yaml:"session_idle_timeout"`
	// SessionAbsoluteTimeout ends a session this long after sign-in, used or not (default 24 h).
	SessionAbsoluteTimeout time.Duration `yaml:"session_absolute_timeout"`
	// ReauthAfter is how recent a sign-in must be for sensitive actions (creating a key);
	// older sign-ins go through the provider again (default 10 min).
	ReauthAfter time.Duration `yaml:"reauth_after"`
	// ReauthTrustsIssueTime, for a provider whose ID tokens carry no auth_time (released Dex,
	// Google without "Session age claims"), counts a sign-in from its ID token's issue time,
	// so that keys can be created and apps allowed in the console at all. Weaker, and off by
	// default: a provider with single sign-on that re-issues a token for its live session
	// without asking for a password passes the re-authentication (docs/web.md).
	ReauthTrustsIssueTime bool `yaml:"reauth_trusts_issue_time"`
	// DatasetUploadMaxBytes is the largest dataset file the Datasets page accepts (default
	// 100 MiB; `tollgate admin dataset put` has no limit).
	DatasetUploadMaxBytes int64 `yaml:"dataset_upload_max_bytes"`
	// DatasetAccountMaxBytes and DatasetAccountMaxCount bound what an account's members store
	// through the Datasets page in all: its datasets' total size (default 1 GiB) and their
	// number (default 100). The storage is shared by every account (trial h11 D10: one
	// member could fill it); `tollgate admin dataset put` is not bound by them.
	DatasetAccountMaxBytes int64 `yaml:"dataset_account_max_bytes"`
	DatasetAccountMaxCount int   `yaml:"dataset_account_max_count"`
}

// Enabled reports whether the web application is configured.
func (w Web) Enabled() bool { return w.Issuer != "" }

// ApplyDefaults fills the defaults of the unset fields (Parse calls it; so does cmd/ after
// setting the section in code).
func (w *Web) ApplyDefaults() {
	orDefault(&w.SessionIdleTimeout, DefaultSessionIdleTimeout)
	orDefault(&w.SessionAbsoluteTimeout, DefaultSessionAbsoluteTimeout)
	orDefault(&w.ReauthAfter, DefaultReauthAfter)
	if w.DatasetUploadMaxBytes <= 0 {
		w.DatasetUploadMaxBytes = DefaultDatasetUploadMaxBytes
	}
	if w.DatasetAccountMaxBytes <= 0 {
		w.DatasetAccountMaxBytes = DefaultDatasetAccountMaxBytes
	}
	if w.DatasetAccountMaxCount <= 0 {
		w.DatasetAccountMaxCount = DefaultDatasetAccountMaxCount
	}
	if w.RedirectURL == "" && w.PublicURL != "" {
		w.RedirectURL = strings.TrimSuffix(w.PublicURL, "/") + "/auth/callback"
	}
}

// validate checks the web section (when enabled) against the plans c knows.
func (w Web) validate(c *Config) error {
	if !w.Enabled() {
		return nil
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("web: "+format, args...)) }
	if u, err := url.Parse(w.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		bad("issuer %q is not an http(s) URL", w.Issuer)
	}
	if w.ClientID == "" {
		bad("client_id is required with an issuer")
	}
	for name, v := range map[string]string{"public_url": w.PublicURL, "redirect_url": w.RedirectURL} {
		if u, err := url.Parse(v); v == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("%s %q is not an http(s) URL", name, v)
		}
	}
	if w.SignupPlan != "" {
		if _, ok := c.Plan(w.SignupPlan); !ok {
			bad("signup_plan %q is not a configured plan", w.SignupPlan)
		}
	}
	if w.SessionIdleTimeout < 0 || w.SessionAbsoluteTimeout < 0 || w.ReauthAfter < 0 {
		bad("timeouts must be positive")
	}
	return errors.Join(errs...)
}
