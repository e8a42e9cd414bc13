package main

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/audit"
)

// TestAdminMembers: the operator adds members by e-mail (before they ever sign in), lists
// them with their roles, changes a role by adding again, and removes them; each change is in
// the account's audit log.
func TestAdminMembers(t *testing.T) {
	t.Setenv("DATABASE_URL", migratedDatabase(t))
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	if out := mustAdmin(t, "member add acme alice@example.com -role owner"); !strings.Contains(out, "alice@example.com is an owner of account acme") {
		t.Fatalf("member add: %s", out)
	}
	mustAdmin(t, "member add acme Bob@Example.com")
	list := mustAdmin(t, "member list acme")
	if !strings.Contains(list, "alice@example.com  owner") || !strings.Contains(list, "Bob@Example.com    member") || !strings.Contains(list, "never") {
		t.Fatalf("member list:\n%s", list)
	}
	mustAdmin(t, "member add acme bob@example.com -role owner") // the same person, without case
	if list := mustAdmin(t, "member list acme"); strings.Count(list, "owner") != 2 || strings.Count(list, "\n") != 3 {
		t.Fatalf("after the role change:\n%s", list)
	}
	if _, err := adminRun(t, "member add acme carol@example.com -role admin"); err == nil {
		t.Fatal("role admin accepted")
	}
	if _, err := adminRun(t, "member add acme not-an-address"); err == nil {
		t.Fatal("a name without @ accepted")
	}
	if out := mustAdmin(t, "member remove acme alice@example.com -yes"); !strings.Contains(out, "no longer a member") {
		t.Fatalf("member remove: %s", out)
	}
	if _, err := adminRun(t, "member remove acme alice@example.com -yes"); err == nil || !strings.Contains(err.Error(), "not a member") {
		t.Fatalf("removing again: %v", err)
	}
	if list := mustAdmin(t, "member list acme"); strings.Contains(list, "alice") {
		t.Fatalf("alice still listed:\n%s", list)
	}
}

// TestMemberRemovalRevokesTheirKeys: removing a member revokes the keys they made in the
// account on the console (each audited, each named in the output), and leaves the operator's
// keys and other members' keys working; -keep-keys leaves the member's keys working. Before,
// every key of a removed member kept working: the person who left took working keys along.
func TestMemberRemovalRevokesTheirKeys(t *testing.T) {
	st, acct, svc := acmeWithAliceAndBob(t)
	ctx := context.Background()
	keyOf := func(email, name string) store.APIKey {
		t.Helper()
		u, err := st.GetUserByEmail(ctx, email)
		if err != nil {
			t.Fatal(err)
		}
		k, err := svc.CreateKeyWith(ctx, acct.ID, accounts.KeyOptions{Name: name, RPM: -1, CreatedBy: email, CreatedByUser: u.ID})
		if err != nil {
			t.Fatal(err)
		}
		return k.Key
	}
	alice1, alice2, bob := keyOf("alice@example.com", "alice-ci"), keyOf("alice@example.com", "alice-laptop"), keyOf("bob@example.com", "bob-ci")
	operator, err := svc.CreateKeyWith(ctx, acct.ID, accounts.KeyOptions{Name: "service", RPM: -1})
	if err != nil {
		t.Fatal(err)
	}
	revoked := func(k store.APIKey) bool {
		t.Helper()
		got, err := st.GetAPIKey(ctx, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.RevokedAt != nil
	}

	out := mustAdmin(t, "member remove acme alice@example.com -yes")
	if !strings.Contains(out, "no longer a member") || !strings.Contains(out, `"alice-ci"`) || !strings.Contains(out, `"alice-laptop"`) {
		t.Errorf("member remove: %s", out)
	}
	if !revoked(alice1) || !revoked(alice2) || revoked(bob) || revoked(operator.Key) {
		t.Errorf("after removing alice: her keys revoked %v %v, bob's %v, the operator's %v; want true true false false",
			revoked(alice1), revoked(alice2), revoked(bob), revoked(operator.Key))
	}
	entries, err := (&audit.Log{Store: st}).List(ctx, acct.ID, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	audited := 0
	for _, e := range entries {
		if e.Action == audit.ActionKeyRevoked && (strings.Contains(e.Target, alice1.ID.String()) || strings.Contains(e.Target, alice2.ID.String())) {
			audited++
		}
	}
	if audited != 2 {
		t.Errorf("%d key revocations audited, want 2", audited)
	}

	if out := mustAdmin(t, "member remove acme bob@example.com -keep-keys -yes"); !strings.Contains(out, "no longer a member") || strings.Contains(out, "revoked") {
		t.Errorf("member remove -keep-keys: %s", out)
	}
	if revoked(bob) {
		t.Error("-keep-keys revoked bob's key")
	}
}

// TestMemberRemovalEndsTheirAgentSessions: `member remove` ends the agent sessions the person
// started on the console in the account (member_removed) in the removal's transaction, as the
// console's removal does, and leaves another member's session and a key's session alone. No
// job runner runs here, so the sessions stay provisioning until something ends them: the
// removed member's is stopped when the command returns. Before, the command did not touch
// the sessions: they ran on until a step found the member gone, and a session waiting for a
// message never did.
func TestMemberRemovalEndsTheirAgentSessions(t *testing.T) {
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	mustAdmin(t, "member add acme alice@example.com")
	mustAdmin(t, "member add acme bob@example.com")
	for _, slot := range []string{"alice", "bob", "keyed"} {
		mustAdmin(t, "slot assign acme "+slot)
	}
	ctx := context.Background()
	st, acct := openAccount(t, url, "acme")
	agents, err := agent.New(agent.Options{Store: st, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	console := auth.Principal{AccountID: acct.ID}
	spawn := func(email, slot string) string {
		t.Helper()
		u, err := st.GetUserByEmail(ctx, email)
		if err != nil {
			t.Fatal(err)
		}
		res, err := agents.SpawnForMember(ctx, console, u.ID, slot, "Say hello.")
		if err != nil {
			t.Fatal(err)
		}
		return res.SessionID
	}
	alice, bob := spawn("alice@example.com", "alice"), spawn("bob@example.com", "bob")
	key, err := (&accounts.Service{Store: st, Config: config.Default()}).CreateKey(ctx, acct.ID, "service", 0)
	if err != nil {
		t.Fatal(err)
	}
	keyed, err := agents.Spawn(ctx, auth.Principal{AccountID: acct.ID, KeyID: key.Key.ID}, "keyed", "Say hello.", "")
	if err != nil {
		t.Fatal(err)
	}

	mustAdmin(t, "member remove acme alice@example.com -yes")
	list, err := agents.Sessions(ctx, console)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{alice: agent.StateStopped + " " + agent.ReasonMemberRemoved,
		bob: agent.StateProvisioning + " ", keyed.SessionID: agent.StateProvisioning + " "}
	for _, s := range list {
		if got := s.State + " " + s.EndReason; got != want[s.ID] {
			t.Errorf("session %s (slot %s) is %q after alice's removal, want %q", s.ID, s.Slot, got, want[s.ID])
		}
	}
	if len(list) != len(want) {
		t.Errorf("%d sessions, want %d", len(list), len(want))
	}
}

// TestKeyRevocationEndsItsAgentSessions: `key revoke` ends the agent sessions started with the
// key (key_revoked) in the revocation's transaction, as the console's Keys page does, and
// leaves another key's session alone; `key revoke-all` then ends that one too. No job runner
// runs here, so the sessions stay provisioning until something ends them. Before, the command
// did not touch the sessions: they ran on until a step found the key revoked, and a session
// waiting for a message never did.
func TestKeyRevocationEndsItsAgentSessions(t *testing.T) {
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	for _, slot := range []string{"first", "second"} {
		mustAdmin(t, "slot assign acme "+slot)
	}
	ctx := context.Background()
	st, acct := openAccount(t, url, "acme")
	agents, err := agent.New(agent.Options{Store: st, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	spawn := func(slot string) string {
		t.Helper()
		key, err := (&accounts.Service{Store: st, Config: config.Default()}).CreateKey(ctx, acct.ID, slot, 0)
		if err != nil {
			t.Fatal(err)
		}
		res, err := agents.Spawn(ctx, auth.Principal{AccountID: acct.ID, KeyID: key.Key.ID}, slot, "Say hello.", "")
		if err != nil {
			t.Fatal(err)
		}
		return key.Key.ID.String() + " " + res.SessionID
	}
	first, second := strings.Fields(spawn("first")), strings.Fields(spawn("second"))
	check := func(after string, want map[string]string) {
		t.Helper()
		list, err := agents.Sessions(ctx, auth.Principal{AccountID: acct.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if got := s.State + " " + s.EndReason; got != want[s.ID] {
				t.Errorf("session %s (slot %s) is %q after %s, want %q", s.ID, s.Slot, got, after, want[s.ID])
			}
		}
	}

	mustAdmin(t, "key revoke "+first[0]+" -yes")
	check("key revoke", map[string]string{first[1]: agent.StateStopped + " " + agent.ReasonKeyRevoked,
		second[1]: agent.StateProvisioning + " "})
	mustAdmin(t, "key revoke-all acme -yes")
	check("key revoke-all", map[string]string{first[1]: agent.StateStopped + " " + agent.ReasonKeyRevoked,
		second[1]: agent.StateStopped + " " + agent.ReasonKeyRevoked})
}

// TestKeyDisableEndsItsAgentSessions: `tollgate admin key disable` ends the agent sessions
// started with the key (key_disabled), as the console's Disable does, and leaves another
// key's; `key enable` revives none. Before, a disabled key's session waiting for a message
// kept its slot until a message or its maximum duration came.
func TestKeyDisableEndsItsAgentSessions(t *testing.T) {
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	for _, slot := range []string{"first", "second"} {
		mustAdmin(t, "slot assign acme "+slot)
	}
	ctx := context.Background()
	st, acct := openAccount(t, url, "acme")
	agents, err := agent.New(agent.Options{Store: st, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	var keys, sessions []string
	for _, slot := range []string{"first", "second"} {
		key, err := (&accounts.Service{Store: st, Config: config.Default()}).CreateKey(ctx, acct.ID, slot, 0)
		if err != nil {
			t.Fatal(err)
		}
		res, err := agents.Spawn(ctx, auth.Principal{AccountID: acct.ID, KeyID: key.Key.ID}, slot, "Say hello.", "")
		if err != nil {
			t.Fatal(err)
		}
		keys, sessions = append(keys, key.Key.ID.String()), append(sessions, res.SessionID)
	}
	want := map[string]string{sessions[0]: agent.StateStopped + " " + agent.ReasonKeyDisabled, sessions[1]: agent.StateProvisioning + " "}
	for _, cmd := range []string{"key disable " + keys[0], "key enable " + keys[0]} {
		mustAdmin(t, cmd)
		list, err := agents.Sessions(ctx, auth.Principal{AccountID: acct.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if got := s.State + " " + s.EndReason; got != want[s.ID] {
				t.Errorf("session %s (slot %s) is %q after %s, want %q", s.ID, s.Slot, got, cmd, want[s.ID])
			}
		}
	}
}

// TestAdminSaysWhenEndingsAreLeftToTheSweep: when the database refuses to end the agent
// sessions of a `member remove` or a `key revoke` (a trigger in the test's PostgreSQL), the
// revocation stands and the command says on stderr that the gateway's sweep of lapsed sessions
// will end them, how many they are (one each: sessions=1) and within how long; its output is
// the removal's and the revocation's alone. Before, the command's agent service logged errors
// only, and the operator was told nothing; then it was told neither how many.
func TestAdminSaysWhenEndingsAreLeftToTheSweep(t *testing.T) {
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	mustAdmin(t, "member add acme alice@example.com")
	mustAdmin(t, "slot assign acme alice")
	mustAdmin(t, "slot assign acme keyed")
	ctx := context.Background()
	st, acct := openAccount(t, url, "acme")
	agents, err := agent.New(agent.Options{Store: st, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	console := auth.Principal{AccountID: acct.ID}
	alice, err := st.GetUserByEmail(ctx, "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agents.SpawnForMember(ctx, console, alice.ID, "alice", "Say hello."); err != nil {
		t.Fatal(err)
	}
	key, err := (&accounts.Service{Store: st, Config: config.Default()}).CreateKey(ctx, acct.ID, "service", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agents.Spawn(ctx, auth.Principal{AccountID: acct.ID, KeyID: key.Key.ID}, "keyed", "Say hello.", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `
CREATE FUNCTION test_refuse_ending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the test refuses to change the state of agent session %', OLD.id; END $$;
CREATE TRIGGER test_refuse_ending BEFORE UPDATE ON agent_sessions FOR EACH ROW
WHEN (NEW.state IS DISTINCT FROM OLD.state) EXECUTE FUNCTION test_refuse_ending();`); err != nil {
		t.Fatal(err)
	}

	for _, line := range []string{"member remove acme alice@example.com -yes", "key revoke " + key.Key.ID.String() + " -yes"} {
		out, notes, err := adminRunIO(t, line, "")
		if err != nil {
			t.Fatalf("admin %s, the endings refused: %v\n%s", line, err, notes)
		}
		if !strings.Contains(notes, "level=WARN") || !strings.Contains(notes, "sweep of lapsed sessions will end them") ||
			!strings.Contains(notes, "within=1m0s") || !strings.Contains(notes, "the test refuses") || !strings.Contains(notes, " sessions=1 ") {
			t.Errorf("admin %s's stderr does not say the endings were left to the sweep:\n%s", line, notes)
		}
		if strings.Contains(out, "sweep") {
			t.Errorf("admin %s's output carries the warning:\n%s", line, out)
		}
	}
	list, err := agents.Sessions(ctx, console)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.State != agent.StateProvisioning {
			t.Errorf("session %s (slot %s) is %s while the database refuses its ending, want provisioning", s.ID, s.Slot, s.State)
		}
	}
}

// acmeWithAliceAndBob makes the account acme on plan demo with the members alice@example.com
// and bob@example.com through the admin command, on a throwaway database DATABASE_URL names:
// its store, the account, and an accounts service over them for the test's own keys.
func acmeWithAliceAndBob(t *testing.T) (*store.Store, store.Account, *accounts.Service) {
	t.Helper()
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	mustAdmin(t, "member add acme alice@example.com")
	mustAdmin(t, "member add acme bob@example.com")
	st, acct := openAccount(t, url, "acme")
	return st, acct, &accounts.Service{Store: st, Config: config.Default()}
}
