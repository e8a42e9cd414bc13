package main

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/pgcluster"
)

// TestDevBannerSaysWhereTheClusterIs: the banner names the local cluster's data directory, and
// why it is outside the checkout when it is; with DATABASE_URL it names none.
func TestDevBannerSaysWhereTheClusterIs(t *testing.T) {
	inCheckout := devBanner("127.0.0.1:8080", "tgk_x", pgcluster.Location{DataDir: "/src/tollgate/.data/postgres"})
	if !strings.Contains(inCheckout, "Local PostgreSQL cluster: /src/tollgate/.data/postgres\n") || strings.Contains(inCheckout, "here because") {
		t.Errorf("cluster in the checkout:\n%s", inCheckout)
	}
	moved := devBanner("127.0.0.1:8080", "", pgcluster.Location{DataDir: "/var/tmp/tollgate-0123456789ab/postgres",
		SocketDir: "/var/tmp/tollgate-0123456789ab/socket", Moved: true, Reason: "the postgres OS user cannot search /root (mode -rwx------)"})
	for _, want := range []string{"Local PostgreSQL cluster: /var/tmp/tollgate-0123456789ab/postgres\n",
		"(here because the postgres OS user cannot search /root (mode -rwx------);"} {
		if !strings.Contains(moved, want) {
			t.Errorf("moved cluster: no %q in\n%s", want, moved)
		}
	}
	if remote := devBanner("127.0.0.1:8080", "tgk_x", pgcluster.Location{}); strings.Contains(remote, "PostgreSQL") {
		t.Errorf("DATABASE_URL:\n%s", remote)
	}
}

// TestDevBannerNamesLocalhostAndMCP: the banner's URLs say localhost, as the console and its
// OAuth issuer do (an MCP client signing in with OAuth compares them: trial h6), and it names
// the MCP endpoint.
func TestDevBannerNamesLocalhostAndMCP(t *testing.T) {
	b := devBanner("127.0.0.1:18881", "tgk_x", pgcluster.Location{})
	if strings.Contains(b, "127.0.0.1") || !strings.Contains(b, "curl -s http://localhost:18881/v1/models") ||
		!strings.Contains(b, "MCP: http://localhost:18881/api/mcp") {
		t.Errorf("banner:\n%s", b)
	}
}
