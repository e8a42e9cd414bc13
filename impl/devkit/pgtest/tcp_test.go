package pgtest

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestOnAddressListensOverTCP: the cluster of OnAddress answers over TCP at the address it was
// given (127.0.0.2 here, another loopback address than the usual one), and its database is
// empty and usable.
func TestOnAddressListensOverTCP(t *testing.T) {
	host := netip.MustParseAddr("127.0.0.2")
	cs := OnAddress(t, host, netip.MustParsePrefix("127.0.0.0/8"))
	if !strings.Contains(cs, "host=127.0.0.2 ") {
		t.Fatalf("the connection string does not name the address: %s", cs)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var server string
	var tables int
	if err := conn.QueryRow(ctx, `SELECT host(inet_server_addr()),
		(SELECT count(*) FROM pg_tables WHERE schemaname = 'public')`).Scan(&server, &tables); err != nil {
		t.Fatal(err)
	}
	if server != host.String() || tables != 0 {
		t.Errorf("served from %q (want %s) with %d tables", server, host, tables)
	}
}
