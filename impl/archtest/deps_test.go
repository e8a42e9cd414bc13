package archtest

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the module path every package below is named under.
const module = "github.com/tollgate/tollgate/"

// pkg is what `go list -json` says of a package, as far as the rules need it.
type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

// list runs `go list -json` on the patterns (from the module root) and decodes its packages.
func list(t *testing.T, patterns ...string) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, patterns...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("go list: %v\n%s", err, exit.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	pkgs := make(map[string]pkg)
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module)] = p
	}
	return pkgs
}

// genDBAllowed are the packages that may import the generated queries (gen/db): the store, and
// the usage read model, which is a set of queries over the usage tables and nothing else.
var genDBAllowed = []string{"impl/store", "impl/usageview"}

// genDBPending are packages that still import gen/db against the rule (issue 19): the rule is
// kept for every other package, and this list only ever shrinks.
var genDBPending []string

// TestOnlyTheStoreImportsGeneratedQueries: the edge packages (httpapi, mcp, web, gateway, cmd)
// and the agents reach PostgreSQL through the store, never through the generated queries.
func TestOnlyTheStoreImportsGeneratedQueries(t *testing.T) {
	for name, p := range list(t, "./impl/...", "./cmd/...") {
		if !slices.Contains(p.Imports, module+"gen/db") || slices.Contains(genDBAllowed, name) {
			continue
		}
		if slices.Contains(genDBPending, name) {
			t.Logf("%s imports gen/db (pending, issue 19)", name)
			continue
		}
		t.Errorf("%s imports gen/db: only %v may; reach the database through impl/store", name, genDBAllowed)
	}
}

// TestAgentsDoNotImportTheMCPAdapter: the agents run tools through the neutral impl/tool, not
// through the MCP endpoint's package.
func TestAgentsDoNotImportTheMCPAdapter(t *testing.T) {
	p := list(t, "./impl/agent")["impl/agent"]
	if slices.Contains(p.Deps, module+"impl/mcp") {
		t.Error("impl/agent depends on impl/mcp; tools are impl/tool")
	}
}

// serveForbidden are the development and test tools that the production binary must not link:
// the benchmark's load generator, the development OpenID provider, the browser driver, the
// fault-injection harness and the hostile-load tool (and, checked apart, anything else under
// impl/devkit).
var serveForbidden = []string{
	"github.com/tsenart/vegeta/v12/lib", "github.com/chromedp/chromedp",
	module + "impl/devkit/devoidc", module + "impl/devkit/chaos", module + "impl/devkit/bench", module + "impl/devkit/browsertest",
	module + "impl/devkit/hostile",
}

// servePending are the forbidden dependencies the tollgate binary still has; the list only ever
// shrinks (empty since the development commands moved behind the dev build tag).
var servePending []string

// TestProductionBinaryLinksNoDevelopmentTools checks the dependencies of the binary that runs
// `tollgate serve`, as `go build ./cmd/tollgate` makes it (without -tags dev).
func TestProductionBinaryLinksNoDevelopmentTools(t *testing.T) {
	p := list(t, "./cmd/tollgate")["cmd/tollgate"]
	for _, dep := range p.Deps {
		if strings.HasPrefix(dep, module+"impl/devkit/") && !slices.Contains(serveForbidden, dep) {
			t.Errorf("cmd/tollgate links %s, part of the development and test kit", dep)
		}
	}
	for _, dep := range serveForbidden {
		if !slices.Contains(p.Deps, dep) {
			continue
		}
		if slices.Contains(servePending, dep) {
			t.Logf("cmd/tollgate links %s (pending, issue 19)", dep)
			continue
		}
		t.Errorf("cmd/tollgate links %s, a development tool", dep)
	}
}

// TestPendingListsAreCurrent: the pending lists must name
// only packages that really break the rule today, so that one that is fixed drops out of them.
func TestPendingListsAreCurrent(t *testing.T) {
	pkgs := list(t, "./impl/...", "./cmd/...")
	for _, name := range genDBPending {
		if !slices.Contains(pkgs[name].Imports, module+"gen/db") {
			t.Errorf("%s no longer imports gen/db: remove it from genDBPending", name)
		}
	}
	for _, dep := range servePending {
		if !slices.Contains(pkgs["cmd/tollgate"].Deps, dep) {
			t.Errorf("cmd/tollgate no longer links %s: remove it from servePending", dep)
		}
	}
}

// exchangeForbidden are what the exchange (impl/exchange) and the agents must not depend on:
// the HTTP edge and the other edges, the generated HTTP contract, and the HTTP server. The
// exchange is the core they call, never the other way round, and an agent's step calls it
// directly rather than through an HTTP server or a faked request context (issue 19).
var exchangeForbidden = []string{
	module + "impl/httpapi", module + "impl/mcp", module + "impl/web", module + "impl/mcpauth", module + "impl/h1server",
	module + "gen/api", "net/http/httptest", "net/http/pprof", "net/http/cgi", "net/http/fcgi",
}

// TestExchangeAndAgentsDoNotReachTheEdges: neither the exchange nor the agents depend on an
// edge package or on the HTTP server, and the exchange does not depend on the agents.
func TestExchangeAndAgentsDoNotReachTheEdges(t *testing.T) {
	pkgs := list(t, "./impl/exchange", "./impl/agent")
	for _, name := range []string{"impl/exchange", "impl/agent"} {
		p, ok := pkgs[name]
		if !ok {
			t.Fatalf("go list did not list %s", name)
		}
		for _, dep := range exchangeForbidden {
			if slices.Contains(p.Deps, dep) {
				t.Errorf("%s depends on %s: the exchange and its callers' cores never reach up to an edge", name, dep)
			}
		}
	}
	if slices.Contains(pkgs["impl/exchange"].Deps, module+"impl/agent") {
		t.Error("impl/exchange depends on impl/agent: the agents call the exchange, not the other way round")
	}
}

// exchangeHTTPAllowed are the names of net/http the exchange may use: what its upstream calls
// need (the headers passed on, the upstream's response). A ResponseWriter, a Request, a
// Handler, a ResponseController or a Flusher belong to the HTTP edge.
var exchangeHTTPAllowed = []string{"Header", "Response"}

// TestExchangeUsesHTTPOnlyAsAClient: the exchange's source (tests aside) names nothing of
// net/http beyond exchangeHTTPAllowed, so that HTTP details stay at the HTTP edge.
func TestExchangeUsesHTTPOnlyAsAClient(t *testing.T) {
	p := list(t, "./impl/exchange")["impl/exchange"]
	if len(p.GoFiles) == 0 {
		t.Fatal("go list found no source files in impl/exchange")
	}
	fset := token.NewFileSet()
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		local := ""
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == "net/http" {
				local = "http"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && !slices.Contains(exchangeHTTPAllowed, sel.Sel.Name) {
				t.Errorf("%s: impl/exchange uses http.%s: only %v (an upstream call's) may be used there; the rest is the HTTP edge's",
					fset.Position(sel.Pos()), sel.Sel.Name, exchangeHTTPAllowed)
			}
			return true
		})
	}
}
