package store_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// revokingUpdate is an UPDATE of a key or a grant that sets its revocation or its disabling.
var revokingUpdate = regexp.MustCompile(`(?is)UPDATE\s+(api_keys|oauth_grants)\b[^;]*?\bSET\b[^;]*?\b(revoked_at|disabled_at)\s*=`)

// callbackTypes are the store's callbacks run in a revocation's transaction (the agents end
// the sessions the keys or the grants started).
var callbackTypes = []string{"KeysRevoked", "GrantRevoked"}

// revokingQueries returns the names of the queries (queries/*.sql) that revoke or disable keys
// or grants.
func revokingQueries(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../queries/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("queries: %v %v", files, err)
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range strings.Split(string(b), "-- name: ")[1:] {
			if revokingUpdate.MatchString(block) {
				names = append(names, strings.Fields(block)[0])
			}
		}
	}
	return names
}

// goFiles parses the non-test Go files under dir.
func goFiles(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	var out []*ast.File
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		out = append(out, f)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// callbackParam returns the index of fn's parameter whose type is one of callbackTypes, or -1.
func callbackParam(fn *ast.FuncDecl) int {
	i := 0
	for _, p := range fn.Type.Params.List {
		id, ok := p.Type.(*ast.Ident)
		for range max(len(p.Names), 1) {
			if ok && slices.Contains(callbackTypes, id.Name) {
				return i
			}
			i++
		}
	}
	return -1
}

// calls returns the names of the methods or functions called in n.
func calls(n ast.Node) []*ast.CallExpr {
	var out []*ast.CallExpr
	ast.Inspect(n, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if _, ok := c.Fun.(*ast.SelectorExpr); ok {
				out = append(out, c)
			}
		}
		return true
	})
	return out
}

// TestEveryRevocationTakesACallback: every store function that runs a query revoking or
// disabling keys or grants takes a KeysRevoked or a GrantRevoked, run in its transaction, and
// no caller outside the store passes nil for it (but the enabling of a key, which revokes
// nothing): the agents end the sessions the keys or grants started at once, not at their next
// sweep (a grant revoked for a replay, for an eleventh consent or for a lowered role, and
// store.RevokeAPIKey, once waited for it). A new revoking query whose Go caller forgets the
// callback fails here.
func TestEveryRevocationTakesACallback(t *testing.T) {
	revoking := revokingQueries(t)
	for _, want := range []string{"RevokeAccountAPIKey", "SetAPIKeyDisabled", "RevokeSurplusOAuthGrants", "DeleteMembership", "RevokeOAuthGrantsAboveRole"} {
		if !slices.Contains(revoking, want) {
			t.Fatalf("the revoking queries found, %v, miss %s", revoking, want)
		}
	}
	fset := token.NewFileSet()
	withCallback := map[string]int{}
	used := map[string]bool{}
	for _, f := range goFiles(t, fset, ".") {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			at := callbackParam(fn)
			if at >= 0 && fn.Recv != nil {
				withCallback[fn.Name.Name] = at
			}
			for _, c := range calls(fn.Body) {
				name := c.Fun.(*ast.SelectorExpr).Sel.Name
				if !slices.Contains(revoking, name) {
					continue
				}
				used[name] = true
				if at < 0 {
					t.Errorf("%s: %s runs the revoking query %s and takes no %v", fset.Position(c.Pos()), fn.Name.Name, name, callbackTypes)
				}
			}
		}
	}
	for _, q := range revoking {
		if !used[q] {
			t.Errorf("no store function runs the revoking query %s: remove it, or run it with a callback", q)
		}
	}
	for _, dir := range []string{"..", "../../cmd"} {
		for _, f := range goFiles(t, fset, dir) {
			if strings.HasPrefix(fset.Position(f.Pos()).Filename, filepath.Join("..", "store")) {
				continue
			}
			for _, c := range calls(f) {
				at, ok := withCallback[c.Fun.(*ast.SelectorExpr).Sel.Name]
				if !ok || at >= len(c.Args) || !isIdent(c.Args[at], "nil") {
					continue
				}
				if c.Fun.(*ast.SelectorExpr).Sel.Name == "SetAPIKeyDisabled" && isIdent(c.Args[3], "false") {
					continue // enabling a key revokes nothing
				}
				t.Errorf("%s: a revocation with a nil callback: its sessions would run on until the agents' sweep", fset.Position(c.Pos()))
			}
		}
	}
}

// isIdent reports whether e is the identifier name.
func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
