package pgcluster

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobody is a server account that owns nothing, so that every directory is
// judged by its "other" permission bits, and handing a directory to it
// (chown to uid and gid -1) changes nothing, which lets these tests run
// without root.
var nobody = &account{name: "nobody-test", uid: -1, gid: -1, gids: []int{-1}}

// privateCheckout returns the preferred data directory of a checkout under a
// mode-700 directory, as in root's home, and a fallback root; both are
// removed after the test.
func privateCheckout(t *testing.T) (dataDir, fallbackRoot string) {
	t.Helper()
	home := filepath.Join(testDir(t), "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	fallbackRoot = filepath.Join(testDir(t), "var-tmp")
	if err := os.Mkdir(fallbackRoot, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(fallbackRoot, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(home, "tollgate", ".data", "postgres"), fallbackRoot
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func TestLocateNotRootStays(t *testing.T) {
	dataDir, root := privateCheckout(t)
	loc, err := locate(nil, LocateOptions{DataDir: dataDir, FallbackRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	if loc != (Location{DataDir: dataDir}) {
		t.Fatalf("location = %+v, want the preferred data directory", loc)
	}
}

func TestLocateReachableStays(t *testing.T) {
	_, root := privateCheckout(t)
	dataDir := filepath.Join(testDir(t), "tollgate", ".data", "postgres") // under a mode-711 directory
	loc, err := locate(nobody, LocateOptions{DataDir: dataDir, FallbackRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	if loc != (Location{DataDir: dataDir}) {
		t.Fatalf("location = %+v, want the preferred data directory", loc)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Fatalf("the fallback root is not empty: %v", entries)
	}
}

func TestLocateUnreachableMoves(t *testing.T) {
	dataDir, root := privateCheckout(t)
	home := filepath.Dir(filepath.Dir(filepath.Dir(dataDir)))
	loc, err := locate(nobody, LocateOptions{DataDir: dataDir, FallbackRoot: root, FallbackPrefix: "tollgate-"})
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Dir(loc.DataDir)
	if !loc.Moved || filepath.Dir(base) != root || !strings.HasPrefix(filepath.Base(base), "tollgate-") || len(filepath.Base(base)) != len("tollgate-")+12 ||
		filepath.Base(loc.DataDir) != "postgres" || loc.SocketDir != filepath.Join(base, "socket") {
		t.Fatalf("location = %+v, want <root>/tollgate-<12 hex digits>/{postgres,socket}", loc)
	}
	if want := "the nobody-test OS user cannot search " + home + " (mode -rwx------)"; loc.Reason != want {
		t.Errorf("reason = %q, want %q", loc.Reason, want)
	}
	if m := mode(t, base); !m.IsDir() || m.Perm() != 0o700 {
		t.Errorf("fallback directory mode = %v, want a directory with mode 700", m)
	}
}

// TestLocateStablePerCheckout: the same checkout, however spelt, always finds the same fallback;
// another checkout finds another one.
func TestLocateStablePerCheckout(t *testing.T) {
	dataDir, root := privateCheckout(t)
	first, err := locate(nobody, LocateOptions{DataDir: dataDir, FallbackRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	again, err := locate(nobody, LocateOptions{DataDir: dataDir, FallbackRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Fatalf("second location %+v differs from the first %+v", again, first)
	}

	// A relative spelling, and one through a symbolic link to the checkout, of a data
	// directory whose parent does not exist yet.
	checkout := filepath.Dir(filepath.Dir(dataDir))
	link := filepath.Join(filepath.Dir(root), "link")
	if err := os.MkdirAll(checkout, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(checkout, link); err != nil {
		t.Fatal(err)
	}
	t.Chdir(checkout)
	for _, spelling := range []string{".data/postgres", filepath.Join(link, ".data", "postgres")} {
		loc, err := locate(nobody, LocateOptions{DataDir: spelling, FallbackRoot: root})
		if err != nil {
			t.Fatal(err)
		}
		if loc.DataDir != first.DataDir || loc.SocketDir != first.SocketDir {
			t.Errorf("%s: location %+v, want %+v", spelling, loc, first)
		}
	}

	other, err := locate(nobody, LocateOptions{DataDir: filepath.Join(filepath.Dir(checkout), "other", ".data", "postgres"), FallbackRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	if !other.Moved || other.DataDir == first.DataDir {
		t.Fatalf("another checkout got %+v, the first %+v", other, first)
	}
}

// TestLocateKeepsMovedCluster: once the cluster lives in the fallback, it stays there when the
// checkout becomes reachable, unless the checkout holds a cluster of its own.
func TestLocateKeepsMovedCluster(t *testing.T) {
	dataDir, root := privateCheckout(t)
	opts := LocateOptions{DataDir: dataDir, FallbackRoot: root}
	moved, err := locate(nobody, opts)
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Dir(filepath.Dir(filepath.Dir(dataDir)))
	if err := os.Chmod(home, 0o711); err != nil {
		t.Fatal(err)
	}
	if loc, err := locate(nobody, opts); err != nil || loc.Moved {
		t.Fatalf("reachable checkout, empty fallback: %+v, %v; want the checkout", loc, err)
	}

	writeFile(t, filepath.Join(moved.DataDir, "PG_VERSION"))
	loc, err := locate(nobody, opts)
	if err != nil {
		t.Fatal(err)
	}
	if loc.DataDir != moved.DataDir || !strings.Contains(loc.Reason, "when an earlier run created the cluster") {
		t.Fatalf("reachable checkout, cluster in the fallback: %+v; want the fallback %s", loc, moved.DataDir)
	}

	writeFile(t, filepath.Join(dataDir, "PG_VERSION"))
	if loc, err := locate(nobody, opts); err != nil || loc.Moved {
		t.Fatalf("clusters in both places: %+v, %v; want the checkout's", loc, err)
	}
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("17\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLocateRefusesUnsafeFallback: the fallback root is writable by everyone, so whatever
// stands at the fallback path beforehand may have been planted there.
func TestLocateRefusesUnsafeFallback(t *testing.T) {
	dataDir, root := privateCheckout(t)
	opts := LocateOptions{DataDir: dataDir, FallbackRoot: root}
	base := filepath.Join(root, fallbackName("", resolvePath(dataDir)))
	check := func(t *testing.T, want string) {
		t.Helper()
		loc, err := locate(nobody, opts)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("locate = %+v, %v; want an error containing %q", loc, err, want)
		}
	}

	t.Run("symlink", func(t *testing.T) {
		target := filepath.Join(testDir(t), "target")
		if err := os.Mkdir(target, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, base); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(base)
		check(t, "it is a symbolic link")
		if m := mode(t, target); m.Perm() != 0o755 {
			t.Errorf("the link's target changed mode to %v", m)
		}
	})
	t.Run("dangling symlink", func(t *testing.T) {
		target := filepath.Join(testDir(t), "not-yet")
		if err := os.Symlink(target, base); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(base)
		check(t, "it is a symbolic link")
		if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the link's target was created: %v", err)
		}
	})
	t.Run("file", func(t *testing.T) {
		writeFile(t, base)
		defer os.Remove(base)
		check(t, "it is not a directory")
	})
	t.Run("owned by another user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("only root can make a directory owned by another user")
		}
		if err := os.Mkdir(base, 0o700); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(base)
		if err := os.Chown(base, 54321, 54321); err != nil {
			t.Fatal(err)
		}
		check(t, "it is owned by uid 54321")
	})
	t.Run("root writable without sticky bit", func(t *testing.T) {
		if err := os.Chmod(root, 0o777); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(root, 0o777|os.ModeSticky)
		check(t, "without the sticky bit")
		if _, err := os.Lstat(base); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the fallback directory was created: %v", err)
		}
	})
	t.Run("own directory with loose mode", func(t *testing.T) {
		if err := os.Mkdir(base, 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(base)
		if _, err := locate(nobody, opts); err != nil {
			t.Fatal(err)
		}
		if m := mode(t, base); m.Perm() != 0o700 {
			t.Errorf("mode = %v, want 700", m)
		}
	})
}

// TestLocateAsRootRunsInFallback locates a cluster for a checkout under a private directory
// as root, starts it there as the postgres OS user, and checks that a second Locate finds it.
func TestLocateAsRootRunsInFallback(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root runs the server as another user")
	}
	dataDir, root := privateCheckout(t)
	opts := LocateOptions{DataDir: dataDir, FallbackRoot: root, FallbackPrefix: "tollgate-"}
	loc, err := Locate(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !loc.Moved {
		t.Fatalf("location = %+v, want the fallback", loc)
	}
	c := start(t, Options{DataDir: loc.DataDir, SocketDir: loc.SocketDir})
	if c.SocketDir() != loc.SocketDir {
		t.Fatalf("socket directory = %s, want %s", c.SocketDir(), loc.SocketDir)
	}
	query(t, c.ConnString("postgres"), "SELECT '1'")
	pg, err := user.Lookup(Superuser)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Dir(loc.DataDir), loc.DataDir, loc.SocketDir} {
		fi, err := os.Lstat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if uid := strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Uid)); uid != pg.Uid || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: uid %s, mode %v; want uid %s (postgres), mode 700", dir, uid, fi.Mode().Perm(), pg.Uid)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := Locate(opts)
	if err != nil {
		t.Fatal(err)
	}
	if again != loc {
		t.Fatalf("second location %+v, want %+v", again, loc)
	}
	c2 := start(t, Options{DataDir: again.DataDir, SocketDir: again.SocketDir})
	query(t, c2.ConnString("postgres"), "SELECT '1'")
}

// TestSocketDirOutsidePrivateTempDir: as root with TMPDIR private to root, the socket
// directory Start makes goes to /tmp, where the postgres OS user can reach it.
func TestSocketDirOutsidePrivateTempDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root runs the server as another user")
	}
	dir := testDir(t)
	private := filepath.Join(dir, "tmp")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", private)
	c := start(t, Options{DataDir: filepath.Join(dir, "data")})
	if filepath.Dir(c.SocketDir()) != "/tmp" {
		t.Fatalf("socket directory = %s, want one under /tmp", c.SocketDir())
	}
}
