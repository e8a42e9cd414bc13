package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// startTimeout bounds how long a started server may take to answer S3 requests.
const startTimeout = 90 * time.Second

// Region is the region the test servers claim.
const Region = "us-east-1"

// Options configure a test server.
type Options struct {
	// IP is the address the server binds and advertises (default 127.0.0.1); a multi-host test
	// gives an address its network namespaces reach.
	IP string
	// Bucket is the bucket created at start (default "tollgate-test").
	Bucket string
}

// Server is one SeaweedFS server (weed mini: master, volume, filer and S3 gateway in one
// process) with its data in a directory of the test's. It can be stopped, restarted on the
// same ports with the same data, and frozen.
type Server struct {
	bin, dir, ip, bucket string
	// sockDir holds the server's local sockets (a short path: a socket's is at most 107 bytes).
	sockDir              string
	accessKey, secretKey string
	ports                map[string]int
	logPath              string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	frozen bool
}

// Start starts a server for t, creates its bucket and stops it when t ends. It fails t if the
// weed binary cannot be built or the server does not come up; it never skips.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s, err := New(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateBucket(context.Background(), s.bucket); err != nil {
		t.Fatal(err)
	}
	return s
}

// New prepares a server whose data lives in dir, on free ports; Restart starts it. Start is
// what most tests want; New serves harnesses that are not tests (they must call Close).
func New(dir string, o Options) (*Server, error) {
	bin, err := BinaryPath()
	if err != nil {
		return nil, err
	}
	if o.IP == "" {
		o.IP = "127.0.0.1"
	}
	if o.Bucket == "" {
		o.Bucket = "tollgate-test"
	}
	s := &Server{bin: bin, dir: dir, ip: o.IP, bucket: o.Bucket, ports: map[string]int{},
		accessKey: "tg" + randomHex(9), secretKey: randomHex(20), logPath: filepath.Join(dir, "weed.log")}
	for _, name := range []string{"master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
		"filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc", "admin.port", "admin.port.grpc"} {
		p, err := freePort(o.IP)
		if err != nil {
			return nil, err
		}
		s.ports[name] = p
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	if s.sockDir, err = os.MkdirTemp("", "s3t"); err != nil {
		return nil, err
	}
	conf, _ := json.Marshal(map[string]any{"identities": []any{map[string]any{
		"name":        "tollgate",
		"credentials": []any{map[string]string{"accessKey": s.accessKey, "secretKey": s.secretKey}},
		"actions":     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}})
	if err := os.WriteFile(filepath.Join(dir, "s3.json"), conf, 0o600); err != nil {
		return nil, err
	}
	return s, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// The ports the server is given are drawn from [portLow, portHigh), below Linux's ephemeral
// range (32768 and up by default): a port the kernel picked for us there (port 0) can be taken
// by any outbound connection before weed binds it, which made weed exit at start now and then
// ("bind: address already in use") while the whole suite ran.
const (
	portLow  = 20000
	portHigh = 32000
)

// taken are the ports handed out by freePort in this process, never handed out twice.
var taken sync.Map

// freePort returns a TCP port below the ephemeral range that is free on ip right now and was
// not handed out before by this process.
func freePort(ip string) (int, error) {
	for range 200 {
		p := portLow + mrand.IntN(portHigh-portLow)
		if _, dup := taken.LoadOrStore(p, true); dup {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		return p, nil
	}
	return 0, fmt.Errorf("s3test: no free port in [%d, %d) on %s", portLow, portHigh, ip)
}

// Endpoint returns the S3 endpoint's URL, http://IP:PORT.
func (s *Server) Endpoint() string {
	return "http://" + net.JoinHostPort(s.ip, strconv.Itoa(s.ports["s3.port"]))
}

// Bucket returns the bucket created at start.
func (s *Server) Bucket() string { return s.bucket }

// AccessKeyID returns the access key of the server's only identity.
func (s *Server) AccessKeyID() string { return s.accessKey }

// SecretAccessKey returns the identity's secret key.
func (s *Server) SecretAccessKey() string { return s.secretKey }

// Region returns the region the server claims.
func (s *Server) Region() string { return Region }

// Env returns the environment that points a `tollgate serve` or `tollgate admin` process at
// the server's bucket: the s3 dataset store with its endpoint, bucket, region and path style,
// and the credentials in the standard AWS variables.
func (s *Server) Env() []string {
	return []string{
		"TOLLGATE_DATASET_STORE=s3",
		"TOLLGATE_S3_ENDPOINT=" + s.Endpoint(),
		"TOLLGATE_S3_BUCKET=" + s.bucket,
		"TOLLGATE_S3_REGION=" + Region,
		"TOLLGATE_S3_PATH_STYLE=true",
		"AWS_ACCESS_KEY_ID=" + s.accessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.secretKey,
	}
}

// Client returns an S3 client of the server, for a test's own requests.
func (s *Server) Client() (*minio.Client, error) {
	return minio.New(net.JoinHostPort(s.ip, strconv.Itoa(s.ports["s3.port"])), &minio.Options{
		Creds: credentials.NewStaticV4(s.accessKey, s.secretKey, ""), Region: Region, BucketLookup: minio.BucketLookupPath})
}

// CreateBucket creates a bucket (another test's bucket on the same server, say).
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	c, err := s.Client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := c.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: Region})
		if code := minio.ToErrorResponse(err).Code; err == nil || code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("s3test: create bucket %s: %w\n%s", name, err, s.logTail())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Restart starts the server (again, after Stop) on the same ports with the same data and
// waits until it answers S3 requests.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("s3test: the server is running")
	}
	args := []string{"mini", "-dir=" + filepath.Join(s.dir, "data"), "-ip=" + s.ip, "-ip.bind=" + s.ip,
		"-s3.config=" + filepath.Join(s.dir, "s3.json"),
		"-webdav=false", "-admin.ui=false", "-master.telemetry=false",
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.iam=false", "-admin.port.legacy=0",
		"-filer.localSocket=" + filepath.Join(s.sockDir, "filer.sock"), "-s3.localSocket=" + filepath.Join(s.sockDir, "s3.sock"),
		"-master.volumeSizeLimitMB=64", "-volume.max=0"}
	for name, p := range s.ports {
		args = append(args, fmt.Sprintf("-%s=%d", name, p))
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Credentials in the environment would add an identity; only the config file's counts.
	cmd.Env = filterEnv(os.Environ(), "AWS_")
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("s3test: start weed: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	s.cmd, s.exited, s.frozen = cmd, exited, false
	if err := s.waitReady(exited); err != nil {
		s.killLocked()
		return err
	}
	return nil
}

func filterEnv(env []string, prefix string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
		}
	}
	return out
}

// probeBucket is where waitReady writes to know the server takes writes.
const probeBucket = "s3test-probe"

// waitReady waits until the S3 gateway takes a write (reads are answered earlier, before the
// volume server has registered).
func (s *Server) waitReady(exited chan struct{}) error {
	c, err := s.Client()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.MakeBucket(ctx, probeBucket, minio.MakeBucketOptions{Region: Region})
		if code := minio.ToErrorResponse(err).Code; code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" {
			err = nil
		}
		if err == nil {
			_, err = c.PutObject(ctx, probeBucket, "probe", strings.NewReader("probe"), 5, minio.PutObjectOptions{})
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("s3test: weed exited while starting: %v\n%s", err, s.logTail())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("s3test: weed did not answer within %s: %v\n%s", startTimeout, err, s.logTail())
		}
	}
}

// Stop kills the server at once, as a crash or a lost host would, and waits for it to exit.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

func (s *Server) killLocked() {
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
}

// Freeze stops the server's process without ending it (SIGSTOP): connections are accepted by
// the kernel but nothing answers, as with a store that hangs. Thaw resumes it.
func (s *Server) Freeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && !s.frozen {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGSTOP)
		waitGroupStopped(s.cmd.Process.Pid)
		s.frozen = true
	}
}

// Thaw resumes a frozen server.
func (s *Server) Thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.frozen {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGCONT)
		s.frozen = false
	}
}

// Close stops the server for good (Start registers it with the test) and removes its local
// sockets, the one weed always puts in /tmp included.
func (s *Server) Close() {
	s.Thaw()
	s.Stop()
	_ = os.RemoveAll(s.sockDir)
	_ = os.Remove(fmt.Sprintf("/tmp/seaweedfs-admin-grpc-%d.sock", s.ports["admin.port.grpc"]))
}

// logTail returns the end of the server's log, for failure messages.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
