package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// anthropicMediaTypes are the source media types Anthropic's Messages API accepts, in lower
// case only (https://platform.claude.com/docs/en/build-with-claude/vision: "image/jpeg,
// image/png, image/gif, or image/webp"; PDF support: "application/pdf").
var anthropicMediaTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true, "application/pdf": true, "text/plain": true}

// TestMediaTypeCaseIsNormalised: a Messages client that sends an image's or a document's
// media type in another case ("image/PNG", "Application/PDF", as a file's extension or a
// header gives it) got Anthropic's 400 through the gateway, which relayed the type as sent:
// the stand-in refuses a type not in Anthropic's list as Anthropic does. The relayed request
// now carries the types in lower case, without parameters, and is served; the rest of the
// client's bytes reach the provider as they were sent.
func TestMediaTypeCaseIsNormalised(t *testing.T) {
	var mu sync.Mutex
	var received []byte
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		received = body
		mu.Unlock()
		var req struct {
			Messages []struct {
				Content []struct {
					Source struct {
						MediaType string `json:"media_type"`
					} `json:"source"`
				} `json:"content"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "application/json")
		for _, b := range req.Messages[0].Content {
			if mt := b.Source.MediaType; mt != "" && !anthropicMediaTypes[mt] {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"messages.0.content.0.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"},"request_id":"req_01"}`)
				return
			}
		}
		_, _ = io.WriteString(w, `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"A chart and its report."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3000,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":20}}`)
	}))
	t.Cleanup(up.Close)
	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "claude", Kind: config.KindAnthropicMessages, BaseURL: up.URL})
	cfg.Models = append(cfg.Models, config.Model{ID: "vision-sonnet", Family: config.FamilyMessages, OwnedBy: "test",
		Price: config.Price{InputPerMTok: 3_000_000, OutputPerMTok: 15_000_000}, MaxOutputTokens: 1000, ContextTokens: 200_000,
		Backend: &config.Upstream{Provider: "claude", Model: "claude-sonnet-4-5"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "vision-sonnet")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	// A one-pixel PNG and a one-page PDF, base64.
	const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	const pdf = "JVBERi0xLjQKMSAwIG9iaiA8PCAvVHlwZSAvUGFnZSA+PiBlbmRvYmoK"
	body := `{"model":"vision-sonnet","max_tokens":100, "messages":[{"role":"user","content":[` +
		`{"type":"image","source":{"type":"base64","media_type":"image/PNG","data":"` + png + `"}},` +
		`{"type":"document","source":{"type":"base64","media_type":"Application/PDF; name=report.pdf","data":"` + pdf + `"}},` +
		`{"type":"text","text":"Describe the chart and the report."}]}]}`
	status, answer := post(t, g, tenant.Key, "/v1/messages", body)
	if status != http.StatusOK {
		t.Fatalf("%d %.300s", status, answer)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{`"media_type":"image/png","data":"` + png + `"`, `"media_type":"application/pdf","data":"` + pdf + `"`, `"max_tokens":100, "messages":`} {
		if !strings.Contains(string(received), want) {
			t.Errorf("the provider received %s; want it to hold %s", received, want)
		}
	}
}
