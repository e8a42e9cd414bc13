package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/apikey"
)

// TestAdminKeyLimits: key create with every limit, key list showing them, disable and enable,
// set-cap, the refusals of options that cannot be used (naming the flag), and revoke-all.
func TestAdminKeyLimits(t *testing.T) {
	t.Setenv("DATABASE_URL", migratedDatabase(t))
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")

	key := strings.TrimSpace(mustAdmin(t, "key create acme -name bot -rpm 30 -expires 30d -credit-cap 2500000 -cap-period daily -models service-flint,service-sonnet -quiet"))
	if _, err := apikey.Parse(key); err != nil {
		t.Fatalf("key create printed %q: %v", key, err)
	}
	out := mustAdmin(t, "key create acme -name until -expires 2099-01-01")
	if !strings.Contains(out, "expires 2099-01-01T00:00:00Z") {
		t.Fatalf("key create with a date: %s", out)
	}
	list := mustAdmin(t, "key list acme")
	for _, want := range []string{"STATUS", "CREDIT_CAP", "SPENT_THIS_PERIOD", "CREATED_BY", "bot", "active", " 30 ", "2500000", "daily",
		"service-flint,service-sonnet", "operator", time.Now().Add(30 * 24 * time.Hour).UTC().Format("2006-01-02")} {
		if !strings.Contains(list, want) {
			t.Errorf("key list lacks %q:\n%s", want, list)
		}
	}
	if strings.Contains(list, key) {
		t.Fatalf("key list shows the key itself:\n%s", list)
	}
	id := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`).FindString(list)

	if out := mustAdmin(t, "key disable "+id); !strings.Contains(out, "disabled") {
		t.Fatalf("disable: %s", out)
	}
	if list := mustAdmin(t, "key list acme"); !strings.Contains(list, "disabled") {
		t.Fatalf("key list after disable:\n%s", list)
	}
	if out := mustAdmin(t, "key enable "+id); !strings.Contains(out, "enabled") {
		t.Fatalf("enable: %s", out)
	}
	if out := mustAdmin(t, "key set-cap "+id+" 1000 -cap-period monthly"); !strings.Contains(out, "credit cap 1000 micros a month") {
		t.Fatalf("set-cap: %s", out)
	}
	if out := mustAdmin(t, "key set-cap "+id+" -1"); !strings.Contains(out, "no credit cap") {
		t.Fatalf("set-cap -1: %s", out)
	}

	for line, want := range map[string]string{
		"key create acme -models no-such-model":            "-models: the account has no model",
		"key create acme -expires 2001-01-01":              "-expires: the expiry",
		"key create acme -expires soon":                    "-expires \"soon\"",
		"key create acme -cap-period weekly":               "-cap-period",
		"key create acme -cap-period daily":                "a cap period needs a credit cap",
		"key set-cap " + id + " 5 -cap-period hourly":      "-cap-period",
		"key disable 00000000-0000-0000-0000-000000000000": "not found",
	} {
		if _, err := adminRun(t, line); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("admin %s: %v, want an error with %q", line, err, want)
		}
	}

	if out := mustAdmin(t, "key revoke-all acme -yes"); !strings.Contains(out, "2 key(s) of account acme revoked") {
		t.Fatalf("revoke-all: %s", out)
	}
	if list := mustAdmin(t, "key list acme"); strings.Contains(list, "active") {
		t.Fatalf("key list after revoke-all:\n%s", list)
	}
	if _, err := adminRun(t, "key enable "+id); err == nil {
		t.Fatal("enabling a revoked key must fail")
	}
}
