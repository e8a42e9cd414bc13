package browsertest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/chromedp/chromedp"
)

// ArtefactsEnv names the environment variable that, when set, gathers every
// package's screenshots under one directory.
const ArtefactsEnv = "TOLLGATE_TEST_ARTEFACTS"

// clearedDirs holds the test directories emptied in this process, so that a
// test's directory holds the screenshots of the latest run only.
var clearedDirs sync.Map

// unsafeName matches what may not appear in a file or directory name.
var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Screenshot writes a full-page PNG of the page to the test's artefact
// directory as name.png and returns its path (see the package documentation
// for where that is).
func (p *Page) Screenshot(name string) string {
	p.t.Helper()
	dir, err := testArtefactDir(p.t.Name())
	if err != nil {
		p.t.Fatalf("browsertest: screenshot %s: %v", name, err)
	}
	ctx, cancel := context.WithTimeout(p.ctx, ActionTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 is PNG
	if err != nil {
		p.t.Fatalf("browsertest: screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, unsafeName.ReplaceAllString(name, "_")+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatalf("browsertest: screenshot %s: %v", name, err)
	}
	p.t.Logf("browsertest: screenshot %s", path)
	return path
}

// ArtefactDir returns the directory that the screenshots of this test package
// go to: $TOLLGATE_TEST_ARTEFACTS/<package directory relative to the module
// root> when that variable is set, else testdata/artefacts in the package
// directory (the working directory of `go test`). It creates the directory,
// and in the default place a .gitignore that keeps it out of git.
func ArtefactDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if root := os.Getenv(ArtefactsEnv); root != "" {
		rel := "."
		if mod, err := moduleRoot(wd); err == nil {
			if r, err := filepath.Rel(mod, wd); err == nil {
				rel = r
			}
		}
		dir, err := filepath.Abs(filepath.Join(root, rel))
		if err != nil {
			return "", err
		}
		return dir, os.MkdirAll(dir, 0o755)
	}
	dir := filepath.Join(wd, "testdata", "artefacts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	ignore := filepath.Join(dir, ".gitignore")
	if _, err := os.Stat(ignore); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(ignore, []byte("# Screenshots that browser tests write (impl/devkit/browsertest); never committed.\n*\n"), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// testArtefactDir returns the directory of one test's screenshots, emptied at
// its first use in this process.
func testArtefactDir(testName string) (string, error) {
	base, err := ArtefactDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, unsafeName.ReplaceAllString(testName, "_"))
	if _, done := clearedDirs.LoadOrStore(dir, true); !done {
		if err := os.RemoveAll(dir); err != nil {
			return "", err
		}
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// moduleRoot returns the nearest directory at or above dir with a go.mod.
func moduleRoot(dir string) (string, error) {
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
