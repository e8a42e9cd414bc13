package main

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/apikey"
)

// TestAdminKeyCreateNamesItsNamesakes: a key made with the name of another key of the account
// that is not revoked (a rotation's new ci beside the old, or a mistake) is made, and the
// command says on stderr which keys have the name, by id and last four, whatever their letter
// case; its output (-quiet: the key alone) is unchanged. A revoked key, another account's key
// and a key without a name are not named. Before, nothing was said, and two keys named ci were
// told apart in key list by their last four only.
func TestAdminKeyCreateNamesItsNamesakes(t *testing.T) {
	t.Setenv("DATABASE_URL", migratedDatabase(t))
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	mustAdmin(t, "account create rival -plan demo")
	mustAdmin(t, "key create rival -name ci -quiet")
	create := func(line string) (string, string) {
		t.Helper()
		out, notes, err := adminRunIO(t, line, "")
		if err != nil {
			t.Fatalf("admin %s: %v\n%s", line, err, notes)
		}
		key := strings.TrimSpace(out)
		if _, err := apikey.Parse(key); err != nil || key+"\n" != out {
			t.Fatalf("admin %s printed %q, want the key alone: %v", line, out, err)
		}
		return key[len(key)-4:], notes
	}
	first, notes := create("key create acme -name ci -quiet")
	if notes != "" {
		t.Errorf("the account's first ci: stderr %q", notes)
	}
	second, notes := create("key create acme -name ci -quiet")
	if !strings.Contains(notes, `note: account acme has 1 other key(s) named "ci" that are not revoked`) ||
		!strings.Contains(notes, "…"+first+")") || !strings.Contains(notes, "ends "+second) {
		t.Errorf("the second ci: stderr %q, want the first named (…%s) and the new key's last four %s", notes, first, second)
	}
	if _, notes := create("key create acme -name CI -quiet"); !strings.Contains(notes, "2 other key(s)") ||
		!strings.Contains(notes, "…"+first+")") || !strings.Contains(notes, "…"+second+")") {
		t.Errorf("CI beside two ci: stderr %q", notes)
	}
	if _, notes := create("key create acme -quiet"); notes != "" {
		t.Errorf("a key without a name: stderr %q", notes)
	}
	if _, notes := create("key create acme -name deploy -quiet"); notes != "" {
		t.Errorf("a key named deploy: stderr %q", notes)
	}
	list := mustAdmin(t, "key list acme")
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, "…"+first) {
			mustAdmin(t, "key revoke "+strings.Fields(line)[0]+" -yes")
		}
	}
	if _, notes := create("key create acme -name deploy -quiet"); strings.Contains(notes, first) || !strings.Contains(notes, "1 other key(s)") {
		t.Errorf("deploy again: stderr %q", notes)
	}
	if _, notes := create("key create acme -name ci -quiet"); strings.Contains(notes, first) || !strings.Contains(notes, "2 other key(s)") {
		t.Errorf("ci after the first ci's revocation: stderr %q, want the revoked key left out", notes)
	}
}
