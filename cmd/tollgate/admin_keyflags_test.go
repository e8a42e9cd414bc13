package main

import (
	"strings"
	"testing"
)

// TestAdminKeyCreateRefusesNegativeLimits (operator trial h1): `key create -rpm -5` made a key
// with the plan's default cap and `-credit-cap -5` one with no credit cap, silently, where
// `key set-rpm` and `key set-cap` refuse such a number; -1 (the plan's default, no cap) and 0
// are taken as before. A refused creation makes no key.
func TestAdminKeyCreateRefusesNegativeLimits(t *testing.T) {
	t.Setenv("DATABASE_URL", migratedDatabase(t))
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	for line, want := range map[string]string{
		"key create acme -rpm -5":        "-rpm",
		"key create acme -credit-cap -5": "-credit-cap",
		"key create acme -credit-cap -2": "-credit-cap",
		// Dollars are refused with the micro-units to give (the flag package said "parse error").
		"key create acme -credit-cap 0.5":    "for $0.5 give 500000",
		"key create acme -credit-cap $12.25": "for $12.25 give 12250000",
		"key create acme -credit-cap lots":   "not an integer number of micro-units",
	} {
		out, err := adminRun(t, line)
		if err == nil || !strings.Contains(err.Error(), want) || exitStatus(err) != 2 {
			t.Errorf("%s: %v (exit status %d), want a usage error naming %s\n%s", line, err, exitStatus(err), want, out)
		}
	}
	if out := mustAdmin(t, "key list acme"); strings.Contains(out, "tgk_") {
		t.Fatalf("a refused creation made a key:\n%s", out)
	}
	mustAdmin(t, "key create acme -rpm -1 -credit-cap -1")
	mustAdmin(t, "key create acme -rpm 0 -credit-cap 0")
	mustAdmin(t, "key create acme -credit-cap 1_500_000")
	if out := mustAdmin(t, "key list acme"); strings.Count(out, "tgk_") != 3 || !strings.Contains(out, "1500000") {
		t.Fatalf("-1, 0 and 1_500_000 are no longer taken:\n%s", out)
	}
}
