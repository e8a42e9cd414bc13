package s3test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// TestWeedBinary builds (or finds in the cache) the pinned weed binary and runs it. `make test`
// runs it first, alone, so that the build is not counted against another test's time.
func TestWeedBinary(t *testing.T) {
	bin, err := BinaryPath()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "version") {
		t.Fatalf("weed version: %v\n%s", err, out)
	}
}

// TestServerStopRestartFreeze checks the harness itself: an object written before a Stop is
// there after Restart on the same endpoint, a stopped server refuses at once, and a frozen one
// answers nothing until it thaws.
func TestServerStopRestartFreeze(t *testing.T) {
	srv := Start(t, Options{})
	ctx := t.Context()
	c, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, srv.Bucket(), "a/b.txt", strings.NewReader("hello"), 5, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = c.StatObject(short, srv.Bucket(), "a/b.txt", minio.StatObjectOptions{})
	cancel()
	if err == nil {
		t.Fatal("a stopped server answered")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	info, err := c.StatObject(ctx, srv.Bucket(), "a/b.txt", minio.StatObjectOptions{})
	if err != nil || info.Size != 5 {
		t.Fatalf("after the restart: %+v, %v", info, err)
	}
	srv.Freeze()
	short, cancel = context.WithTimeout(ctx, time.Second)
	_, err = c.StatObject(short, srv.Bucket(), "a/b.txt", minio.StatObjectOptions{})
	cancel()
	if err == nil {
		t.Fatal("a frozen server answered")
	}
	srv.Thaw()
	if _, err := c.StatObject(ctx, srv.Bucket(), "a/b.txt", minio.StatObjectOptions{}); err != nil {
		t.Fatalf("after the thaw: %v", err)
	}
}
