package pgcluster

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// LocateOptions says where a persistent cluster would like to live and where
// it may go instead.
type LocateOptions struct {
	// DataDir is the preferred data directory, such as .data/postgres in a
	// project's checkout. Required.
	DataDir string
	// FallbackRoot is a directory that every user may search, such as
	// /var/tmp, under which Locate puts the cluster when the server user
	// cannot reach DataDir. It must be owned by root or by the calling user,
	// and may be writable by others only with the sticky bit set (as /tmp
	// and /var/tmp are). When empty, Locate never moves the cluster.
	FallbackRoot string
	// FallbackPrefix starts the name of the fallback directory, which ends
	// with a short hash of DataDir; "pgcluster-" when empty.
	FallbackPrefix string
}

// Location is where Locate put a persistent cluster: the directories to pass
// to Start.
type Location struct {
	// DataDir is the data directory to pass as Options.DataDir.
	DataDir string
	// SocketDir is the socket directory to pass as Options.SocketDir. It is
	// empty when the cluster stays in its preferred data directory, so that
	// Start makes a fresh socket directory of its own.
	SocketDir string
	// Moved reports that the cluster lives under the fallback root instead of
	// in the preferred data directory.
	Moved bool
	// Reason says why the cluster was moved, as a phrase such as "the
	// postgres OS user cannot search /root (mode -rwx------)"; empty when
	// Moved is false.
	Reason string
}

// Locate decides where a persistent cluster whose preferred data directory
// is opts.DataDir lives, so that a project's first command works whatever
// the permissions of the directory it was checked out in.
//
// When the calling process is not root, the server runs as the calling user
// and the cluster stays in opts.DataDir. When it is root, the server runs as
// the "postgres" OS user, which must be able to search every directory above
// the data directory. If it can, the cluster stays in opts.DataDir; if it
// cannot (a checkout under a private home directory, say), the cluster goes
// to FallbackRoot/<FallbackPrefix><hash>/postgres, with its socket directory
// beside it in FallbackRoot/<FallbackPrefix><hash>/socket, where <hash> is
// twelve hexadecimal digits of the SHA-256 of the data directory's absolute
// path (symbolic links resolved). The same preferred data directory thus
// always finds the same fallback, and a later run finds the cluster there
// again. A cluster that was moved stays moved: when the fallback holds a
// cluster and the preferred data directory does not, Locate keeps the
// fallback even if the preferred one has become reachable since.
//
// Locate creates the fallback directory FallbackRoot/<FallbackPrefix><hash>
// itself, with mode 700, and hands it to the postgres OS user. Since the
// fallback root is usually writable by everyone, it refuses a fallback path
// that exists already as a symbolic link, as something other than a
// directory, or as a directory owned by another user than postgres or the
// caller; it sets a pre-existing directory of theirs to mode 700.
func Locate(opts LocateOptions) (Location, error) {
	acct, err := lookupServerUser()
	if err != nil {
		return Location{}, err
	}
	return locate(acct, opts)
}

// locate is Locate for the server account acct (nil when the caller is not
// root).
func locate(acct *account, opts LocateOptions) (Location, error) {
	if opts.DataDir == "" {
		return Location{}, errors.New("pgcluster: LocateOptions.DataDir is required")
	}
	preferred, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return Location{}, fmt.Errorf("pgcluster: data directory %q: %w", opts.DataDir, err)
	}
	stay := Location{DataDir: preferred}
	if acct == nil || opts.FallbackRoot == "" {
		return stay, nil
	}
	resolved := resolvePath(preferred)
	root, base, err := fallbackBase(opts, resolved)
	if err != nil {
		return Location{}, err
	}
	moved := Location{
		DataDir:   filepath.Join(base, "postgres"),
		SocketDir: filepath.Join(base, "socket"),
		Moved:     true,
	}

	blocked, mode, err := acct.firstUnsearchable(filepath.Dir(resolved))
	if err != nil {
		return Location{}, err
	}
	switch {
	case blocked != "":
		moved.Reason = fmt.Sprintf("the %s OS user cannot search %s (mode %v)", acct.name, blocked, mode)
	case holdsCluster(preferred) || !acct.holdsMovedCluster(base):
		return stay, nil
	default:
		moved.Reason = fmt.Sprintf("the %s OS user could not reach %s when an earlier run created the cluster", acct.name, preferred)
	}
	if err := acct.makePrivateDir(root, base); err != nil {
		return Location{}, err
	}
	if err := acct.checkReachable(root, base); err != nil {
		return Location{}, err
	}
	return moved, nil
}

// Existing reports the data directory where Locate would find a cluster
// that exists already, and whether there is one: the preferred data
// directory when it holds a cluster, else the fallback directory's when it
// does (FallbackRoot/<FallbackPrefix><hash>/postgres). Unlike Locate it
// creates nothing, so that a command that only reads a cluster can refuse
// to run where there is none instead of making an empty one. Without a
// cluster it returns the preferred data directory.
func Existing(opts LocateOptions) (string, bool) {
	preferred, err := filepath.Abs(opts.DataDir)
	if err != nil || opts.DataDir == "" {
		return opts.DataDir, false
	}
	if holdsCluster(preferred) {
		return preferred, true
	}
	if opts.FallbackRoot != "" {
		if _, base, err := fallbackBase(opts, resolvePath(preferred)); err == nil && holdsCluster(filepath.Join(base, "postgres")) {
			return filepath.Join(base, "postgres"), true
		}
	}
	return preferred, false
}

// fallbackBase is the fallback root (absolute) and, under it, the fallback directory of the
// data directory at the resolved absolute path resolved.
func fallbackBase(opts LocateOptions, resolved string) (root, base string, err error) {
	root, err = filepath.Abs(opts.FallbackRoot)
	if err != nil {
		return "", "", fmt.Errorf("pgcluster: fallback root %q: %w", opts.FallbackRoot, err)
	}
	return root, filepath.Join(root, fallbackName(opts.FallbackPrefix, resolved)), nil
}

// fallbackName returns the name of the fallback directory for the data
// directory at the resolved absolute path dataDir.
func fallbackName(prefix, dataDir string) string {
	if prefix == "" {
		prefix = "pgcluster-"
	}
	sum := sha256.Sum256([]byte(dataDir))
	return prefix + hex.EncodeToString(sum[:6])
}

// resolvePath returns the absolute path abs with the symbolic links of its
// longest existing ancestor resolved, so that two spellings of one
// directory give the same path even before the directory exists.
func resolvePath(abs string) string {
	rest := ""
	for dir := abs; ; dir = filepath.Dir(dir) {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		if dir == filepath.Dir(dir) {
			return abs
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// holdsCluster reports whether dataDir holds an initialised cluster.
func holdsCluster(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, "PG_VERSION"))
	return err == nil
}

// holdsMovedCluster reports whether the fallback directory base is a real
// directory of the account's or the caller's that holds a cluster.
func (a *account) holdsMovedCluster(base string) bool {
	fi, err := os.Lstat(base)
	if err != nil || !fi.IsDir() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || (int(st.Uid) != a.uid && int(st.Uid) != os.Geteuid()) {
		return false
	}
	return holdsCluster(filepath.Join(base, "postgres"))
}

// firstUnsearchable returns the first directory, from dir (or its nearest
// existing ancestor: missing directories are created searchable) up to /,
// that the account may not search, and its mode; "" when there is none.
func (a *account) firstUnsearchable(dir string) (string, fs.FileMode, error) {
	resolved := resolvePath(dir)
	for d := resolved; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return "", 0, fmt.Errorf("pgcluster: %w", err)
		case !a.may(fi, 0o1):
			return d, fi.Mode().Perm(), nil
		}
		if d == filepath.Dir(d) {
			return "", 0, nil
		}
	}
}

// makePrivateDir makes sure that dir, an entry of the directory root, is a
// real directory owned by the account with mode 700, creating it when
// missing. It refuses a root that others may write to without the sticky
// bit (anyone could then swap dir for something else), and a dir that is a
// symbolic link, not a directory, or owned by another user than the account
// or the caller. The checks are made on the opened directory, which cannot
// be a symbolic link (O_NOFOLLOW), rather than on its path.
func (a *account) makePrivateDir(root, dir string) error {
	rfi, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("pgcluster: fallback root: %w", err)
	}
	rst, ok := rfi.Sys().(*syscall.Stat_t)
	switch {
	case !rfi.IsDir():
		return fmt.Errorf("pgcluster: fallback root %s is not a directory", root)
	case ok && rst.Uid != 0 && int(rst.Uid) != os.Geteuid():
		return fmt.Errorf("pgcluster: fallback root %s is owned by uid %d, not by root or by this process's user", root, rst.Uid)
	case rfi.Mode().Perm()&0o022 != 0 && rfi.Mode()&fs.ModeSticky == 0:
		return fmt.Errorf("pgcluster: fallback root %s (mode %v) is writable by others without the sticky bit, so anyone could replace %s", root, rfi.Mode(), dir)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("pgcluster: %w", err)
	}
	refuse := func(why string) error {
		return fmt.Errorf("pgcluster: refusing to use %s for the cluster: %s; someone else may have put it there (the directory it is in is writable by everyone): check it, remove it, and run again", dir, why)
	}
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		if fi, lerr := os.Lstat(dir); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return refuse("it is a symbolic link")
		} else if lerr == nil && !fi.IsDir() {
			return refuse("it is not a directory")
		}
		return fmt.Errorf("pgcluster: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("pgcluster: %s: no owner information", dir)
	}
	switch int(st.Uid) {
	case a.uid:
	case os.Geteuid(): // made by this process, or by an earlier run that stopped before handing it over
		if err := f.Chown(a.uid, a.gid); err != nil {
			return fmt.Errorf("pgcluster: hand %s to user %s: %w", dir, a.name, err)
		}
	default:
		return refuse(fmt.Sprintf("it is owned by uid %d, neither by the %s OS user nor by this process's user", st.Uid, a.name))
	}
	if fi.Mode().Perm() != 0o700 {
		if err := f.Chmod(0o700); err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	return nil
}
