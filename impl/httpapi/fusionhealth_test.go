package httpapi_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/routing"
	"github.com/tollgate/tollgate/impl/sim"
)

// routerClock is a clock for the gateway's router that the test moves, read from the
// gateway's request goroutines.
type routerClock struct{ at atomic.Int64 }

func newRouterClock() *routerClock {
	c := &routerClock{}
	c.at.Store(time.Now().UnixNano())
	return c
}

func (c *routerClock) now() time.Time          { return time.Unix(0, c.at.Load()) }
func (c *routerClock) advance(d time.Duration) { c.at.Add(int64(d)) }
func (c *routerClock) router() *routing.Router { return routing.NewRouter(c.now) }

// flintChat is a chat completions request to service-flint.
func flintChat(prompt string, stream bool) request {
	return request{"POST", "/v1/chat/completions", chatBody("service-flint", prompt, stream, 16)}
}

// general is the expert service-flint prefers for a small plain request (general, fast).
const general = "sim-openai-chat/sim-general"

// TestFusionSlowCallDoesNotStick: the router learns the answering try's own time to first
// byte, not the whole call's with its retries and Retry-After waits, and a failed call adds
// no latency at all (trial D2: the first call to the preferred expert failed after 4 s of
// 429s, which became its latency and kept service-flint's traffic off it for good). After a
// call that waited out two Retry-Afters before its answer, and after a first call that failed
// the same way, the preferred expert keeps serving; three failed calls in a row move traffic
// off it until 30 s after the last failure, and then it serves again.
func TestFusionSlowCallDoesNotStick(t *testing.T) {
	clock := newRouterClock()
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t), Sim: s, Router: clock.router()})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	auth := map[string]string{"Authorization": "Bearer " + tenant.Key}
	ask := func(what, prompt string) string {
		t.Helper()
		status, h, body := do(t, c, g.URL, flintChat(prompt, false), auth)
		if status != 200 {
			t.Fatalf("%s: %d %s", what, status, body)
		}
		return h.Get("x-tollgate-expert")
	}

	// The first request the expert ever gets fails: three 429s, two Retry-Afters of 1 s waited
	// out, then the next expert serves.
	t0 := time.Now()
	if got := ask("first request", "hello [[sim fault=429 retry_after=1 times=3 tag=d2-first]]"); got == general {
		t.Fatalf("the failing expert answered")
	}
	if took := time.Since(t0); took < 2*time.Second {
		t.Fatalf("the first request took %v: the Retry-Afters were not waited out", took)
	}
	for i := range 2 {
		if got := ask("plain", fmt.Sprintf("hello %d", i)); got != general {
			t.Fatalf("plain request %d after one failed call went to %s, not %s", i, got, general)
		}
	}
	// An answer after two Retry-Afters: the answering try was quick.
	if got := ask("slow answer", "hello [[sim fault=429 retry_after=1 times=2 tag=d2-slow]]"); got != general {
		t.Fatalf("the request with two 429s went to %s", got)
	}
	if got := ask("plain", "hello again"); got != general {
		t.Fatalf("after an answer that waited out two Retry-Afters, a plain request went to %s", got)
	}

	// Three failed calls in a row (each of three tries) push the expert back for 30 s.
	for range 9 {
		s.Enqueue("sim-general", sim.Fault{Kind: sim.FaultStatus, Status: 502})
	}
	for i := range 3 {
		if got := ask("failing", fmt.Sprintf("fail %d", i)); got == general {
			t.Fatalf("failing request %d was answered by %s", i, got)
		}
	}
	if got := ask("plain", "after the failures"); got == general {
		t.Fatalf("after three failures in a row the expert still serves")
	}
	clock.advance(routing.FailureWindow + time.Second)
	if got := ask("plain", "after the window"); got != general {
		t.Fatalf("30 s after its last failure, a plain request went to %s, not %s", got, general)
	}
}

// TestFusionBrokenStreamsCount: a stream the upstream breaks off after its head (its
// connection dropped, an in-band overloaded error) counts against the expert's health, as a
// failure before the head does (trial D3: twelve such streams in a row left service-flint's
// traffic on the expert). Three dropped streams in a row move traffic off it until 30 s after the
// last; then in-band 529s move it off again.
func TestFusionBrokenStreamsCount(t *testing.T) {
	clock := newRouterClock()
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t), Router: clock.router()})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	auth := map[string]string{"Authorization": "Bearer " + tenant.Key}
	stream := func(prompt string, broken bool) string {
		t.Helper()
		status, h, body := do(t, c, g.URL, flintChat(prompt, true), auth)
		if status != 200 || broken != strings.Contains(string(body), `"error"`) {
			t.Fatalf("%q: %d, want an in-band error %v: %s", prompt, status, broken, body)
		}
		return h.Get("x-tollgate-expert")
	}
	// Three in a row are a run of failures (routing's policy), as three failed calls are.
	for i := range 3 {
		if got := stream(fmt.Sprintf("hello %d [[sim fault=drop after=2]]", i), true); got != general {
			t.Fatalf("dropped stream %d was served by %s, not %s", i, got, general)
		}
	}
	if got := stream("hello plain", false); got == general {
		t.Fatalf("after 3 dropped streams in a row the expert still serves")
	}
	clock.advance(routing.FailureWindow + time.Second)
	if got := stream("hello after the window", false); got != general {
		t.Fatalf("30 s after the last dropped stream a plain request went to %s, not %s", got, general)
	}
	for i := range 4 {
		if got := stream(fmt.Sprintf("hello %d [[sim fault=midstream status=529 after=2]]", i), true); got != general {
			return // moved off
		}
	}
	t.Errorf("4 in-band overloaded errors in a row left the traffic on %s", general)
}

// TestFusionOneTenantsLongPromptsMoveNoOtherTenant: service-flint learns its experts' time to
// first byte per request size and per account (security review s14h9: the time was one
// average per expert for every tenant, so account A's long prompts, slow to their first byte
// as any long prompt is, made the expert serving account B's short requests look slow, and
// B's traffic moved to another expert, dearer or worse for it: one answer of 6 s weighed 1.2 s
// of the average, 2.4 points). A prompt of A's of about 6,700 tokens answered in 6 s leaves
// B's short requests on the expert they went to, and sends A's next prompt of that size
// elsewhere; a short request of A's answered as slowly (a non-streamed answer's head comes
// after all of it), one voice against B's, leaves B's where they were too.
func TestFusionOneTenantsLongPromptsMoveNoOtherTenant(t *testing.T) {
	clock := newRouterClock()
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t), Router: clock.router()})
	a := g.NewTenant(t, "tenant-a", 0, 50_000_000)
	b := g.NewTenant(t, "tenant-b", 0, 50_000_000)
	c := g.Client(t)
	ask := func(who apitest.Tenant, what, prompt string) string {
		t.Helper()
		status, h, body := do(t, c, g.URL, flintChat(prompt, false), map[string]string{"Authorization": "Bearer " + who.Key})
		if status != 200 {
			t.Fatalf("%s: %d %s", what, status, body)
		}
		return h.Get("x-tollgate-expert")
	}
	long := strings.Repeat("lorem ipsum dolor sit amet ", 750) // 20,250 bytes: a medium request
	if got := ask(b, "B's first", "hello"); got != general {
		t.Fatalf("B's short request went to %s, not %s", got, general)
	}
	if got := ask(a, "A's long prompt", long+"[[sim first_ms=6000]]"); got != general {
		t.Fatalf("A's long prompt went to %s, not %s", got, general)
	}
	for i := range 3 {
		if got := ask(b, "B's short", fmt.Sprintf("hello %d", i)); got != general {
			t.Fatalf("after A's slow long prompt, B's short request %d went to %s, not %s", i, got, general)
		}
	}
	if got := ask(a, "A's next long prompt", long+"again"); got == general {
		t.Errorf("A's next long prompt went to %s, slow for its size", got)
	}
	if got := ask(a, "A's slow short", "hi [[sim first_ms=6000]]"); got != general {
		t.Fatalf("A's short request went to %s, not %s", got, general)
	}
	for i := range 3 {
		if got := ask(b, "B's short", fmt.Sprintf("hello again %d", i)); got != general {
			t.Fatalf("after A's slow short request, B's short request %d went to %s, not %s", i, got, general)
		}
	}
}
