package dataset_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/dataset"
)

func TestDirStorage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := dataset.NewDirStorage(filepath.Join(dir, "root"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Put(ctx, "tenant/a/x.csv", strings.NewReader("a\n1\n")); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "tenant/a/x.csv", strings.NewReader("a\n2\n")); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "tenant/b/y.csv", strings.NewReader("b\n")); err != nil {
		t.Fatal(err)
	}
	objs, err := st.List(ctx, "tenant/a/")
	if err != nil || len(objs) != 1 || objs[0].Key != "tenant/a/x.csv" || objs[0].Size != 4 {
		t.Fatalf("list = %+v, %v", objs, err)
	}
	if all, _ := st.List(ctx, "tenant/"); len(all) != 2 {
		t.Fatalf("list tenant/ = %+v", all)
	}
	if none, err := st.List(ctx, "tenant/c/"); err != nil || len(none) != 0 {
		t.Fatalf("list of nothing = %+v, %v", none, err)
	}
	r, err := st.Open(ctx, "tenant/a/x.csv")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	r.Close()
	if string(b) != "a\n2\n" {
		t.Fatalf("content %q", b)
	}
	if p, err := st.LocalPath(ctx, "tenant/a/x.csv"); err != nil || !strings.HasPrefix(p, st.Dir()) {
		t.Fatalf("local path %q, %v", p, err)
	}
	// Keys that are not well-formed are refused by every operation.
	if err := os.WriteFile(filepath.Join(dir, "outside.csv"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"../outside.csv", "tenant/../../outside.csv", "/etc/passwd", "tenant//a/x.csv", "tenant/./a/x.csv",
		`tenant\a\x.csv`, "tenant/a/x.csv\x00", "", "tenant/a/", "tenant/a"} {
		if _, err := st.Stat(ctx, key); err == nil {
			t.Errorf("stat %q succeeded", key)
		}
		if _, err := st.Open(ctx, key); err == nil {
			t.Errorf("open %q succeeded", key)
		}
		if err := st.Put(ctx, key, strings.NewReader("x")); err == nil && key != "tenant/a" {
			t.Errorf("put %q succeeded", key)
		}
		if _, err := st.LocalPath(ctx, key); err == nil && key != "tenant/a" {
			t.Errorf("local path %q succeeded", key)
		}
	}
	if _, err := st.List(ctx, "../"); err == nil {
		t.Error("list ../ succeeded")
	}
	if err := st.Delete(ctx, "tenant/a/x.csv"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Stat(ctx, "tenant/a/x.csv"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat after delete: %v", err)
	}
	if err := st.Delete(ctx, "tenant/a/x.csv"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("second delete: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "outside.csv")); string(b) != "secret" {
		t.Fatal("a file outside the root changed")
	}
}

// remoteOnly hides DirStorage's local paths, as an object store would have none.
type remoteOnly struct{ dataset.Storage }

func TestNonLocalStorage(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := dataset.New(f.st, remoteOnly{f.storage}, dataset.Options{Logger: quiet, TempDir: t.TempDir()})
	defer s.Close()
	r := mustLoad(t, s, f.a, "metrics", dataset.LoadOptions{Filter: "n <= 10"})
	if r.Rows != 10 {
		t.Fatalf("load = %+v", r)
	}
	q := mustQuery(t, s, f.a, "metrics", "SELECT max(square) AS m FROM metrics")
	if !strings.Contains(q.Text, "100\n") {
		t.Fatalf("text:\n%s", q.Text)
	}
	if _, err := s.Load(ctx, f.a, "secret", dataset.LoadOptions{}); err == nil || err.Error() != "dataset 'secret' is not owned by the caller" {
		t.Fatalf("b's dataset: %v", err)
	}
}
