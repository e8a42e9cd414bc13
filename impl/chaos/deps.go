package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/impl/pgcluster"
)

// postgres is the run's own PostgreSQL cluster, which the run stops and starts again: the same
// data directory and socket, so the replicas' connection string stays valid across the outage.
type postgres struct {
	dataDir, socketDir string
	cluster            *pgcluster.Cluster
	logf               func(string, ...any)
}

// startPostgres initialises and starts a cluster under root and creates the database tollgate.
func startPostgres(ctx context.Context, root string, logf func(string, ...any)) (*postgres, error) {
	p := &postgres{dataDir: filepath.Join(root, "pg"), socketDir: filepath.Join(root, "s"), logf: logf}
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	if err := p.cluster.CreateDatabase(ctx, "tollgate"); err != nil {
		_ = p.stop(ctx)
		return nil, err
	}
	return p, nil
}

func (p *postgres) start(ctx context.Context) error {
	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: p.dataDir, SocketDir: p.socketDir, Logf: p.logf})
	if err != nil {
		return err
	}
	p.cluster = c
	return nil
}

func (p *postgres) stop(ctx context.Context) error { return p.cluster.Stop(ctx) }

// url is the connection string of the database tollgate.
func (p *postgres) url() string { return p.cluster.ConnString("tollgate") }

// redisServer is a redis-server on a loopback port, stopped with SIGKILL (nothing is saved)
// and started again on the same port.
type redisServer struct {
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// startRedis starts redis-server (found on PATH) on a free loopback port.
func startRedis(root string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("chaos: redis-server is not installed (apt-get install redis-server)")
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &redisServer{bin: bin, port: port, dir: filepath.Join(root, "redis")}
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return nil, err
	}
	return r, r.start()
}

func (r *redisServer) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

func (r *redisServer) start() error {
	cmd := exec.Command(r.bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", r.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	r.cmd, r.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(r.done)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if redisAnswers(r.port) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.stop()
	return errors.New("chaos: redis-server did not answer PING")
}

func (r *redisServer) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
}

// redisAnswers reports whether a Redis server on port answers PING.
func redisAnswers(port int) bool {
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.Ping(ctx).Err() == nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
