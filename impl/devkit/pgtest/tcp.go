package pgtest

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tollgate/tollgate/impl/pgcluster"
)

// OnAddress starts a PostgreSQL cluster of the calling test's own that also listens over TCP,
// on host (an address of this machine, such as the bridge address of a test network) at a port
// that was free there, and lets in, without a password, the clients whose address is in clients
// (besides local ones). It returns the connection string, over TCP, of an empty database of
// the cluster, and stops the cluster and deletes its directories when the test ends. Like
// NewOutage it is a separate cluster from the shared one, started from the installed binaries
// even when TEST_DATABASE_URL names a server; with no binaries the test is skipped, or fails
// when CI is "true". The shared cluster keeps listening on its Unix socket only.
func OnAddress(t testing.TB, host netip.Addr, clients netip.Prefix) string {
	t.Helper()
	dataDir, err := os.MkdirTemp("", "pgtcp")
	if err != nil {
		t.Fatal(err)
	}
	// The server runs as the postgres OS user when the test is root: its pg_hba.conf must be
	// in a directory that user can read.
	hbaDir, err := os.MkdirTemp("", "pghba")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.RemoveAll(dataDir)
		_ = os.RemoveAll(hbaDir)
	})
	hba := filepath.Join(hbaDir, "pg_hba.conf")
	rules := "local all all trust\n" +
		"host all all 127.0.0.1/32 trust\n" +
		"host all all " + clients.Masked().String() + " trust\n"
	if err := os.WriteFile(hba, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(hbaDir, 0o755); err != nil {
		t.Fatal(err)
	}

	// The port names the Unix socket too, in a socket directory of the cluster's own.
	l, err := net.Listen("tcp", net.JoinHostPort(host.String(), "0"))
	if err != nil {
		t.Fatalf("pgtest: a free port on %s: %v", host, err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{
		DataDir:   dataDir,
		Port:      port,
		Ephemeral: true,
		Settings: map[string]string{
			"shared_buffers":   "32MB",
			"listen_addresses": host.String(),
			"hba_file":         hba,
		},
		Logf: t.Logf,
	})
	if err != nil {
		if errors.Is(err, pgcluster.ErrNotInstalled) && os.Getenv("CI") != "true" {
			t.Skipf("pgtest: %v", err)
		}
		t.Fatalf("pgtest: start a cluster on %s: %v", host, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := cluster.Stop(ctx); err != nil {
			t.Errorf("pgtest: stop the cluster on %s: %v", host, err)
		}
	})
	if err := cluster.CreateDatabase(ctx, outageDatabase); err != nil {
		t.Fatal(err)
	}
	return "host=" + host.String() + " port=" + strconv.Itoa(cluster.Port()) +
		" user=" + pgcluster.Superuser + " dbname=" + outageDatabase + " sslmode=disable"
}
