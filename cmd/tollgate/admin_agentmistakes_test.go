package main

import (
	"testing"
)

// TestAdminAgentCommandMistakes (operator trial h10): a mistake in an agent command's line is a
// usage error (exit status 2) that says what is wrong, as a bad key id or -cap-period is.
// Before, `approval list -state aproved` printed "no aproved approvals" with status 0 (any
// -state was taken, and matched nothing), `ticket list -state bogus` ended with status 1, and
// `ticket close nope` and `approval deny nope` said "not found" with status 1, naming nothing
// to look ids up with.
func TestAdminAgentCommandMistakes(t *testing.T) {
	t.Setenv("DATABASE_URL", migratedDatabase(t))
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	for line, want := range map[string]string{
		"approval list -state aproved":      `-state "aproved": 'state' is pending, approved, denied, expired, cancelled or all`,
		"approval list acme -state bogus":   `-state "bogus": 'state' is pending, approved, denied, expired, cancelled or all`,
		"ticket list -state bogus":          `-state "bogus": 'state' is open, closed or all`,
		"ticket close nope":                 `"nope" is not an id (see 'admin ticket list' for the tickets)`,
		"approval deny nope":                `"nope" is not an id (see 'admin approval list' for the approvals)`,
		"approval approve 12345678-1234-12": `"12345678-1234-12" is not an id (see 'admin approval list' for the approvals)`,
	} {
		out, err := adminRun(t, line)
		if exitStatus(err) != 2 || err.Error() != want {
			t.Errorf("admin %s: %v (exit status %d, output %q), want a usage error %q", line, err, exitStatus(err), out, want)
		}
	}
	for _, line := range []string{"approval list -state all", "approval list acme -state denied", "ticket list -state closed"} {
		mustAdmin(t, line)
	}
}
