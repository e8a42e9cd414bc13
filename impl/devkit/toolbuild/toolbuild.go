// Package toolbuild builds the external programs the tests start (SeaweedFS's weed, Jaeger)
// from their pinned modules under tools/<name>/go.mod, once per version: the binary goes to
// the Go build cache's directory under tollgate-<name>/<hash of go.mod and go.sum>/, where
// later runs and concurrent test processes find it (a file lock makes one of them build it).
// It is part of the development and test kit; the product never links it.
package toolbuild

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Tool names one pinned program.
type Tool struct {
	// Name is the folder under tools/ that holds its go.mod and go.sum, and the name of the
	// binary built.
	Name string
	// Package is the main package built, resolved in that module.
	Package string
	// Env names an environment variable that, when set, is the path of a prebuilt binary to
	// use instead.
	Env string
}

// Binary returns the tool's binary: $Env when set, else the one built for the current
// tools/<Name>/go.mod and go.sum, building it first when no run has yet.
func Binary(t Tool) (string, error) {
	if p := os.Getenv(t.Env); p != "" {
		return p, nil
	}
	mod, err := moduleDir(t)
	if err != nil {
		return "", err
	}
	sum := sha256.New()
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(mod, name))
		if err != nil {
			return "", fmt.Errorf("toolbuild %s: %w", t.Name, err)
		}
		sum.Write(b)
	}
	cache, err := goCache()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "tollgate-"+t.Name, hex.EncodeToString(sum.Sum(nil))[:16])
	bin := filepath.Join(dir, t.Name)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("toolbuild %s: %w", t.Name, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("toolbuild %s: %w", t.Name, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("toolbuild %s: lock %s: %w", t.Name, dir, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // another test process built it while this one waited
	}
	partial := bin + ".partial"
	began := time.Now()
	fmt.Fprintf(os.Stderr, "toolbuild: building %s from %s (once; cached in %s)\n", t.Package, mod, dir)
	cmd := exec.Command("go", "build", "-o", partial, t.Package)
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		_ = os.Remove(partial)
		return "", fmt.Errorf("toolbuild: go build %s: %w\n%s", t.Package, err, out.Bytes())
	}
	if err := os.Rename(partial, bin); err != nil {
		return "", fmt.Errorf("toolbuild %s: %w", t.Name, err)
	}
	fmt.Fprintf(os.Stderr, "toolbuild: built %s in %s\n", t.Name, time.Since(began).Round(time.Second))
	return bin, nil
}

// goCache is the Go build cache's directory (the temporary directory when it is off).
func goCache() (string, error) {
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("toolbuild: go env GOCACHE: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" || dir == "off" {
		dir = os.TempDir()
	}
	return dir, nil
}

// moduleDir finds the checkout's tools/<Name>, upwards from the working directory (a test runs
// in its package's directory).
func moduleDir(t Tool) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "tools", t.Name)
		if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("toolbuild: tools/" + t.Name + "/go.mod not found above the working directory; set " + t.Env)
		}
		dir = up
	}
}
