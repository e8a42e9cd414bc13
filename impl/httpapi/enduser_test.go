package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/enduserid"
	"github.com/tollgate/tollgate/impl/sealedid"
	"github.com/tollgate/tollgate/impl/sim"
)

// endUserSender sends one request through an official SDK naming the end user raw ("" names
// none) and returns the x-tollgate-dropped-fields of its answer.
type endUserSender func(t *testing.T, key, raw string) string

// endUserRoutes are the requests TestEndUserIDsAreNamespacedPerAccount sends: each client
// format to an upstream of its own format and to translated ones.
func endUserRoutes(g *apitest.Gateway) map[string]endUserSender {
	ctx := context.Background()
	chat := func(model string, field string) endUserSender {
		return func(t *testing.T, key, raw string) string {
			p := openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")}}
			if raw != "" && field == "user" {
				p.User = openai.String(raw)
			} else if raw != "" {
				p.SafetyIdentifier = openai.String(raw)
			}
			var res *http.Response
			c := openAIClient(g, t, key)
			if _, err := c.Chat.Completions.New(ctx, p, option.WithResponseInto(&res)); err != nil {
				t.Fatalf("chat %s: %v", model, err)
			}
			return res.Header.Get("x-tollgate-dropped-fields")
		}
	}
	resp := func(model string) endUserSender {
		return func(t *testing.T, key, raw string) string {
			p := responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")}}
			if raw != "" {
				p.SafetyIdentifier = openai.String(raw)
			}
			var res *http.Response
			c := openAIClient(g, t, key)
			if _, err := c.Responses.New(ctx, p, option.WithResponseInto(&res)); err != nil {
				t.Fatalf("Responses %s: %v", model, err)
			}
			return res.Header.Get("x-tollgate-dropped-fields")
		}
	}
	messages := func(model string) endUserSender {
		return func(t *testing.T, key, raw string) string {
			p := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))}}
			if raw != "" {
				p.Metadata = anthropic.MetadataParam{UserID: anthropic.String(raw)}
			}
			var res *http.Response
			c := anthropicClient(g, t, key)
			if _, err := c.Messages.New(ctx, p, aoption.WithResponseInto(&res)); err != nil {
				t.Fatalf("Messages %s: %v", model, err)
			}
			return res.Header.Get("x-tollgate-dropped-fields")
		}
	}
	return map[string]endUserSender{
		"chat to chat (safety_identifier)": chat("service-flint-base", "safety_identifier"),
		"chat to chat (user)":              chat("service-flint-base", "user"),
		"chat to Messages":                 chat("chat-via-messages", "safety_identifier"),
		"chat to Responses":                chat("test-responses", "safety_identifier"),
		"Responses to Responses":           resp("test-responses"),
		"Responses to chat":                resp("service-flint-base"),
		"Messages to Messages":             messages("service-sonnet"),
		"Messages to chat":                 messages("messages-via-chat"),
		"Messages to Responses":            messages("messages-via-responses"),
	}
}

// upstreamEndUsers are the end-user identifiers of the simulator's last request: chat and
// Responses safety_identifier and user, Messages metadata.user_id (absent ones left out).
func upstreamEndUsers(t *testing.T, g *apitest.Gateway) []string {
	t.Helper()
	var body struct {
		SafetyIdentifier *string `json:"safety_identifier"`
		User             *string `json:"user"`
		Metadata         *struct {
			UserID *string `json:"user_id"`
		} `json:"metadata"`
	}
	raw := g.Sim.LastRequest().Body
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("upstream request %s: %v", raw, err)
	}
	var ids []string
	for _, s := range []*string{body.SafetyIdentifier, body.User} {
		if s != nil {
			ids = append(ids, *s)
		}
	}
	if body.Metadata != nil && body.Metadata.UserID != nil {
		ids = append(ids, *body.Metadata.UserID)
	}
	return ids
}

var (
	accountIDForm = regexp.MustCompile(`^tg_[a-z2-7]{26}$`)
	endUserIDForm = regexp.MustCompile(`^tg_[a-z2-7]{26}_[a-z2-7]{26}$`)
)

// TestEndUserIDsAreNamespacedPerAccount (security review s14h7): a client's end-user
// identifiers (OpenAI safety_identifier and user, Anthropic metadata.user_id) went to the
// provider as they came, through the operator's one upstream account: one account could name
// another tenant's end users (and have the provider block them), and a request without one
// left the provider nothing to attribute abuse to below the operator's organisation. Each
// client format, to an upstream of its own format and translated, through the official SDKs
// and read where the simulator received it: the upstream is sent an identifier of the
// gateway's in place of the raw value, the same for the same account and value every time
// and on every route, another for another account sending the same value; a request naming
// no end user is sent the account's own identifier (the prefix of its end users'); each opens
// to its account under the gateway's key; nothing of it is named in x-tollgate-dropped-fields.
func TestEndUserIDsAreNamespacedPerAccount(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	acme := g.NewTenant(t, "acme", 0, 10_000_000)
	beta := g.NewTenant(t, "beta", 0, 10_000_000)
	const raw = "alice@example.com"
	secret, err := g.Store.Secret(context.Background(), sealedid.SecretName)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := enduserid.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{} // tenant -> its identifier of raw, on every route
	own := map[string]string{}  // tenant -> its own identifier
	for name, send := range endUserRoutes(g) {
		t.Run(name, func(t *testing.T) {
			for _, tenant := range []apitest.Tenant{acme, beta} {
				var first string
				for range 2 {
					if dropped := send(t, tenant.Key, raw); dropped != "" {
						t.Errorf("%s: dropped %q", tenant.Account.Name, dropped)
					}
					ids := upstreamEndUsers(t, g)
					if len(ids) != 1 || !endUserIDForm.MatchString(ids[0]) || strings.Contains(ids[0], "alice") {
						t.Fatalf("%s sent %q: the upstream was sent %q, want one identifier of the form %s\n%s", tenant.Account.Name, raw, ids, endUserIDForm, g.Sim.LastRequest().Body)
					}
					if first != "" && ids[0] != first {
						t.Errorf("%s: the same value was sent as %q, then %q", tenant.Account.Name, first, ids[0])
					}
					first = ids[0]
				}
				if s, ok := seen[tenant.Account.Name]; ok && s != first {
					t.Errorf("%s: %q here, %q on another route", tenant.Account.Name, first, s)
				}
				seen[tenant.Account.Name] = first

				send(t, tenant.Key, "")
				ids := upstreamEndUsers(t, g)
				if len(ids) != 1 || !accountIDForm.MatchString(ids[0]) || !strings.HasPrefix(first, ids[0]+"_") {
					t.Fatalf("%s sent no end user: the upstream was sent %q, want the account's identifier, the prefix of %q", tenant.Account.Name, ids, first)
				}
				if s, ok := own[tenant.Account.Name]; ok && s != ids[0] {
					t.Errorf("%s: its own identifier is %q here, %q on another route", tenant.Account.Name, ids[0], s)
				}
				own[tenant.Account.Name] = ids[0]
			}
			for _, tenant := range []apitest.Tenant{acme, beta} {
				// The operator maps an identifier back with the gateway's key (tollgate admin
				// account end-user).
				for _, id := range []string{seen[tenant.Account.Name], own[tenant.Account.Name]} {
					if p, err := enduserid.Parse(id); err != nil || keys.Open(p) != tenant.Account.ID {
						t.Errorf("%s: %q does not open to the account: %v", tenant.Account.Name, id, err)
					}
				}
			}
			if seen["acme"] == seen["beta"] || own["acme"] == own["beta"] {
				t.Errorf("two accounts share identifiers: %q and %q, %q and %q", seen["acme"], seen["beta"], own["acme"], own["beta"])
			}
		})
	}
}

// TestEndUserIDsPassThrough: a provider configured end_user_ids: pass_through is sent the
// client's end-user identifier as it came, to an upstream of the client's format and
// translated, and none when the client sent none; another provider of the same gateway still
// gets the gateway's.
func TestEndUserIDsPassThrough(t *testing.T) {
	cfg := contractConfig(t)
	for i := range cfg.Providers {
		if cfg.Providers[i].Name != "sim-openai-responses" {
			cfg.Providers[i].EndUserIDs = config.EndUserIDsPassThrough
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	acme := g.NewTenant(t, "acme", 0, 10_000_000)
	const raw = "alice@example.com"
	routes := endUserRoutes(g)
	for _, name := range []string{"chat to chat (safety_identifier)", "chat to chat (user)", "chat to Messages", "Responses to chat", "Messages to Messages", "Messages to chat"} {
		routes[name](t, acme.Key, raw)
		if ids := upstreamEndUsers(t, g); len(ids) != 1 || ids[0] != raw {
			t.Errorf("%s: the upstream was sent %q, want %q as the client sent it", name, ids, raw)
		}
		routes[name](t, acme.Key, "")
		if ids := upstreamEndUsers(t, g); len(ids) != 0 {
			t.Errorf("%s without an end user: the upstream was sent %q, want none", name, ids)
		}
	}
	routes["Messages to Responses"](t, acme.Key, raw)
	if ids := upstreamEndUsers(t, g); len(ids) != 1 || !endUserIDForm.MatchString(ids[0]) {
		t.Errorf("Messages to a namespaced Responses provider: the upstream was sent %q", ids)
	}
}

// servedSimulatorConfig is contractConfig with every provider pointed at a simulator served at
// a plain http://127.0.0.1 address, as an "OpenAI-compatible" or Anthropic-compatible server
// of the operator's would be (not builtin:simulator, a host known to take the end-user
// fields), each provider's end_user_ids set to endUserIDs ("" leaves its default); and the
// simulator, for apitest.Options.Sim, where the requests it received are read.
func servedSimulatorConfig(t *testing.T, endUserIDs string) (*config.Config, *sim.Simulator) {
	t.Helper()
	simulator := sim.New(sim.Options{})
	server := httptest.NewServer(simulator)
	t.Cleanup(server.Close)
	cfg := contractConfig(t)
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		if p.BaseURL != config.SimulatorURL {
			continue
		}
		p.BaseURL = server.URL
		if p.Kind != config.KindAnthropicMessages {
			p.BaseURL += "/v1"
		}
		p.EndUserIDs = endUserIDs
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg, simulator
}

// clientEndUserField is the field a route's client names its end user in.
func clientEndUserField(route string) string {
	switch {
	case strings.HasPrefix(route, "Messages"):
		return "metadata"
	case strings.Contains(route, "(user)"):
		return "user"
	}
	return "safety_identifier"
}

// sameFormatRoute reports whether a route of endUserRoutes goes to an upstream of the
// client's own format.
func sameFormatRoute(route string) bool {
	return strings.HasPrefix(route, "chat to chat") || route == "Responses to Responses" || route == "Messages to Messages"
}

// TestEndUserIDsAtAnotherHost (follow-up of s14h7): the gateway added "safety_identifier" (or
// Anthropic's metadata) to every request, and its field to every translated one, whatever the
// upstream; an "OpenAI-compatible" or Anthropic-compatible API that refuses fields it does
// not know (Azure OpenAI on older api-versions, Mistral's 422) then refuses every request
// after an upgrade. A provider at a host not known to take the fields (here the simulator
// served at http://127.0.0.1) is, by default: sent the gateway's identifier of a value the
// client sent in the same format; nothing when the client sent none; and on a translation no
// field of the target's, the client's dropped and named in x-tollgate-dropped-fields.
func TestEndUserIDsAtAnotherHost(t *testing.T) {
	cfg, simulator := servedSimulatorConfig(t, "")
	g := apitest.Start(t, apitest.Options{Config: cfg, Sim: simulator})
	acme := g.NewTenant(t, "acme", 0, 10_000_000)
	const raw = "alice@example.com"
	for name, send := range endUserRoutes(g) {
		t.Run(name, func(t *testing.T) {
			if dropped := send(t, acme.Key, ""); dropped != "" {
				t.Errorf("no end user: dropped %q", dropped)
			}
			if ids := upstreamEndUsers(t, g); len(ids) != 0 {
				t.Errorf("no end user: the upstream was sent %q, want no field the client did not send\n%s", ids, g.Sim.LastRequest().Body)
			}
			dropped := send(t, acme.Key, raw)
			ids := upstreamEndUsers(t, g)
			if sameFormatRoute(name) {
				if len(ids) != 1 || !endUserIDForm.MatchString(ids[0]) || dropped != "" {
					t.Errorf("the upstream was sent %q (dropped %q), want the gateway's identifier of the client's value\n%s", ids, dropped, g.Sim.LastRequest().Body)
				}
				return
			}
			if len(ids) != 0 || dropped != clientEndUserField(name) {
				t.Errorf("translated: the upstream was sent %q, dropped %q; want none, and %q named dropped\n%s", ids, dropped, clientEndUserField(name), g.Sim.LastRequest().Body)
			}
		})
	}
}

// TestEndUserIDsOff: a provider configured end_user_ids: off is sent no end-user identifier,
// not even the client's, to an upstream of the client's format or translated; the client's
// field is named in x-tollgate-dropped-fields. namespaced_always at the same host is what the
// known hosts get by default (TestEndUserIDsAreNamespacedPerAccount's identifiers).
func TestEndUserIDsOff(t *testing.T) {
	cfg, simulator := servedSimulatorConfig(t, config.EndUserIDsOff)
	g := apitest.Start(t, apitest.Options{Config: cfg, Sim: simulator})
	acme := g.NewTenant(t, "acme", 0, 10_000_000)
	for name, send := range endUserRoutes(g) {
		if dropped := send(t, acme.Key, "alice@example.com"); dropped != clientEndUserField(name) {
			t.Errorf("%s: dropped %q, want %q", name, dropped, clientEndUserField(name))
		}
		if ids := upstreamEndUsers(t, g); len(ids) != 0 {
			t.Errorf("%s: the upstream was sent %q, want none\n%s", name, ids, g.Sim.LastRequest().Body)
		}
		if dropped := send(t, acme.Key, ""); dropped != "" {
			t.Errorf("%s without an end user: dropped %q", name, dropped)
		}
	}

	cfg, simulator = servedSimulatorConfig(t, config.EndUserIDsNamespacedAlways)
	g = apitest.Start(t, apitest.Options{Config: cfg, Sim: simulator})
	acme = g.NewTenant(t, "acme", 0, 10_000_000)
	for name, send := range endUserRoutes(g) {
		send(t, acme.Key, "")
		if ids := upstreamEndUsers(t, g); len(ids) != 1 || !accountIDForm.MatchString(ids[0]) {
			t.Errorf("%s, namespaced_always, no end user: the upstream was sent %q, want the account's identifier", name, ids)
		}
	}
}
