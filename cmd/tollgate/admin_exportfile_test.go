package main

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdminUsageExportKeepsAnExistingFile (operator trial h1, item 4): `usage export -out FILE`
// replaced a FILE that existed (last month's statement, a typo away) without a word. It now
// refuses (exit status 1, saying so and naming -force) and leaves the file as it was, with no
// temporary file beside it; -force replaces it with the whole statement; -force without -out is
// a usage error.
func TestAdminUsageExportKeepsAnExistingFile(t *testing.T) {
	t.Setenv("DATABASE_URL", migratedDatabase(t))
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	dir := t.TempDir()
	file := filepath.Join(dir, "november.csv")
	if err := os.WriteFile(file, []byte("last month's statement\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	period := " -from 2025-11-01 -to 2099-12-01"
	out, err := adminRun(t, "usage export acme"+period+" -out "+file)
	if exitStatus(err) != 1 || !strings.Contains(err.Error(), file+" exists already") || !strings.Contains(err.Error(), "-force") || out != "" {
		t.Errorf("usage export over an existing file: %v (exit status %d)\n%s", err, exitStatus(err), out)
	}
	if text, _ := os.ReadFile(file); string(text) != "last month's statement\n" {
		t.Errorf("the refused export changed the file: %q", text)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the refused export left files behind: %v", entries)
	}
	out = mustAdmin(t, "usage export acme"+period+" -out "+file+" -force")
	if text, _ := os.ReadFile(file); !strings.HasPrefix(string(text), "line_type,") || !strings.Contains(out, "written to "+file) {
		t.Errorf("usage export -force: %s\nthe file:\n%s", out, text)
	}
	if _, err := adminRun(t, "usage export acme"+period+" -force"); exitStatus(err) != 2 {
		t.Errorf("-force without -out: %v (exit status %d), want a usage error", err, exitStatus(err))
	}
}

// TestWriteFileWholeNeverReplacesAFileMadeMeanwhile: a file that appears at the path while the
// statement is written (after the command's first look) is not replaced either: the write ends
// with fs.ErrExist, the file is as its writer left it, and no temporary file stays.
func TestWriteFileWholeNeverReplacesAFileMadeMeanwhile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "statement.csv")
	err := writeFileWhole(path, false, func(w io.Writer) error {
		if err := os.WriteFile(path, []byte("theirs"), 0o644); err != nil {
			return err
		}
		_, err := io.WriteString(w, "ours")
		return err
	})
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("writeFileWhole over a file made meanwhile: %v, want fs.ErrExist", err)
	}
	if text, _ := os.ReadFile(path); string(text) != "theirs" {
		t.Errorf("the file made meanwhile holds %q", text)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left: %v", entries)
	}
	if err := writeFileWhole(path, true, func(w io.Writer) error { _, err := io.WriteString(w, "ours"); return err }); err != nil {
		t.Fatal(err)
	}
	if text, _ := os.ReadFile(path); string(text) != "ours" {
		t.Errorf("overwrite: the file holds %q", text)
	}
}
