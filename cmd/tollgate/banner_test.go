package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/pgcluster"
)

// TestDevBannerSaysWhereTheClusterIs: the banner names the local cluster's data directory, and
// why it is outside the checkout when it is; with DATABASE_URL it names none.
func TestDevBannerSaysWhereTheClusterIs(t *testing.T) {
	inCheckout := devBanner("127.0.0.1:8080", "tgk_x", pgcluster.Location{DataDir: "/src/tollgate/.data/postgres"}, "")
	if !strings.Contains(inCheckout, "Local PostgreSQL cluster: /src/tollgate/.data/postgres\n") || strings.Contains(inCheckout, "here because") {
		t.Errorf("cluster in the checkout:\n%s", inCheckout)
	}
	moved := devBanner("127.0.0.1:8080", "", pgcluster.Location{DataDir: "/var/tmp/tollgate-0123456789ab/postgres",
		SocketDir: "/var/tmp/tollgate-0123456789ab/socket", Moved: true, Reason: "the postgres OS user cannot search /root (mode -rwx------)"}, "")
	for _, want := range []string{"Local PostgreSQL cluster: /var/tmp/tollgate-0123456789ab/postgres\n",
		"(here because the postgres OS user cannot search /root (mode -rwx------);"} {
		if !strings.Contains(moved, want) {
			t.Errorf("moved cluster: no %q in\n%s", want, moved)
		}
	}
	if remote := devBanner("127.0.0.1:8080", "tgk_x", pgcluster.Location{}, ""); strings.Contains(remote, "PostgreSQL") {
		t.Errorf("DATABASE_URL:\n%s", remote)
	}
}

// TestDevBannerNewKeyKeepsTheDataDir: on a later run of make run with TOLLGATE_DATA_DIR set
// (TOLLGATE_DATA_DIR=/tmp/x make run), the banner's command for a new key names that data
// directory, absolute and quoted for the shell, so that pasted into another terminal it finds
// the run's cluster; it printed the admin command alone, which there looked in ./.data and
// answered that there is no local cluster (docs-versus-behaviour trial s13h9). Without
// TOLLGATE_DATA_DIR, or with DATABASE_URL (no local cluster), the command is as it was.
func TestDevBannerNewKeyKeepsTheDataDir(t *testing.T) {
	local := pgcluster.Location{DataDir: "/srv/tollgate data/postgres"}
	newKey := func(b string) string {
		for _, line := range strings.Split(b, "\n") {
			if strings.Contains(line, "admin key create demo -quiet") {
				return strings.TrimSpace(line)
			}
		}
		t.Fatalf("no new-key command in the banner:\n%s", b)
		return ""
	}
	t.Setenv("TOLLGATE_DATA_DIR", "/srv/tollgate data")
	if got, want := newKey(devBanner("127.0.0.1:8080", "", local, "")), "export TOLLGATE_API_KEY=$(TOLLGATE_DATA_DIR='/srv/tollgate data' "; !strings.HasPrefix(got, want) {
		t.Errorf("with TOLLGATE_DATA_DIR: got %q, want it to begin %q", got, want)
	}
	t.Chdir(t.TempDir())
	t.Setenv("TOLLGATE_DATA_DIR", "mydata")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := newKey(devBanner("127.0.0.1:8080", "", local, "")), "$(TOLLGATE_DATA_DIR="+filepath.Join(wd, "mydata")+" "; !strings.Contains(got, want) {
		t.Errorf("with a relative TOLLGATE_DATA_DIR: got %q, want %q in it", got, want)
	}
	t.Setenv("TOLLGATE_DATA_DIR", "")
	if got := newKey(devBanner("127.0.0.1:8080", "", local, "")); strings.Contains(got, "TOLLGATE_DATA_DIR") {
		t.Errorf("without TOLLGATE_DATA_DIR: %q", got)
	}
	t.Setenv("TOLLGATE_DATA_DIR", "/srv/tollgate data")
	if got := newKey(devBanner("127.0.0.1:8080", "", pgcluster.Location{}, "")); strings.Contains(got, "TOLLGATE_DATA_DIR") {
		t.Errorf("with DATABASE_URL: %q", got)
	}
}

// TestDevBannerNamesLocalhostAndMCP: the banner's URLs say localhost, as the console and its
// OAuth issuer do (an MCP client signing in with OAuth compares them: trial h6), and it names
// the MCP endpoint.
func TestDevBannerNamesLocalhostAndMCP(t *testing.T) {
	b := devBanner("127.0.0.1:18881", "tgk_x", pgcluster.Location{}, "")
	if strings.Contains(b, "127.0.0.1") || !strings.Contains(b, "curl -s http://localhost:18881/v1/models") ||
		!strings.Contains(b, "MCP: http://localhost:18881/api/mcp") {
		t.Errorf("banner:\n%s", b)
	}
}

// TestDevBannerNamesOneHost: every URL of the banner, the agents part included, names the
// host as the console does, localhost for a loopback or unspecified address (newcomer trial
// finding 6: the agents' commands said 127.0.0.1 where the rest said localhost).
func TestDevBannerNamesOneHost(t *testing.T) {
	for addr, base := range map[string]string{"127.0.0.1:47300": "http://localhost:47300", "[::]:8080": "http://localhost:8080",
		"0.0.0.0:80": "http://localhost:80", "[::1]:8081": "http://localhost:8081", "10.1.2.3:8080": "http://10.1.2.3:8080"} {
		for _, simulated := range []bool{true, false} {
			b := devBanner(addr, "tgk_x", pgcluster.Location{}, "") + demoAgentBanner(addr, simulated)
			urls := regexp.MustCompile(`https?://[^/\s"']+`).FindAllString(b, -1)
			if len(urls) < 6 {
				t.Errorf("%s: only %d URLs in\n%s", addr, len(urls), b)
			}
			for _, u := range urls {
				if u != base {
					t.Errorf("%s: the banner names %s, want %s everywhere:\n%s", addr, u, base, b)
				}
			}
			if !strings.Contains(b, "curl -s "+base+"/v1/agents ") {
				t.Errorf("%s: no agents command on %s:\n%s", addr, base, b)
			}
		}
	}
}

// TestDevBannerSaysWhichUpstreams: on the built-in configuration the banner says whether the
// simulator or the real providers serve the models (newcomer trial finding 2: OPENAI_API_KEY in
// the shell switched make run to the real providers without a word): which variable turned
// them on, which provider has no key and so which models will fail, and how to get the
// simulator back. dev leaves a fusion model's experts on a provider without a key out of its
// routing (so no request goes out without a key) while the model keeps one, and the agents
// walk-through's prompt carries the simulator's script only when the simulator plays the model.
func TestDevBannerSaysWhichUpstreams(t *testing.T) {
	t.Setenv("TOLLGATE_CONFIG", "")
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("ANTHROPIC_API_KEY", "")
	sim, err := loadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if dropped := dropKeylessExperts(sim); len(dropped) != 0 {
		t.Errorf("the simulator's configuration lost experts: %v", dropped)
	}
	b := devBanner("127.0.0.1:8080", "tgk_x", pgcluster.Location{}, upstreamsBanner(sim, true, nil))
	if !strings.Contains(b, "Upstreams: the built-in simulator serves every model") || strings.Contains(b, "REAL") {
		t.Errorf("simulator:\n%s", b)
	}
	if !onlySimulated(sim) || !strings.Contains(demoAgentBanner("127.0.0.1:8080", onlySimulated(sim)), "[[sim script:") {
		t.Errorf("simulator: the agents walk-through has no script")
	}

	t.Setenv("OPENAI_API_KEY", "sk-newcomer-fake")
	real, err := loadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	dropped := dropKeylessExperts(real)
	if want := map[string][]string{"service-flint": {"anthropic"}}; !reflect.DeepEqual(dropped, want) {
		t.Errorf("experts left out: %v, want %v", dropped, want)
	}
	flint, _ := real.Model("service-flint")
	for _, e := range flint.Experts {
		if e.Provider == "anthropic" {
			t.Errorf("service-flint still routes to anthropic, which has no key: %+v", flint.Experts)
		}
	}
	if len(flint.Experts) != 2 {
		t.Errorf("service-flint's experts: %+v, want the two on OpenAI", flint.Experts)
	}
	if sonnet, _ := real.Model("service-sonnet"); sonnet.Backend == nil || sonnet.Backend.Provider != "anthropic" {
		t.Errorf("service-sonnet: %+v, want it left on anthropic (it fails, and the banner says so)", sonnet)
	}
	b = devBanner("127.0.0.1:8080", "tgk_x", pgcluster.Location{}, upstreamsBanner(real, true, dropped))
	for _, want := range []string{
		"Upstreams: REAL providers, which bill every request\n    (impl/config/example.yaml, because OPENAI_API_KEY is set).",
		"With a key: openai, openai-responses.",
		"anthropic: no key (ANTHROPIC_API_KEY is unset), so service-sonnet will fail.",
		"service-flint routes only to its experts with a key (not anthropic).",
		"For the built-in simulator instead: OPENAI_API_KEY= ANTHROPIC_API_KEY= make run",
	} {
		if !strings.Contains(b, want) {
			t.Errorf("OPENAI_API_KEY alone: no %q in\n%s", want, b)
		}
	}
	if strings.Contains(b, "simulator serves") {
		t.Errorf("OPENAI_API_KEY alone: the banner names the simulator as an upstream:\n%s", b)
	}
	if a := demoAgentBanner("127.0.0.1:8080", onlySimulated(real)); strings.Contains(a, "[[sim script:") && !strings.Contains(a, "needs the simulator") ||
		strings.Contains(a, `"prompt":"Which region sold the most units? [[sim`) {
		t.Errorf("OPENAI_API_KEY alone: the agents walk-through offers the simulator's script:\n%s", a)
	}

	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-fake")
	both, err := loadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	dropped = dropKeylessExperts(both)
	b = upstreamsBanner(both, true, dropped)
	if len(dropped) != 0 || strings.Contains(b, "no key") || !strings.Contains(b, "because OPENAI_API_KEY and ANTHROPIC_API_KEY are set") {
		t.Errorf("both keys: %v\n%s", dropped, b)
	}
	if b := upstreamsBanner(both, false, nil); !strings.Contains(b, "(from the configuration)") || strings.Contains(b, "make run") {
		t.Errorf("a configuration file:\n%s", b)
	}
}

// TestListenFlagsTakeLoopbackOnly: -simulator-listen and dev's -dev-oidc-listen move the
// simulator and the development OpenID provider (newcomer trial finding 5: they took free
// ports that could not be moved), on loopback addresses only; serve has no -dev-oidc-listen.
func TestListenFlagsTakeLoopbackOnly(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		args []string
		dev  bool
		want string
	}{
		{[]string{"-simulator-listen", "0.0.0.0:47401"}, false, "-simulator-listen takes a loopback address"},
		{[]string{"-simulator-listen", "localhost:47401"}, true, "-simulator-listen takes a loopback address"},
		{[]string{"-dev-oidc-listen", "10.0.0.1:47402"}, true, "-dev-oidc-listen takes a loopback address"},
		{[]string{"-dev-oidc-listen", "127.0.0.1:47402"}, false, "flag provided but not defined: -dev-oidc-listen"},
	} {
		err := runServe(ctx, c.args, c.dev)
		if _, usage := errors.AsType[usageError](err); !usage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v (dev %v): %v, want a usage error %q", c.args, c.dev, err, c.want)
		}
	}
}

// TestAdminCommandNamesTheBuiltBinary: the banner's command for a new demo key runs the binary
// make run built (at once) rather than `go run`, which compiles it again (newcomer trial h1);
// a binary go run or go test built in a temporary directory, or one found on PATH by name, gets
// `go run ./cmd/tollgate`.
func TestAdminCommandNamesTheBuiltBinary(t *testing.T) {
	for arg0, want := range map[string]string{
		"./bin/tollgate-dev":                    "./bin/tollgate-dev",
		"/opt/tollgate/bin/tollgate-dev":        "/opt/tollgate/bin/tollgate-dev",
		"/tmp/go-build123456/b001/exe/tollgate": "go run ./cmd/tollgate",
		"/tmp/go-build99/b001/tollgate.test":    "go run ./cmd/tollgate",
		"tollgate-dev":                          "go run ./cmd/tollgate",
	} {
		if got := adminCommand(arg0); got != want {
			t.Errorf("adminCommand(%q) = %q, want %q", arg0, got, want)
		}
	}
}
