package bench

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/sim"
)

// TestRelay: a request through the relay gets the simulator's answer, whole or streamed.
func TestRelay(t *testing.T) {
	up := httptest.NewServer(sim.New(sim.Options{}))
	defer up.Close()
	relay := httptest.NewServer(Relay(up.URL))
	defer relay.Close()
	post := func(body string) *http.Response {
		res, err := http.Post(relay.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := post(`{"model":"sim-general","messages":[{"role":"user","content":"hi"}],"max_tokens":8}`)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(b), `"chat.completion"`) {
		t.Fatalf("%d %s: %s", res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	res = post(`{"model":"sim-general","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"stream":true}`)
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	last := ""
	for sc.Scan() {
		if sc.Text() != "" {
			last = sc.Text()
		}
	}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") || last != "data: [DONE]" {
		t.Fatalf("stream: %s, last line %q", res.Header.Get("Content-Type"), last)
	}
	res = post(`{"model":"no-such-model","messages":[]}`)
	res.Body.Close()
	if res.StatusCode != 404 && res.StatusCode != 400 {
		t.Fatalf("an upstream error passed through as %d", res.StatusCode)
	}
}

func TestMedianAndSteal(t *testing.T) {
	if m := median([]float64{5, 1, 3}); m != 3 {
		t.Errorf("odd: %v", m)
	}
	if m := median([]float64{4, 1, 3, 100}); m != 3.5 {
		t.Errorf("even: %v", m)
	}
	if m := median(nil); m != 0 {
		t.Errorf("empty: %v", m)
	}
	if p := stealPercent(10, 1000, 20, 2000); p != 1 {
		t.Errorf("steal %v", p)
	}
	if p := stealPercent(10, 1000, 10, 1000); p != 0 {
		t.Errorf("no time: %v", p)
	}
}
