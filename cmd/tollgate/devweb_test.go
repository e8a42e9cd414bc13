//go:build dev

package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/storetest"
	"github.com/tollgate/tollgate/impl/web/members"
)

// TestDevWeb: dev's sign-in points the web configuration at a development provider on
// 127.0.0.1, at the address given (-dev-oidc-listen), with a client for the application on localhost, makes the demo user an owner of
// the demo account, and prints the URL and the credentials; with a provider configured it
// starts nothing.
func TestDevWeb(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t)
	cfg := config.Default()
	if _, err := seedDemo(ctx, &accounts.Service{Store: st, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	oidcAddr := freeAddr() // -dev-oidc-listen
	d, err := startDevWeb(ctx, cfg, st, "[::]:8080", oidcAddr, log)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !strings.HasPrefix(cfg.Web.Issuer, "http://"+oidcAddr) || cfg.Web.RedirectURL != "http://localhost:8080/auth/callback" ||
		cfg.Web.PublicURL != "http://localhost:8080/" || cfg.Web.ClientSecret == "" {
		t.Fatalf("web configuration: %+v", cfg.Web)
	}
	banner := d.banner()
	for _, want := range []string{"http://localhost:8080/", devUserEmail, d.password, "development only"} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}
	demo, err := st.GetAccountByName(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	list, err := (members.New(st, nil)).List(ctx, demo.ID)
	if err != nil || len(list) != 1 || list[0].Email != devUserEmail || list[0].Role != members.RoleOwner {
		t.Fatalf("demo members: %+v %v", list, err)
	}
	again, err := startDevWeb(ctx, cfg, st, "[::]:8080", "127.0.0.1:0", log)
	if err != nil || again != nil {
		t.Fatalf("with a provider configured: %v %v", again, err)
	}
	for addr, want := range map[string]string{"127.0.0.1:18080": "http://localhost:18080", "0.0.0.0:80": "http://localhost:80", "10.1.2.3:8080": "http://10.1.2.3:8080"} {
		if got := devBaseURL(addr); got != want {
			t.Errorf("devBaseURL(%s) = %s, want %s", addr, got, want)
		}
	}
}
