package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestAdminKeyQuota: with the built-in plan's key quota of 20, key create makes 20 keys and
// refuses the 21st naming max_keys; key list says "keys: 20 of 20"; a revoked key makes room.
func TestAdminKeyQuota(t *testing.T) {
	t.Setenv("DATABASE_URL", migratedDatabase(t))
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan default")
	var first string
	for i := range 20 {
		out := mustAdmin(t, fmt.Sprintf("key create acme -name k%d", i))
		if i == 0 {
			first = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`).FindString(out)
		}
	}
	if _, err := adminRun(t, "key create acme -name k20"); err == nil ||
		!strings.Contains(err.Error(), "max_keys") || !strings.Contains(err.Error(), "at most 20 keys") {
		t.Fatalf("the 21st key: %v, want a refusal naming max_keys and the quota", err)
	}
	if list := mustAdmin(t, "key list acme"); !strings.Contains(list, "keys: 20 of 20 (max_keys of plan default") {
		t.Fatalf("key list does not show the quota:\n%s", list)
	}
	mustAdmin(t, "key revoke "+first+" -yes")
	mustAdmin(t, "key create acme -name after-revoke")
	if list := mustAdmin(t, "key list acme"); !strings.Contains(list, "keys: 20 of 20") {
		t.Fatalf("key list after a revoke and a create:\n%s", list)
	}
}
