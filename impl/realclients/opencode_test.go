package realclients_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/connect"
)

// opencode is opencode's native binary, from its linux/amd64 package (opencode-linux-x64, what
// the opencode-ai package installs as an optional dependency on this platform; the lock holds
// the platform package alone, as it does Node.js: npm resolving opencode-ai here records only
// this platform's packages in the lock, and npm ci then refuses it as incomplete).
func (c clients) opencode() string {
	return filepath.Join(c.modules, "opencode-linux-x64", "bin", "opencode")
}

// testOpencode: `opencode run` with exactly the settings the console and `tollgate connect
// opencode` give a person (connect.Opencode: the gateway as an OpenAI-compatible provider, the
// key from TOLLGATE_API_KEY, the model's limit and cost as the console reads them), its
// models.dev catalogue fetch, update check and sharing off, on a model with one price
// (service-flint-base) and on the fusion model whose experts are priced differently
// (service-flint, whose cost holds a long-context tier too). The turn streams from
// /v1/chat/completions, the token counts opencode reports are the ones the gateway billed, and
// the cost opencode computes for each step is the step's tokens at the configured rates: on
// service-flint-base the gateway's bill for the same call, but for the gateway rounding each
// part up to a micro-unit; on service-flint at least the bill (the expert that answered is
// billed at its own, lower rates).
func testOpencode(t *testing.T, c clients, fx fixture) {
	for _, model := range []string{"service-flint-base", "service-flint"} {
		t.Run(model, func(t *testing.T) { opencodeTurn(t, c, fx, model) })
	}
}

// opencodeTurn is one `opencode run` on model with connect.Opencode's settings, and its checks.
func opencodeTurn(t *testing.T, c clients, fx fixture, model string) {
	tenant := fx.gw.NewTenant(t, "opencode-"+model, 0, 100_000_000)
	rec := newRecorder(t, fx.gw.URL, tenant.Key)
	sb := newSandbox(t, c, rec)
	facts := connect.Facts(fx.gw.Config, model)
	if facts == nil {
		t.Fatalf("the configuration has no %s", model)
	}
	setup := connect.Opencode(connect.Target{BaseURL: rec.URL, Key: tenant.Key, ChatModel: model, Chat: facts})
	if setup.Unavailable != "" || len(setup.Blocks) == 0 || setup.Blocks[0].Lang != "json" ||
		!strings.Contains(setup.Blocks[0].Text, `"cost"`) || !strings.Contains(setup.Blocks[0].Text, `"limit"`) {
		t.Fatalf("connect.Opencode gave no configuration with the model's cost and limit: %+v", setup)
	}
	writeFile(t, filepath.Join(sb.work, "opencode.json"), setup.Blocks[0].Text)
	for k, v := range map[string]string{
		connect.KeyVariable:                tenant.Key,
		"OPENCODE_DISABLE_MODELS_FETCH":    "1",
		"OPENCODE_DISABLE_AUTOUPDATE":      "1",
		"OPENCODE_DISABLE_SHARE":           "1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
	} {
		sb.env[k] = v
	}
	r := run(t, rec, sb, c.opencode(), "run", "--format", "json", "Say hi")
	if r.err != nil {
		t.Errorf("opencode exited with %v", r.err)
	}
	var text string
	var steps []opencodeStep
	for _, ev := range jsonLines(r.stdout) {
		part, _ := ev["part"].(map[string]any)
		switch ev["type"] {
		case "error":
			t.Errorf("opencode reported an error: %v", ev["error"])
		case "text":
			text += fmt.Sprint(part["text"])
		case "step_finish":
			steps = append(steps, stepOf(part))
		}
	}
	if strings.TrimSpace(text) == "" {
		t.Errorf("opencode printed no text")
	}
	checkInference(t, rec, "/v1/chat/completions", model)
	calls := 0
	for _, ex := range rec.snapshot() {
		if ex.Path() == "/v1/chat/completions" && ex.Method == http.MethodPost && ex.Status == http.StatusOK {
			calls++
			if !strings.Contains(string(ex.RequestBody), `"stream":true`) {
				t.Errorf("opencode asked without streaming: %.200s", ex.RequestBody)
			}
		}
	}
	// opencode's first run may also ask the model for a session title: every call is billed,
	// and the steps it prints are the main agent's calls among them.
	records := usageRecords(t, fx.gw, tenant.Account.ID, calls)
	var input, output, billedIn, billedOut int64
	for _, s := range steps {
		input, output = input+s.tokens.Input(), output+s.tokens.Output
	}
	for _, u := range records {
		billedIn += u.Tokens().Input()
		billedOut += u.Tokens().Output
	}
	if input == 0 || output == 0 || input > billedIn || output > billedOut {
		t.Errorf("opencode counted %d input and %d output tokens; the gateway billed %d and %d over %d calls", input, output, billedIn, billedOut, len(records))
	}
	checkOpencodeCost(t, steps, records, *facts)
	checkOpencodeModel(t, run(t, rec, sb, c.opencode(), "models", "tollgate", "--verbose"), model, *facts)
	rec.checkEgressBut(t, map[string]string{
		"CONNECT registry.npmjs.org:443": "opencode installs its own plugin package (@opencode-ai/plugin) into its configuration directory on first run; refused, it runs without it",
	})
}

// checkOpencodeModel: `opencode models tollgate --verbose` shows the model as opencode holds
// it, its limit and cost read from the settings connect gave it: the model's window and output
// bound, and its rates in US dollars per million tokens (cache writes at the five-minute rate).
func checkOpencodeModel(t *testing.T, r clientRun, model string, f connect.ModelFacts) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("opencode models exited with %v: %s", r.err, r.stderr)
	}
	var m struct {
		Cost struct {
			Input, Output float64
			Cache         struct{ Read, Write float64 }
		}
		Limit struct{ Context, Output int }
	}
	_, body, _ := strings.Cut(string(r.stdout), "tollgate/"+model+"\n")
	if err := json.NewDecoder(strings.NewReader(body)).Decode(&m); err != nil {
		t.Fatalf("opencode models does not show %s: %v\n%s", model, err, r.stdout)
	}
	usd := func(micros int64) float64 { return float64(micros) / 1e6 }
	rates := f.Price.Rates
	if m.Limit.Context != f.ContextTokens || m.Limit.Output != f.MaxOutputTokens ||
		m.Cost.Input != usd(rates.Input) || m.Cost.Output != usd(rates.Output) ||
		m.Cost.Cache.Read != usd(rates.CacheRead) || m.Cost.Cache.Write != usd(rates.CacheWrite5m) {
		t.Errorf("opencode holds %s with %+v; the gateway's window %d, output bound %d and rates %+v", model, m, f.ContextTokens, f.MaxOutputTokens, rates)
	}
}

// opencodeStep is a step_finish event of `opencode run --format json`: the step's tokens, as
// opencode splits them (input less cache reads and writes, output less reasoning), and the
// cost it computed for them in US dollars.
type opencodeStep struct {
	tokens price.Tokens
	cost   float64
}

// stepOf reads a step_finish event's part.
func stepOf(part map[string]any) opencodeStep {
	num := func(m map[string]any, k string) int64 { v, _ := m[k].(float64); return int64(v) }
	tokens, _ := part["tokens"].(map[string]any)
	cache, _ := tokens["cache"].(map[string]any)
	cost, _ := part["cost"].(float64)
	reasoning := num(tokens, "reasoning")
	return opencodeStep{cost: cost, tokens: price.Tokens{Uncached: num(tokens, "input"), CacheRead: num(cache, "read"),
		CacheWrite5m: num(cache, "write"), Output: num(tokens, "output") + reasoning, Reasoning: reasoning}}
}

// checkOpencodeCost: each step's cost as opencode computed it is its tokens at the rates
// connect gave opencode, exactly (opencode's arithmetic is decimal), and against the usage
// record of the same call (the same token counts): equal to the bill but for the gateway's
// rounding up of each token kind's part to a whole micro-unit when the model has one price,
// and not below it when the rates given are the dearest expert's.
func checkOpencodeCost(t *testing.T, steps []opencodeStep, records []store.UsageRecord, f connect.ModelFacts) {
	t.Helper()
	if len(steps) == 0 {
		t.Error("opencode printed no step_finish event")
	}
	matched := map[string]bool{}
	for _, s := range steps {
		rates, _ := f.Price.RatesFor(s.tokens.Input())
		exact := new(big.Rat)
		for _, p := range [][2]int64{{s.tokens.Uncached, rates.Input}, {s.tokens.CacheRead, rates.CacheRead},
			{s.tokens.CacheWrite5m, rates.CacheWrite5m}, {s.tokens.Output, rates.Output}} {
			exact.Add(exact, big.NewRat(p[0]*p[1], 1_000_000_000_000))
		}
		want, _ := exact.Float64()
		if math.Abs(s.cost-want) > 1e-12 {
			t.Errorf("opencode's cost of %+v is $%.9f; at the rates connect gave it, $%.9f", s.tokens, s.cost, want)
		}
		i := slices.IndexFunc(records, func(u store.UsageRecord) bool {
			got := u.Tokens()
			return !matched[u.RequestID] && got.Uncached == s.tokens.Uncached && got.CacheRead == s.tokens.CacheRead &&
				got.CacheWrite5m == s.tokens.CacheWrite5m && got.Output == s.tokens.Output
		})
		if i < 0 {
			t.Errorf("no usage record has the tokens of opencode's step, %+v", s.tokens)
			continue
		}
		u := records[i]
		matched[u.RequestID] = true
		// The bill rounds each of the four kinds' parts up to a whole micro-unit.
		over := float64(u.CostMicros) - s.cost*1e6
		t.Logf("opencode's step: %+v, $%.9f; the gateway billed %d micro-units (%s, %s)", s.tokens, s.cost, u.CostMicros, u.Provider, u.UpstreamModel)
		switch {
		case f.HighestOfExperts && over >= 4:
			t.Errorf("opencode's figure for a step, $%.9f, is below the bill, %d micro-units, at the dearest expert's rates", s.cost, u.CostMicros)
		case !f.HighestOfExperts && (over < -1e-6 || over >= 4):
			t.Errorf("opencode's figure for a step, $%.9f, is not the bill, %d micro-units, within its rounding", s.cost, u.CostMicros)
		}
	}
}

// checkEgressBut is checkEgress with some destinations allowed, each with the reason: a
// client's own housekeeping that carries nothing of the gateway's (no key, no prompt).
func (rec *recorder) checkEgressBut(t *testing.T, allowed map[string]string) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, dest := range rec.refused {
		if reason, ok := allowed[dest]; ok {
			t.Logf("refused %s, allowed: %s", dest, reason)
			continue
		}
		t.Errorf("client tried to reach %s (refused by the recorder)", dest)
	}
}
