package main

import (
	"net"
	"os"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/impl/config"
)

// realProviderVars are the environment variables that, without a configuration file, switch
// the built-in configuration from the simulator to impl/config/example.yaml, which routes to
// the real providers (loadConfig).
var realProviderVars = []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}

// realProvidersChosen reports whether loadConfig, given no configuration file, chooses the
// example configuration of the real providers: one of realProviderVars is set.
func realProvidersChosen() bool {
	return len(setVars(realProviderVars)) > 0
}

// setVars is those of names that are set to something in the environment.
func setVars(names []string) []string {
	var set []string
	for _, n := range names {
		if os.Getenv(n) != "" {
			set = append(set, n)
		}
	}
	return set
}

// devBaseURL is the base URL dev's banner and its web application name for the API listener's
// address: localhost for a loopback or unspecified host, as the console and its OAuth issuer
// are named (an MCP client that signs in with OAuth compares the two, trial h6; and the
// application, on localhost, and the development provider, on 127.0.0.1, are then different
// sites, as a real provider is). Every URL of the banner comes from it, so that none says
// 127.0.0.1 where another says localhost (newcomer trial finding 6).
func devBaseURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || host == "localhost" || (ip != nil && (ip.IsLoopback() || ip.IsUnspecified())) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// keyless reports whether p is a real provider whose key variable is named but empty: its
// requests would go out without a key.
func keyless(p config.Provider) bool {
	return p.BaseURL != config.SimulatorURL && p.APIKeyEnv != "" && p.APIKey == ""
}

// dropKeylessExperts takes out of each fusion model the experts on keyless providers, as long
// as the model keeps one, and returns the providers taken out of each model. dev does this on
// its built-in configuration of the real providers when one provider's key is not set
// (newcomer trial finding 2: with OPENAI_API_KEY alone, the fusion router still sent requests
// to the anthropic expert, without a key). A model served by keyless providers only is left as
// it is: its requests fail, and the banner says so.
func dropKeylessExperts(cfg *config.Config) map[string][]string {
	without := map[string]bool{}
	for _, p := range cfg.Providers {
		without[p.Name] = keyless(p)
	}
	dropped := map[string][]string{}
	for i := range cfg.Models {
		m := &cfg.Models[i]
		var keep []config.Upstream
		var out []string
		for _, e := range m.Experts {
			if without[e.Provider] {
				out = append(out, e.Provider)
			} else {
				keep = append(keep, e)
			}
		}
		if len(out) > 0 && len(keep) > 0 {
			m.Experts = keep
			dropped[m.ID] = out
		}
	}
	return dropped
}

// upstreamsBanner is the banner's line on the upstreams dev routes to: the built-in simulator,
// or real providers, with why (builtin: the configuration is the built-in one, chosen by
// realProviderVars), which providers have no key and so which models fail, and which fusion
// models lost experts (dropped, from dropKeylessExperts).
func upstreamsBanner(cfg *config.Config, builtin bool, dropped map[string][]string) string {
	var real, simulated []string
	noKey := map[string][]string{} // the providers of each unset key variable
	var vars []string
	without := map[string]bool{}
	for _, p := range cfg.Providers {
		switch {
		case p.BaseURL == config.SimulatorURL:
			simulated = append(simulated, p.Name)
		case keyless(p):
			if noKey[p.APIKeyEnv] == nil {
				vars = append(vars, p.APIKeyEnv)
			}
			noKey[p.APIKeyEnv] = append(noKey[p.APIKeyEnv], p.Name)
			without[p.Name] = true
		default:
			real = append(real, p.Name)
		}
	}
	var b strings.Builder
	if len(real) == 0 && len(noKey) == 0 {
		b.WriteString("  Upstreams: the built-in simulator serves every model (no provider keys needed)")
		if builtin {
			b.WriteString(";\n    OPENAI_API_KEY or ANTHROPIC_API_KEY set would route to the real providers")
		}
		b.WriteString(".\n\n")
		return b.String()
	}
	b.WriteString("  Upstreams: REAL providers, which bill every request")
	if builtin {
		set, verb := setVars(realProviderVars), " is set)"
		if len(set) > 1 {
			verb = " are set)"
		}
		b.WriteString("\n    (impl/config/example.yaml, because " + strings.Join(set, " and ") + verb)
	} else {
		b.WriteString("\n    (from the configuration)")
	}
	b.WriteString(".\n")
	if len(real) > 0 {
		b.WriteString("    With a key: " + strings.Join(real, ", ") + ".\n")
	}
	if len(simulated) > 0 {
		b.WriteString("    The built-in simulator serves " + strings.Join(simulated, ", ") + ".\n")
	}
	for _, v := range vars {
		var failing []string
		for _, m := range cfg.Models {
			ups := m.Experts
			if m.Backend != nil {
				ups = []config.Upstream{*m.Backend}
			}
			all, mine := len(ups) > 0, false
			for _, u := range ups {
				all = all && without[u.Provider]
				mine = mine || slices.Contains(noKey[v], u.Provider)
			}
			if all && mine {
				failing = append(failing, m.ID)
			}
		}
		b.WriteString("    " + strings.Join(noKey[v], ", ") + ": no key (" + v + " is unset)")
		if len(failing) > 0 {
			b.WriteString(", so " + strings.Join(failing, ", ") + " will fail")
		}
		b.WriteString(".\n")
	}
	for _, id := range sortedKeys(dropped) {
		b.WriteString("    " + id + " routes only to its experts with a key (not " + strings.Join(dropped[id], ", ") + ").\n")
	}
	if builtin {
		b.WriteString("    For the built-in simulator instead: OPENAI_API_KEY= ANTHROPIC_API_KEY= make run\n")
	}
	b.WriteString("\n")
	return b.String()
}

// sortedKeys is m's keys in order.
func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// onlySimulated reports whether every provider of cfg is the built-in simulator, which plays a
// model from a [[sim script: …]] in the prompt (the agents walk-through's).
func onlySimulated(cfg *config.Config) bool {
	for _, p := range cfg.Providers {
		if p.BaseURL != config.SimulatorURL {
			return false
		}
	}
	return true
}
