package billing

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// dbRelay is a TCP relay between a store and the PostgreSQL server of a test database, which a
// test cuts to make the database go away for its client in a real way: Cut closes every relayed
// connection, and until Restore every new connection is accepted and closed at once, so the
// client's queries fail as they do when the server is gone (connection reset, unexpected EOF,
// failed to connect). LoseCommitAck makes the next COMMIT's answer go missing: the server
// commits, the relay drops its answer and closes the client's connection, as when a connection
// breaks at the worst moment. PartitionAtCommit makes the network between them go silent at
// the next COMMIT a client sends, as a partition does: nothing passes either way, no socket is
// closed on the other side, and the server is left waiting, until Heal.
type dbRelay struct {
	t      *testing.T
	ln     net.Listener
	dial   func() (net.Conn, error)
	connCS string

	mu       sync.Mutex
	cut      bool
	hung     bool
	conns    map[net.Conn]struct{}
	loseAck  bool
	lostAcks int
	// partitionArmed: the next COMMIT starts a partition; partitioned: one is under way.
	partitionArmed, partitioned bool
	wg                          sync.WaitGroup
}

// newRelay starts a relay to the database of connection string cs and returns it; ConnString
// reaches the database through it. It stops when the test ends.
func newRelay(t *testing.T, cs string) *dbRelay {
	t.Helper()
	cfg, err := pgconn.ParseConfig(cs)
	if err != nil {
		t.Fatal(err)
	}
	var dial func() (net.Conn, error)
	if strings.HasPrefix(cfg.Host, "/") {
		sock := filepath.Join(cfg.Host, ".s.PGSQL."+strconv.Itoa(int(cfg.Port)))
		dial = func() (net.Conn, error) { return net.Dial("unix", sock) }
	} else {
		addr := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
		dial = func() (net.Conn, error) { return net.Dial("tcp", addr) }
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &dbRelay{t: t, ln: ln, dial: dial, conns: make(map[net.Conn]struct{})}
	port := ln.Addr().(*net.TCPAddr).Port
	// The relay passes bytes through untouched, but TLS would hide the server's answers from
	// LoseCommitAck: the test connection goes in the clear.
	if strings.HasPrefix(cs, "postgres://") || strings.HasPrefix(cs, "postgresql://") {
		u, err := url.Parse(cs)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		q := u.Query()
		q.Set("sslmode", "disable")
		u.RawQuery = q.Encode()
		r.connCS = u.String()
	} else {
		r.connCS = fmt.Sprintf("%s host=127.0.0.1 port=%d sslmode=disable", cs, port)
	}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.close)
	return r
}

// ConnString reaches the database through the relay.
func (r *dbRelay) ConnString() string { return r.connCS }

// Cut makes the database unreachable: relayed connections are closed and new ones refused.
func (r *dbRelay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = true
	for c := range r.conns {
		c.Close()
	}
}

// Restore makes the database reachable again.
func (r *dbRelay) Restore() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = false
}

// Hang makes the database hang, as a stopped (SIGSTOP) server does: connections stay open, and
// no answer reaches a client (queries wait for their deadlines) until Unhang.
func (r *dbRelay) Hang() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hung = true
}

// Unhang lets the answers held back by Hang through.
func (r *dbRelay) Unhang() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hung = false
}

// waitUnhung waits while the relay hangs (and is not closed or cut).
func (r *dbRelay) waitUnhung() {
	for {
		r.mu.Lock()
		hung, cut := r.hung, r.cut
		r.mu.Unlock()
		if !hung || cut {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// LoseCommitAck makes the relay drop the answer to the next COMMIT the server acknowledges,
// and close that client connection.
func (r *dbRelay) LoseCommitAck() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loseAck = true
}

// LostAcks is how many COMMIT answers the relay dropped.
func (r *dbRelay) LostAcks() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lostAcks
}

// PartitionAtCommit makes the next COMMIT a client sends the start of a network partition: the
// COMMIT does not reach the server, whose backend is left idle in its transaction with its
// locks; from then on nothing passes in either direction, a client that closes its connection
// is not heard of by the server (nor the server's close by the client), and a new connection
// is accepted and answered nothing, until Heal.
func (r *dbRelay) PartitionAtCommit() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partitionArmed = true
}

// Partitioned reports whether a partition is under way.
func (r *dbRelay) Partitioned() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.partitioned
}

// Heal ends the partition: every connection that lived through it is reset (as the first
// packet across a healed network finds the other end gone), and new ones reach the server.
func (r *dbRelay) Heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partitioned, r.partitionArmed = false, false
	for c := range r.conns {
		c.Close()
	}
}

func (r *dbRelay) close() {
	r.ln.Close()
	r.Cut()
	r.wg.Wait()
}

func (r *dbRelay) accept() {
	defer r.wg.Done()
	for {
		client, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		cut, partitioned := r.cut, r.partitioned
		if partitioned {
			r.conns[client] = struct{}{}
		}
		r.mu.Unlock()
		if cut {
			client.Close()
			continue
		}
		if partitioned {
			// The connection reaches nobody: what the client sends is lost.
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				_, _ = io.Copy(io.Discard, client)
				r.drop(client)
			}()
			continue
		}
		server, err := r.dial()
		if err != nil {
			client.Close()
			continue
		}
		r.mu.Lock()
		if r.cut {
			r.mu.Unlock()
			client.Close()
			server.Close()
			continue
		}
		r.conns[client] = struct{}{}
		r.conns[server] = struct{}{}
		r.mu.Unlock()
		r.wg.Add(2)
		go func() {
			defer r.wg.Done()
			r.requests(client, server)
			r.dropUnlessPartitioned(client, server)
		}()
		go func() {
			defer r.wg.Done()
			r.answers(client, server)
			r.dropUnlessPartitioned(server, client)
		}()
	}
}

func (r *dbRelay) drop(conns ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(r.conns, c)
	}
}

// dropUnlessPartitioned closes both ends of a relayed connection whose end gone went away, or
// only that end while a partition is under way: its close does not reach the other side.
func (r *dbRelay) dropUnlessPartitioned(gone, other net.Conn) {
	if r.Partitioned() {
		r.drop(gone)
		return
	}
	r.drop(gone, other)
}

// requests relays the client's messages to the server one by one (the start-up message has no
// type byte; every one after it is a type byte and a length that counts itself), starting a
// partition at a COMMIT when PartitionAtCommit asked for it, and dropping every message during
// one.
func (r *dbRelay) requests(client, server net.Conn) {
	var length [4]byte
	if _, err := io.ReadFull(client, length[:]); err != nil {
		return
	}
	n := int(binary.BigEndian.Uint32(length[:]))
	if n < 4 {
		return
	}
	startup := make([]byte, n-4)
	if _, err := io.ReadFull(client, startup); err != nil {
		return
	}
	if _, err := server.Write(append(length[:], startup...)); err != nil {
		return
	}
	var head [5]byte
	for {
		if _, err := io.ReadFull(client, head[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(head[1:]))
		if n < 4 {
			return
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(client, body); err != nil {
			return
		}
		r.mu.Lock()
		if r.partitionArmed && head[0] == 'Q' && strings.EqualFold(string(body), "commit\x00") {
			r.partitionArmed, r.partitioned = false, true
		}
		partitioned := r.partitioned
		r.mu.Unlock()
		if partitioned {
			continue
		}
		if _, err := server.Write(append(head[:], body...)); err != nil {
			return
		}
	}
}

// answers relays the server's messages to the client one by one (every message after the
// start-up is a type byte and a length that counts itself), dropping a COMMIT's
// CommandComplete when LoseCommitAck asked for it.
func (r *dbRelay) answers(client, server net.Conn) {
	var head [5]byte
	for {
		if _, err := io.ReadFull(server, head[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(head[1:]))
		if n < 4 {
			return
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(server, body); err != nil {
			return
		}
		if head[0] == 'C' && string(body) == "COMMIT\x00" {
			r.mu.Lock()
			lose := r.loseAck
			if lose {
				r.loseAck = false
				r.lostAcks++
			}
			r.mu.Unlock()
			if lose {
				return
			}
		}
		r.waitUnhung()
		if r.Partitioned() {
			continue
		}
		if _, err := client.Write(append(head[:], body...)); err != nil {
			return
		}
	}
}
