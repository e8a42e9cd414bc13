//go:build dev

package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/devoidc"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/members"
)

// The development sign-in of `tollgate dev` (never `serve`).
const (
	devUserEmail = "demo@example.com"
	devClientID  = "tollgate-dev"
)

// devWeb is the development OpenID provider `tollgate dev` starts when the configuration
// names no provider, and the demo user's credentials.
type devWeb struct {
	provider *devoidc.Provider
	appURL   string
	password string
}

// Close stops the provider.
func (d *devWeb) Close() {
	if d != nil && d.provider != nil {
		_ = d.provider.Close()
	}
}

func randomSecret() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// startDevWeb starts the development OpenID provider at listen (a loopback address;
// 127.0.0.1:0 takes a free port) with the demo user (a fresh password each run) and a client
// for the application at apiAddr (named as devBaseURL names it), points cfg.Web at it, and
// makes the demo user an owner of the demo account. With a provider configured it does nothing.
func startDevWeb(ctx context.Context, cfg *config.Config, st *store.Store, apiAddr, listen string, log *slog.Logger) (*devWeb, error) {
	if cfg.Web.Enabled() {
		return nil, nil
	}
	password, err := randomSecret()
	if err != nil {
		return nil, err
	}
	secret, err := randomSecret()
	if err != nil {
		return nil, err
	}
	appURL := devBaseURL(apiAddr)
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p, err := devoidc.Serve(ln, devoidc.Options{
		Users: []devoidc.User{{Subject: "demo", Email: devUserEmail, Name: "Demo User", Password: password}},
		Clients: []devoidc.Client{{ID: devClientID, Secret: secret,
			RedirectURIs: []string{appURL + "/auth/callback"}, PostLogoutRedirectURIs: []string{appURL + "/"}}},
		Logger: log,
	})
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("development OpenID provider: %w", err)
	}
	d := &devWeb{provider: p, appURL: appURL, password: password}
	cfg.Web.Issuer, cfg.Web.ClientID, cfg.Web.ClientSecret = p.Issuer(), devClientID, secret
	cfg.Web.PublicURL, cfg.Web.RedirectURL = appURL+"/", appURL+"/auth/callback"
	cfg.Web.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		d.Close()
		return nil, err
	}
	acct, err := st.GetAccountByName(ctx, "demo")
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("demo account: %w", err)
	}
	if _, err := (members.New(st, nil)).Add(ctx, acct.ID, devUserEmail, members.RoleOwner); err != nil {
		d.Close()
		return nil, fmt.Errorf("demo member: %w", err)
	}
	log.Info("development OpenID provider (development only: tollgate serve never starts it)", "issuer", p.Issuer())
	return d, nil
}

// redirectsToPublicURL says whether the web application sends a visit to "/" or /signin… at
// another host (127.0.0.1 for localhost) to its public URL: with the development provider,
// whose client knows only that URL's callback; never in serve, where a proxy that rewrites
// Host would make it loop.
func (d *devWeb) redirectsToPublicURL() bool { return d != nil }

// banner is the web application's part of the dev banner.
func (d *devWeb) banner() string {
	if d == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("  Web application: " + d.appURL + "/\n")
	b.WriteString("    (its cookies belong to this host name: a visit to / or /signin at another one,\n")
	b.WriteString("     127.0.0.1 for instance, is sent here; other pages must be opened here)\n")
	b.WriteString("    sign in as " + devUserEmail + " with the password " + d.password + "\n")
	b.WriteString("    (at the development OpenID provider " + d.provider.Issuer() + ": development only,\n")
	b.WriteString("     a new password each run; tollgate serve never starts it)\n\n")
	return b.String()
}
