package exchange

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/provider"
	"github.com/tollgate/tollgate/impl/routing"
	"github.com/tollgate/tollgate/impl/telemetry"
)

// minResponsesOutput is the smallest max_output_tokens the Responses API accepts.
const minResponsesOutput = 16

// largeBody is the body size above which the input is estimated from the request's neutral
// form, whatever the upstream: images and files, counted by the byte, would look far larger
// than they are.
const largeBody = 64 << 10

// Request is one inference request as its caller hands it to the exchange: the body in the
// caller's wire format, and who asks.
type Request struct {
	// Client is the wire format of Body, and of the answer.
	Client llm.Format
	// Body is the request as the client sent it; it is read, never changed.
	Body []byte
	// View is Body read once (its top-level members), as the edge's validator read it; nil to
	// have the exchange read it.
	View *jsonview.View
	// Forward holds the headers passed to an upstream of the client's format as they came
	// (anthropic-version, anthropic-beta); nil for none.
	Forward http.Header
	// Principal is the verified caller.
	Principal auth.Principal
	// RequestID is the request's id: its reservation's and its usage record's, which the
	// ledger bills once.
	RequestID string
	// neutral is the request in the neutral form, given in place of Body by an in-process
	// caller (Engine.Call): nothing is parsed, and every expert is sent an encoding of it.
	neutral *llm.Request
}

// Exchange is one inference request from the moment an upstream accepted it. It owns the
// request's reservation and the upstream's response until it is settled: exactly one of
// Answer, Stream or SettleUndelivered settles it, and Close releases the upstream response.
type Exchange struct {
	eng       *Engine
	ctx       context.Context
	client    llm.Format
	principal auth.Principal
	requestID string
	model     *routing.Model
	expert    routing.Expert
	// cred is the account's own key the current expert's call was sent with (nil: the
	// operator's), whose words of the upstream's are cleared of it (withoutKey).
	cred    *provider.Credential
	res     *http.Response
	stream  bool
	include bool   // chat stream_options.include_usage
	echo    []byte // what a Responses stream's response objects echo from the request
	// echoReq is the request echo was made of, kept when the request was fitted (nil when it
	// was not read), to echo the bound its expert was sent (responsesEcho).
	echoReq *llm.Request
	dropped []string
	clamped string // the clamped output bound, "field=limit", or ""
	// fitted is the output bound a request without one was fitted to, its caller's credit not
	// covering the model's whole bound (reserveFitted); 0 when it was not.
	fitted int
	// hostedBounds are the calls of each hosted tool passed to the upstream that the
	// reservation covers: the most that are billed.
	hostedBounds llm.HostedCalls
	inputEst     int64
	// documentTokens is what the pages of the request's inline documents count, at their
	// bound, in inputEst (convert.DocumentTokens), and in the input billed when the upstream
	// never said it.
	documentTokens int64
	// askedOutput is the output bound the client asked for (or the limit it was clamped to),
	// times the choices it asked for (0 when it gave no bound): the most output it is billed
	// for, even when an upstream's own minimum made the gateway ask for more.
	askedOutput int64
	// compaction is what the reservation holds for the output of server-side compaction
	// (compactionTokens; 0 when the request does not ask for it): an OpenAI Responses answer
	// that compacted may be billed that much beyond askedOutput, its usage not telling the
	// compaction pass's output from the answer's.
	compaction int64
	// prediction is what the reservation holds for a predicted output's rejected tokens
	// (predictionTokens; 0 for a request without one): a chat answer's completion_tokens hold
	// them beyond askedOutput.
	prediction int64
	// tries observes the current expert's upstream tries (observeTries), kept here so that
	// observing them allocates nothing.
	tries tryObserver
	ir    *llm.Request
	// view and parsed are the request's view and its neutral form where start read it (ir, or
	// a large body's; nil when it did not), for billedInput; billedIn is what billedInput
	// found, once.
	view       *jsonview.View
	parsed     *llm.Request
	billedOnce sync.Once
	billedIn   int64
	reserve    *billing.Reservation
	started    time.Time
	opts       *callOptions // an in-process call's (call.go); nil for a Request from an edge
	// attemptStart is when the answering upstream attempt began; upstreamWait the time spent
	// waiting for upstreams (calls, answer reads); ttft a stream's time to its first event;
	// usage what the settlement read (tracing.go).
	attemptStart time.Time
	upstreamWait time.Duration
	ttft         time.Duration
	usage        llm.Usage
	// answerChars are the characters of a complete answer whose upstream reported no output
	// (Answer), billed as a stream without usage is.
	answerChars int
	// tr is the exchange's tracing state; nil while tracing is off (tracing.go).
	tr *exchangeTrace
	// calls are the calls to the experts (callNext).
	calls calls
	// live is the upstream response being read (x.res), for CloseUpstream, which other
	// goroutines call; brokenObserved says that the answering expert's failure was counted
	// against its health already (failOverStream).
	live           atomic.Pointer[http.Response]
	brokenObserved bool
	// headMu guards what the response's head says of the expert serving the answer (expert,
	// dropped, clamped) where the goroutine that runs the exchange changes it during a stream
	// (callNext, failOverStream) and Serving reads it from another: the edge's heartbeat timer
	// may commit the head of a stream whose events are held (Stream).
	headMu sync.Mutex
	// held are the stream's events held back before its upstream's first output (Stream);
	// its array is kept from one expert's stream to the next, its copies are not.
	held heldOpening
	// answer is a non-streamed answer's body, read whole in start before the exchange is
	// returned (readAnswerOf), so that an answer cut short or unusable fails over to the next
	// expert; Close returns it to its pool. For an answer of the client's own format,
	// answerView is its parsed top level and answerUsage its usage; for another format,
	// answerResp its decoded form.
	answer      *[]byte
	out         *[]byte // the same-format answer as written to the client (Answer)
	answerView  jsonview.View
	answerUsage llm.Usage
	answerResp  *llm.Response
}

// ResolveModel is the model id names for principal p on a route of format client, for a route
// that names a model without calling it (count_tokens, the Responses WebSocket's warm-up):
// model not found when the id is unknown or the account may not use it, and, for a model of
// the caller's sent to the other family's route, model not found naming the route that serves
// it (a model the caller may not use is not even said to exist); for a model whose every expert
// is on a provider that takes only accounts with a key of their own and the account has none
// there (Reachable), the 403 upstream_key_required a request to it gets, so that such a route
// never accepts what the request that follows is refused.
func (eng *Engine) ResolveModel(ctx context.Context, p auth.Principal, id string, client llm.Format) (*routing.Model, error) {
	m, grants, err := eng.resolveModel(ctx, p, id, client)
	if err != nil {
		return nil, err
	}
	if provider := eng.keyRequiredBy(grants, m); provider != "" {
		return nil, upstreamKeyRequired(provider)
	}
	return m, nil
}

// resolveModel is ResolveModel with the account's grants, which hold its end-user identifiers.
func (eng *Engine) resolveModel(ctx context.Context, p auth.Principal, id string, client llm.Format) (*routing.Model, *Grants, error) {
	m, ok := eng.registry.Load().Model(id)
	if !ok || !p.AllowsModel(id) {
		// A model outside the key's subset is answered as one that does not exist.
		return nil, nil, apierror.ModelNotFound(id)
	}
	allowed, grants, err := eng.access.allowed(ctx, p.AccountID, id)
	if err != nil {
		return nil, nil, err
	}
	if !allowed {
		return nil, nil, apierror.ModelNotFound(id)
	}
	if m.Family != familyFor(client) {
		return nil, nil, apierror.ModelOnOtherRoute(id, familyRoute(m.Family))
	}
	return m, grants, nil
}

// keyCap is the credit cap of the caller's key, or nil: a key without one pays nothing for it.
func keyCap(p auth.Principal) *billing.KeyCap {
	if p.Limits == nil || !p.Limits.HasCap {
		return nil
	}
	return &billing.KeyCap{KeyID: p.KeyID, CapMicros: p.Limits.CapMicros, Period: p.Limits.CapPeriod}
}

// familyRoute is the route that serves a model family (chat models also answer on
// /v1/responses).
func familyRoute(family string) string {
	if family == config.FamilyMessages {
		return "/v1/messages"
	}
	return "/v1/chat/completions or POST /v1/responses"
}

// familyFor says which model family serves a client format.
func familyFor(f llm.Format) string {
	if f == llm.FormatMessages {
		return config.FamilyMessages
	}
	return config.FamilyChat
}

// Start does everything that can still fail before the answer: it resolves the model,
// reserves the worst-case cost, and calls upstreams (with retries and failover) until one
// answers. Its errors are the apierror vocabulary (a refused model, insufficient credit, an
// upstream failure) or the context's; nothing is reserved when it fails. The returned Exchange
// owns the reservation and the upstream response.
//
// An error after upstreams were called carries the time spent waiting for them
// (UpstreamWaitOf), so that the edge does not count it as its own.
func (eng *Engine) Start(ctx context.Context, r Request) (*Exchange, error) {
	var waited time.Duration
	x, err := eng.start(ctx, r, nil, &waited)
	if err != nil && waited > 0 {
		return nil, &waitedError{error: err, wait: waited}
	}
	return x, err
}

// waitedError is an error of Start after its upstream calls took wait.
type waitedError struct {
	error
	wait time.Duration
}

func (e *waitedError) Unwrap() error { return e.error }

// UpstreamWaitOf is the time a failed Start waited for upstreams (0 when it called none): the
// edge takes it out of the request's own time, as it does an answer's (trial h8 D19: every
// failed try and back-off of an upstream outage was counted as the gateway's added time).
func UpstreamWaitOf(err error) time.Duration {
	var w *waitedError
	if errors.As(err, &w) {
		return w.wait
	}
	return 0
}

// start is Start with an in-process call's options (nil for a Request from an edge); on an
// error it leaves in *waited the time its upstream calls took.
func (eng *Engine) start(ctx context.Context, r Request, o *callOptions, waited *time.Duration) (_ *Exchange, startErr error) {
	p, client, body, view, forward := r.Principal, r.Client, r.Body, r.View, r.Forward
	var (
		modelID            string
		stream             bool
		maxTokens, choices int
		err                error
	)
	if r.neutral != nil {
		modelID, stream, maxTokens, choices = r.neutral.Model, r.neutral.Stream, r.neutral.MaxTokens, max(r.neutral.N, 1)
	} else {
		if view == nil {
			if view, err = convert.ReadRequest(body); err != nil {
				return nil, err
			}
		}
		peek, err := convert.PeekRequest(client, view)
		if err != nil {
			return nil, err
		}
		modelID, stream, maxTokens, choices = peek.Model, peek.Stream, peek.MaxTokens, peek.Choices
		// The meter has no audio kind: audio in or out is refused whatever the upstream, before
		// anything is reserved (a request without it pays a look-up; see convert.AudioRefusal).
		if err := convert.AudioRefusal(client, view); err != nil {
			return nil, err
		}
	}
	if choices > 1 && stream {
		// A stream cut short is billed from the text it carried, which the decoders read for
		// the first choice only; and only a chat upstream could stream several.
		return nil, apierror.Invalid("n", "'n' is %d, but a streamed answer through tollgate has one choice: set 'n' to 1 or 'stream' to false", choices)
	}
	m, grants, err := eng.resolveModel(ctx, p, modelID, client)
	if err != nil {
		return nil, err
	}
	// A bound beyond the model's limit is clamped to it, not refused (coding agents ask for
	// 32000 of any model they do not know); the reservation and the bill follow the clamp.
	outBound := min(maxTokens, m.MaxOutputTokens)
	if outBound <= 0 {
		outBound = m.MaxOutputTokens
	}

	// The neutral form is needed to translate and to read the fusion router's features; a base
	// model on a same-format upstream passes the bytes through without it.
	var ir *llm.Request
	needIR := m.Fusion
	for _, e := range m.Experts {
		needIR = needIR || e.Kind != client
	}
	size, escapes := 0, 0
	if view != nil {
		escapes = view.UnicodeEscapes()
		size = len(body) - 5*escapes
	}
	inputEst := int64(sizeEstimate(size, escapes))
	features := routing.Features{OutputTokens: maxTokens, Stream: stream} // OutputTokens: what the client asked for; 0 when it did not say
	// onlySameFormat is set when the request cannot be put in the neutral form (it holds what
	// only its own format knows): it may still go, untouched, to an upstream of its format.
	onlySameFormat := false
	if r.neutral != nil {
		ir, needIR = r.neutral, true
	} else if needIR {
		if ir, err = convert.DecodeView(client, view); err != nil {
			if !hasExpertOfKind(m, client) {
				return nil, err
			}
			ir, onlySameFormat = nil, true
		}
	}
	// parsed is the request's neutral form where it was read (nil when it cannot be: it holds
	// what only its own format knows), and read says whether reading it was tried. A large body,
	// or one that may hold an image, is read even when its bytes go through untouched: providers
	// bill an image by the picture, not by its bytes (a URL's are a few dozen), and the neutral
	// form's estimate counts each image at the most the model's provider bills for one (trial
	// h12 D9: 48,169 tokens at gpt-4o-mini).
	parsed, read := ir, needIR
	if !read && view != nil && (size > largeBody || convert.MayHoldImages(client, view)) {
		parsed, _ = convert.DecodeView(client, view)
		read = true
	}
	// The context check uses a lenient count (convert.ContextBytesPerToken: six bytes a token,
	// more than any natural text averages) so that only a request over the window by any count
	// is refused, and one near the limit is the provider's to judge; the reservation keeps the
	// cautious one (three bytes a token), not capped at the context window: a
	// request admitted near the limit may be above it by the provider's count, which an upstream
	// with a longer window (Anthropic's 1M-token beta the client asks for) bills, at its
	// long-context rates (trial h12 D11: capped, the reservation never reached that tier, and 10 %
	// of such a request's cost was waived).
	contextEst := size / convert.ContextBytesPerToken
	switch {
	case parsed != nil:
		// Images count at their billing bound in the reservation, at the fewest tokens one
		// takes in the context check (convert.ContextImageTokens).
		cautious, inContext := convert.EstimateInput(parsed, m.ImageTokens)
		inputEst, contextEst = int64(cautious), inContext
	case read:
		// Known by its size alone, its images are counted by their markers (at least one
		// each) at the model's bound.
		inputEst += int64(convert.ImageMarkers(client, body)) * int64(m.ImageTokens)
	}
	// A document sent inline is billed by its pages (each page's text and an image of it), not
	// by its bytes: a compact PDF holds a page in a few hundred bytes. Its pages are reserved at
	// their bound besides its size; the context check keeps counting it by its size, leaving
	// its pages to the provider's count (convert.DocumentTokens). A request without a document
	// pays a look-up.
	documentTokens := convert.DocumentTokens(client, view, m.ImageTokens)
	inputEst = billing.SaturatingAdd(inputEst, documentTokens)
	if m.ContextTokens > 0 && contextEst > m.ContextTokens {
		return nil, &apierror.Error{Kind: apierror.KindInvalidRequest, Param: inputField(client), Code: "context_length_exceeded",
			Message: contextOverflowMessage(client, contextEst, m.ContextTokens, modelID)}
	}
	features.InputTokens = int(inputEst)
	if m.Fusion && len(m.Experts) > 1 {
		// Only the fusion router reads the request's features, and only once the request is
		// known to fit the context window; the code test reads a bounded window of the text.
		if ir != nil {
			features.Tools = len(ir.Tools) > 0
			features.Code = routing.LooksLikeCode(lastUserText(ir))
		} else {
			features.Tools = view.Has("tools")
			features.Code = routing.LooksLikeCodeBytes(body)
		}
	}
	// Anthropic writes a tool-use system prompt, and the definitions of its own client tools,
	// into a request that offers tools: input the request's bytes do not hold.
	toolPrompt := toolPromptTokens(m, client, view, ir)
	// asked is the bound the request itself gave (0: none); an in-process call's bound may be
	// lowered to its ceiling below, which is not the request's.
	asked := maxTokens
	if o != nil && o.ceiling > 0 {
		if outBound, err = o.fit(m, billing.SaturatingAdd(inputEst, toolPrompt), outBound, choices); err != nil {
			return nil, err
		}
		maxTokens = outBound
	}

	requestID := r.RequestID
	// n choices may each be as long as the bound (the upstream's usage counts them all); hosted
	// tools (a web search) may each be called up to their configured bound.
	// Every input token is reserved at the dearest input kind (a one-hour cache write is twice
	// the input price at Anthropic) and at the long-context tier when the input may reach it.
	// A request naming a priced service tier (OpenAI's priority, dearer than standard) is
	// reserved at that tier's rates too.
	// Hosted tools' calls are reserved at their prices, and the input they may bring in (a
	// search's results) with the request's own (money trial D1: a search turn's results were
	// not reserved, and two thirds of its cost was waived).
	tier := convert.RequestedServiceTier(client, view)
	var hostedFees, hostedInput, hostedCalls int64
	if m.HostedPriced && view != nil {
		present := convert.HostedToolsIn(client, view)
		hostedFees, hostedInput = m.HostedWorst(client, present)
		hostedCalls = m.HostedCalls(client, present)
	}
	// Server-side compaction is a sampling step of its own: its summary is billed as output
	// whatever max_tokens says, and read back as input by the step after it; reserved for its
	// answer alone, such a turn's summary was billed beyond the hold, or waived. With server
	// tools, a summary may be written before each of the turn's sampling steps.
	compaction := compactionTokens(m, client, view, hostedCalls)
	input := billing.SaturatingAdd(billing.SaturatingAdd(inputEst, hostedInput), compaction)
	input = billing.SaturatingAdd(input, toolPrompt)
	// A predicted output's tokens that the answer does not use are billed as output beyond
	// the bound, by an upstream of the chat format (any other drops the member).
	prediction := predictionTokens(m, client, view, choices)
	w := worstCase{input: input, compaction: compaction, prediction: prediction, hostedFees: hostedFees, choices: choices, price: m.MaxPrice(), tier: tier}
	worst := w.at(outBound)
	var admission trace.Span
	if telemetry.Enabled() && telemetry.Recording(ctx) {
		_, admission = telemetry.StartInternal(ctx, "admission")
	}
	reservation, err := eng.meter.ReserveForKey(ctx, p.AccountID, requestID, worst, keyCap(p))
	fitted := 0
	if err != nil {
		// A request without an output bound is fitted to the credit the refusal names; one
		// with a bound is told what the credit affords (reserveFitted). An in-process call
		// fitted to its ceiling is fitted again when the account's free credit (or its key's
		// cap) is less, down to the smallest call its ceiling allows.
		floor := minFittedOutput
		if o != nil {
			floor = minAgentOutput
		}
		reservation, fitted, err = eng.reserveFitted(ctx, p, requestID, &w, outBound, asked, floor, maxTokensField(client, view), err)
		if fitted > 0 {
			outBound, worst = fitted, w.at(fitted)
			if o != nil {
				maxTokens = fitted
			}
		}
	}
	endAdmission(admission, worst, reservation, err)
	if err != nil {
		return nil, err
	}
	x := &Exchange{eng: eng, ctx: ctx, client: client, principal: p, requestID: requestID, model: m, stream: stream, fitted: fitted,
		inputEst: inputEst, documentTokens: documentTokens, compaction: compaction, prediction: prediction, ir: ir, view: view, parsed: parsed, reserve: reservation, started: time.Now(), opts: o}
	defer func() {
		if startErr != nil && waited != nil {
			*waited = x.upstreamWait
		}
	}()
	if admission != nil {
		x.tr = &exchangeTrace{capture: telemetry.CaptureContent(p.AccountID)}
	}
	if client == llm.FormatChat && stream {
		x.include = convert.IncludeUsage(view)
	}
	if client == llm.FormatResponses && stream {
		// A stream's response objects echo the request as the whole answer does; a request
		// that only its own format can read echoes the defaults.
		if !read {
			parsed, _ = convert.DecodeView(client, view)
		}
		x.echo = convert.ResponsesEchoMembers(parsed)
		if fitted > 0 {
			x.echoReq = parsed
		}
	}
	callCtx, unlink := eng.upstreamContext(ctx)
	order := eng.router.Order(m, features)
	if maxTokens > 0 {
		// A request is clamped to an expert's lower limit only when no expert can produce
		// what it asked for.
		order = firstWhere(order, func(e routing.Expert) bool { return e.MaxOutputTokens == 0 || e.MaxOutputTokens >= outBound })
	}
	if ir != nil && hasUntranslatableTools(ir) {
		// Tools only the client's format can express (a Responses namespace, a custom tool,
		// a server tool) would be dropped by a translation: an expert of that format serves
		// the request whole, so it goes first.
		order = firstWhere(order, func(e routing.Expert) bool { return e.Kind == client })
	}
	x.calls = calls{order: order, features: features, forward: forward, tier: tier, modelID: modelID, outBound: outBound, maxTokens: maxTokens,
		choices: choices, onlySameFormat: onlySameFormat, endUser: grants.endUser, accountKeys: grants.upstreamKeys}
	a := &x.calls
	// The upstream calls run under callCtx, which a shutdown's end of grace (EndStreams) also
	// cancels while no upstream has begun its answer: a request still waiting then gets the
	// shutdown's error instead of the connection's close (trial h12 D3). Once an answer began,
	// the link is cut (its body is read under ctx, and a stream ends at EndStreams itself).
	if x.callNext(callCtx) {
		unlink()
		return x, nil
	}
	lastErr, refusal, calledAny, refused, bodyFailed := a.lastErr, a.refusal, a.calledAny, a.refused, a.bodyFailed
	var called routing.Expert
	if calledAny {
		called = a.order[a.called]
	}
	unlink()
	if calledAny && eng.streamsEnd.Err() != nil {
		// The shutdown's grace period ended while the upstream was silent: nothing reached
		// the client, which is told to retry, and nothing is billed (docs/billing.md: the
		// abandoned prompt is the operator's, a failure of the gateway's own making).
		x.expert = called
		x.SettleUndelivered(llm.Usage{}, "shutdown")
		return nil, errShuttingDown
	}
	if ctx.Err() != nil && calledAny && !refused && o == nil {
		// The client went away while an upstream had its request: the provider has the
		// prompt and bills it, so the request is billed its input, as a stream the client
		// leaves is billed what it had (trial h1: no usage record at all). An in-process
		// caller's step is retried under its own id, and is billed by the retry. A client
		// that leaves while the call waits out an upstream's refusal (a 429's Retry-After)
		// is not billed: no upstream took the prompt (trial h12 D8).
		x.expert = called
		x.Settle(llm.Usage{}, 0, "client_disconnected")
		return nil, ctx.Err()
	}
	if bodyFailed != "" {
		// The last expert answered with a head and then an unusable body: nothing reached
		// the client and nothing is billed; the record keeps the failure for the operator.
		x.expert = called
		x.SettleUndelivered(x.answerUsage, bodyFailed)
		return nil, lastErr
	}
	reservation.Release()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if lastErr == nil && refusal != nil {
		// No expert could take the request as it is.
		return nil, refusal
	}
	var e *apierror.Error
	if !errors.As(lastErr, &e) {
		eng.logger(requestID).Error("no upstream could serve the request", "err", lastErr)
		return nil, &apierror.Error{Kind: apierror.KindUpstream, Message: "no upstream could serve the request"}
	}
	return nil, lastErr
}

// calls is what an exchange's calls to its experts need and found: the experts in the
// router's order and the next to call, what each call is made of, and how the calls so far
// went. start calls them until one answers; a stream whose upstream fails before its first
// output calls the rest (Stream).
type calls struct {
	order []routing.Expert
	next  int
	// features are what the router read from the request: an answer teaches it the expert's
	// latency for requests of their size class (routing.Router.Observe).
	features routing.Features
	// What each call is made of: the client's headers to forward, the service tier asked
	// for, the model id as the client named it, the output bound (clamped to the model's),
	// the bound the client asked for (0: none), its choices; onlySameFormat: the request can
	// go to an expert of its own format only.
	forward        http.Header
	tier           string
	modelID        string
	outBound       int
	maxTokens      int
	choices        int
	onlySameFormat bool
	// endUser puts the account's end-user identifiers in place of the client's (for an
	// expert whose provider does not take them as they came).
	endUser *convert.EndUser
	// accountKeys are the account's own upstream keys by provider (nil: none): an expert on a
	// provider it has one for is called with it (credentialFor).
	accountKeys map[string]accountKey

	// lastErr is the last upstream failure; refusal why an expert could not take the request
	// as it is (a field it cannot honour), which another expert may still serve: the first
	// expert's reason, or a same-format expert's, which names what the gateway itself refuses
	// rather than what a translation lacks.
	lastErr, refusal  error
	refusalSameFormat bool
	// called is the index in order of the expert last called, when calledAny says a call was
	// made.
	called    int
	calledAny bool
	// refused says that the last call ended with the upstream's refusal (an HTTP status: a
	// 429 whose Retry-After the call was waiting out, say): no upstream holds the prompt.
	// bodyFailed is the usage record's status when the last call's answer was unusable after
	// its head (readAnswerOf), "" otherwise.
	refused    bool
	bodyFailed string
}

// callNext calls the experts of x.calls from the next one on, under callCtx, until one
// answers: it then holds the answer (x.expert, x.res and what goes with them) and reports
// true. It reports false when none did, or when one's failure says that no other would do
// better (the request's own fault, the client gone, a shutdown); x.calls says why.
func (x *Exchange) callNext(callCtx context.Context) bool {
	eng, a, ctx, client := x.eng, &x.calls, x.ctx, x.client
	for a.next < len(a.order) {
		e := a.order[a.next]
		a.next++
		if a.onlySameFormat && e.Kind != client {
			continue
		}
		up, ok := eng.upstreams[e.Provider]
		if !ok {
			a.lastErr = fmt.Errorf("no upstream %q", e.Provider)
			continue
		}
		cred, err := a.credentialFor(up)
		if err != nil {
			// Not sent with the operator's key instead: the next expert may serve it.
			a.lastErr = err
			continue
		}
		// The expert's bound: the model's, or its own limit when that is lower.
		bound := a.outBound
		if e.MaxOutputTokens > 0 {
			bound = min(bound, e.MaxOutputTokens)
		}
		ur, err := upstreamBody(client, x.view, x.ir, e, x.stream, bound, a.maxTokens, a.tier, a.endUser)
		if err != nil {
			if a.refusal == nil || (e.Kind == client && !a.refusalSameFormat) {
				a.refusal, a.refusalSameFormat = err, e.Kind == client
			}
			continue
		}
		t0 := time.Now()
		tries := x.observeTries(e, bound)
		a.called, a.calledAny = a.next-1, true
		x.cred = cred
		res, _, err := up.CallObserved(callCtx, ur.body, x.stream, a.forward, tries, cred)
		x.upstreamWait += time.Since(t0)
		// The router learns the answering try's own time to first byte: not the tries that
		// failed before it, nor the back-off between them, nor a non-streamed body's read.
		ttfb := time.Since(tries.start)
		if err == nil && !x.stream {
			// A non-streamed answer is read whole before anything reaches the client: one cut
			// short, malformed, or a 200 that carries an error (some OpenAI-compatible servers
			// answer so) fails over to the next expert like a failed call, and counts against
			// the expert's health (trial of upstream failures D1: a fusion model whose expert
			// dropped its bodies answered 502 to every request, and that expert kept its rank).
			// Read under the call's context, still linked to the shutdown's: an expert tried
			// after this one must be cut off at the end of grace as the first was (the review
			// of D1).
			if status, rerr := x.readAnswerOf(e, res); rerr != nil {
				tries.failAnswer(status, rerr)
				if provider.ErrorInAnswer(rerr) {
					// An error in place of the answer: judged below as the failed call of the
					// status its kind stands for, as the same error in place of a stream is
					// (provider.AnswerError): the request's fault is the client's 400, anything
					// else a failed try like a 429 or a 5xx.
					err = rerr
				} else {
					a.lastErr, a.bodyFailed, a.refused = rerr, status, false
					if ctx.Err() != nil || eng.streamsEnd.Err() != nil {
						return false
					}
					eng.router.Observe(e.Key, x.principal.AccountID, a.features, 0, true) // a failure counts against health, not latency
					eng.logger(x.requestID).Warn("upstream answer unusable; "+x.onward(), "expert", e.Key, "status", status, "err", rerr)
					continue
				}
			} else {
				a.bodyFailed = ""
			}
		}
		if err == nil {
			// The answering try's operation runs from its own start: not the expert's first
			// try's (the tries that failed and the back-off between them are no operation's).
			// It counts for requests of this one's size, as one account's voice among those
			// the expert answered (trial s14h9: one tenant's long prompts moved the others).
			eng.router.Observe(e.Key, x.principal.AccountID, a.features, ttfb, false)
			x.res, x.hostedBounds = res, ur.hosted
			x.live.Store(res)
			x.attemptStart = tries.start
			if x.tr != nil {
				x.tr.attempt = tries.span
			}
			x.askedOutput = 0
			clamped := ""
			// A fitted bound is the most output the reservation covers: billed no further.
			if asked := max(a.maxTokens, x.fitted); asked > 0 {
				// The client is billed for at most the bound it asked for, or the clamp.
				x.askedOutput = int64(min(asked, bound)) * int64(a.choices)
				if e.Kind == llm.FormatResponses {
					// OpenAI reports a compaction pass's output in the answer's output_tokens,
					// if at all: billed up to the bound reserved for it (compactionTokens).
					x.askedOutput = billing.SaturatingAdd(x.askedOutput, x.compaction)
				}
				if e.Kind == llm.FormatChat {
					// Rejected prediction tokens are in the answer's completion_tokens, beyond
					// the bound: billed up to what was reserved for them (predictionTokens).
					x.askedOutput = billing.SaturatingAdd(x.askedOutput, x.prediction)
				}
				if a.maxTokens > bound {
					clamped = maxTokensField(client, x.view) + "=" + strconv.Itoa(bound)
					if ur.thinkingBudget > 0 {
						clamped += ", thinking.budget_tokens=" + strconv.Itoa(ur.thinkingBudget)
					}
				}
			}
			x.headMu.Lock()
			x.expert, x.dropped, x.clamped = e, ur.dropped, clamped
			x.headMu.Unlock()
			return true
		}
		a.lastErr, a.bodyFailed = publicRefusal(err, e, a.modelID, client), ""
		// A refusal (an HTTP status), or a connection never made: no upstream has the prompt.
		et := provider.ErrorType(err)
		a.refused = (et != "" && et != "connection" && et != provider.NotAStream) || !provider.PromptSent(err)
		if et == provider.NotAStream && provider.Retryable(err) {
			// A 2xx that is not the stream asked for (a proxy's page, a whole JSON answer), or
			// an error in place of the answer that is not the request's fault: an answer that
			// came and could not be used, as a non-streamed one that cannot be read is. Nothing
			// reached the client and nothing is billed; the usage record keeps the failure for
			// the operator should no other expert answer (an error that refuses the request
			// has none, as a 400 has none).
			a.bodyFailed = provider.NotAStream
		}
		if ctx.Err() != nil || eng.streamsEnd.Err() != nil {
			return false
		}
		if !provider.Retryable(err) {
			// The upstream refused this request (a 400, say): the caller's doing, which says
			// nothing about the expert's health and must not move other callers' traffic.
			return false
		}
		if cred != nil && provider.AccountKeyRefused(err) {
			// The account's own key was refused: the account's doing, not the expert's (its
			// health is the same for every other account); another expert may serve it.
			eng.logger(x.requestID).Warn("upstream refused the account's own key; "+x.onward(), "expert", e.Key, "err", err)
			continue
		}
		if cred != nil && ownKeysDoing(err) {
			// The rate limit or quota of the account's own key's upstream account, or a model
			// its project may not use: nothing the other accounts meet on their keys.
			eng.logger(x.requestID).Warn("upstream failed with the account's own key; "+x.onward(), "expert", e.Key, "err", err)
			continue
		}
		eng.router.Observe(e.Key, x.principal.AccountID, a.features, 0, true) // a failure counts against health, not latency
		eng.logger(x.requestID).Warn("upstream failed; "+x.onward(), "expert", e.Key, "err", err)
	}
	return false
}

// onward is how a failed call's log line ends: "trying the next expert" while one of the
// experts after it may still be called (not one that a request that can go to its own format
// only skips, nor one on a provider the account cannot be sent to), "no expert left"
// otherwise, so that the line after the last try does not promise another. It runs on a
// failure only.
func (x *Exchange) onward() string {
	a := &x.calls
	for _, e := range a.order[a.next:] {
		if a.onlySameFormat && e.Kind != x.client {
			continue
		}
		up, ok := x.eng.upstreams[e.Provider]
		if !ok {
			continue
		}
		if _, err := a.credentialFor(up); err == nil {
			return "trying the next expert"
		}
	}
	return "no expert left"
}

// credentialFor is the account's own credential for upstream up (nil: the operator's key is
// sent), or the error that keeps the account from it: its key there does not open, or the
// upstream takes only accounts with a key of their own and the account has none.
func (a *calls) credentialFor(up *provider.Upstream) (*provider.Credential, error) {
	if k, ok := a.accountKeys[up.Name]; ok {
		return k.cred, k.err
	}
	if up.AccountKeysRequired {
		return nil, upstreamKeyRequired(up.Name)
	}
	return nil, nil
}

// upstreamKeyRequired is the 403 of an account refused by provider, which takes only accounts
// with an upstream key of their own, for want of one: it names the provider and what the
// operator must do.
func upstreamKeyRequired(provider string) *apierror.Error {
	return &apierror.Error{Kind: apierror.KindForbidden, Code: UpstreamKeyRequiredCode,
		Message: "the provider " + provider + " serves only accounts with an upstream key of their own, and this account has none for it: " +
			"the operator must set one (tollgate admin provider-key set ACCOUNT " + provider + ")"}
}

// ownKeysDoing reports whether err, the failure of a call sent with the account's own key,
// says something of that key's upstream account rather than of the expert: a 4xx status, or an
// error answered with a 2xx that stands for one (its rate limit or exhausted quota, a 402, a
// model its project may not use; provider.JudgedStatus), which the other
// accounts, on other keys, do not meet; it must not count against the expert's health, which
// they share, or one tenant's limits would move every other tenant's traffic. A 5xx, a
// connection failure or a timeout is the provider's, and counts as with the operator's key.
func ownKeysDoing(err error) bool {
	s := provider.JudgedStatus(err)
	return s >= 400 && s < 500
}

// UpstreamKeyRequiredCode is the error code of a request that no upstream could be sent,
// every one that could serve it taking only accounts with a key of their own.
const UpstreamKeyRequiredCode = "upstream_key_required"

// hasUntranslatableTools reports whether a request offers tools that a translation to

// another format would leave out.
func hasUntranslatableTools(ir *llm.Request) bool {
	for _, u := range ir.Unmodelled {
		if strings.HasPrefix(u.Name, "tools[].") {
			return true
		}
	}
	return false
}

// firstWhere orders experts so that those for which first holds come before the others,
// each group in the given order. The slice is returned as it is when that is already so; the
// router's slice is never modified.
func firstWhere(order []routing.Expert, first func(routing.Expert) bool) []routing.Expert {
	i := slices.IndexFunc(order, func(e routing.Expert) bool { return !first(e) })
	if i < 0 || !slices.ContainsFunc(order[i:], first) {
		return order
	}
	out := make([]routing.Expert, 0, len(order))
	for _, e := range order {
		if first(e) {
			out = append(out, e)
		}
	}
	for _, e := range order {
		if !first(e) {
			out = append(out, e)
		}
	}
	return out
}

// publicRefusal is err as the client sees it when expert e refused the request (a 400 with the
// upstream's words): the upstream's model id, which the gateway does not show, becomes the
// client's model id; and after a translation the upstream's param names a field of another
// format, which the client never sent, so it is left out. Any other error is returned as it is.
func publicRefusal(err error, e routing.Expert, modelID string, client llm.Format) error {
	var ae *apierror.Error
	if !errors.As(err, &ae) || ae.Kind != apierror.KindInvalidRequest {
		return err
	}
	c := *ae
	c.Message = inPublicWords(c.Message, e.Model, modelID)
	if e.Kind != client {
		c.Param = ""
	}
	return &c
}

// EstimateBySize is the cautious input estimate, in tokens, of a request body known only by
// its size (one the neutral form cannot hold), as the reservation makes it. Each \uXXXX escape
// counts as the one character it stands for: a client that escapes all non-ASCII text
// (Python's json.dumps does) sends six bytes a character, which must not count six times
// against the credit (a request's view counts its escapes in the validator's pass).
func EstimateBySize(body []byte) int {
	escapes := bytes.Count(body, []byte(`\u`))
	return sizeEstimate(len(body)-5*escapes, escapes)
}

// sizeEstimate is the cautious input estimate of a request known only by its (unescaped)
// size, of which escapes \uXXXX escapes count a byte each, for one that cannot be put in the
// neutral form. Each escape is counted as a token (convert.BytesPerToken bytes): it stands for
// a code point of its own, which a provider counts as at least one token in text made to be
// dense (a surrogate pair, two escapes, as two), where a byte is a third of one. A body of
// nothing but escapes was estimated at a third of a token each, and two thirds of its input
// went unreserved.
func sizeEstimate(size, escapes int) int {
	return (size+(convert.BytesPerToken-1)*escapes)/convert.BytesPerToken + 16
}

// inPublicWords is what an upstream said, as the client may read it: the upstream's model id,
// which the gateway does not show, becomes the client's. Only whole tokens are replaced: an
// occurrence counts when no identifier character touches it on either side (a letter, a digit,
// '_' or '-'; '.', '/' and ':' count only between identifier characters, so "gpt-4.1." at the
// end of a sentence is the model, "gpt-4.1.5" is not), so that a model named "h" leaves "the"
// alone.
func inPublicWords(said, upstreamModel, modelID string) string {
	if upstreamModel == "" || !strings.Contains(said, upstreamModel) {
		return said
	}
	var b strings.Builder
	written, from := 0, 0 // said[:written] is in b; the search goes on from said[from:]
	for {
		i := strings.Index(said[from:], upstreamModel)
		if i < 0 {
			b.WriteString(said[written:])
			return b.String()
		}
		start, end := from+i, from+i+len(upstreamModel)
		if tokenBoundary(said[:start], false) && tokenBoundary(said[end:], true) {
			b.WriteString(said[written:start])
			b.WriteString(modelID)
			written, from = end, end
			continue
		}
		_, n := utf8.DecodeRuneInString(said[start:])
		from = start + n
	}
}

// tokenBoundary reports whether side (the text before a match, or after it when after is set)
// ends (or starts) where a token may: with nothing, or with a character that is neither an
// identifier character nor inner punctuation next to one.
func tokenBoundary(side string, after bool) bool {
	r, n, next := rune(-1), 0, rune(-1)
	if after {
		r, n = utf8.DecodeRuneInString(side)
		if n < len(side) {
			next, _ = utf8.DecodeRuneInString(side[n:])
		}
	} else {
		r, n = utf8.DecodeLastRuneInString(side)
		if n < len(side) {
			next, _ = utf8.DecodeLastRuneInString(side[:len(side)-n])
		}
	}
	if n == 0 {
		return true
	}
	return !identRune(r) && !(innerPunct(r) && next >= 0 && identRune(next))
}

// identRune reports whether r may be part of a model id token: a letter, a digit, '_' or '-'.
func identRune(r rune) bool {
	return r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// innerPunct reports whether r joins a model id's parts ("gpt-4.1", "models/x", "a:b") when an
// identifier character follows or precedes it.
func innerPunct(r rune) bool { return r == '.' || r == '/' || r == ':' }

// upstreamRequest is a request body made for one expert, and what making it changed.
type upstreamRequest struct {
	body []byte
	// dropped names the advisory fields and tools left out.
	dropped []string
	// thinkingBudget is the Messages thinking budget lowered with a clamped bound (0: none).
	thinkingBudget int
	// hosted holds the bounds of the hosted tools passed through.
	hosted llm.HostedCalls
}

// upstreamBody is the request body for expert e: the client's bytes with the model replaced
// when the formats agree, else a translation. bound is the expert's output bound: the client's
// (asked, 0 when it gave none) lowered to the limit of the model and of the expert, or that
// limit when the client gave none, which the upstream is always sent: the reservation, and
// what the model's card promises, hold only for answers within it. tier is the service tier
// the request asks for (convert.RequestedServiceTier). endUser is the account's end-user
// identifiers, sent in place of the client's unless e's provider takes them as they came.
func upstreamBody(client llm.Format, view *jsonview.View, ir *llm.Request, e routing.Expert, stream bool, bound, asked int, tier string, endUser *convert.EndUser) (upstreamRequest, error) {
	var ur upstreamRequest
	if e.Kind == client && view != nil {
		// Provider-kept state is refused or turned off: every tenant reaches the provider
		// through one account. Usage is what the gateway bills: a streamed chat request asks
		// for it whatever the client asked (the usage chunk reaches only clients that asked).
		dropped, err := convert.SharedStateFields(client, view)
		if err != nil {
			return ur, err
		}
		// Every change to the client's bytes is an edit of its view, made in one copy below.
		var edits jsonview.Edits
		// Tools the provider runs and bills per call go only where they are priced.
		plan, err := convert.PlanHostedTools(client, view, e.HostedPolicy, &edits)
		if err != nil {
			return ur, err
		}
		ur.dropped, ur.hosted = append(dropped, plan.Dropped...), plan.Bounds
		// A service tier the catalog has no price for would be billed at the standard price.
		if convert.DropUnpricedTier(view, tier, &edits, e.Price.HasServiceTier) {
			ur.dropped = append(ur.dropped, "service_tier")
		}
		if client == llm.FormatMessages && convert.DropPremiumSpeed(view, &edits) {
			ur.dropped = append(ur.dropped, "speed")
		}
		if client == llm.FormatMessages && convert.DropFallbacks(view, &edits) {
			ur.dropped = append(ur.dropped, "fallbacks")
		}
		if client == llm.FormatMessages {
			// Anthropic takes only lower-case media types; the copy is made only when one is not.
			convert.NormalizeMediaTypes(view, &edits)
		}
		if client == llm.FormatMessages && asked > bound {
			// A thinking budget must stay below the clamped max_tokens.
			lowered, left, err := convert.FitThinking(view, bound, &edits)
			if err != nil {
				return ur, err
			}
			ur.thinkingBudget = lowered
			if left {
				ur.dropped = append(ur.dropped, "thinking")
			}
		}
		// A stored answer is kept by the provider under the operator's account: a Responses
		// request always says store: false (its API stores by default), a chat request only
		// when it asked for store (SharedStateFields named it), so that nothing is added to the
		// others.
		noStore := client == llm.FormatResponses || client == llm.FormatChat && slices.Contains(dropped, "store")
		ed := convert.UpstreamEdits{IncludeUsage: stream && client == llm.FormatChat, NoStore: noStore,
			MaxBound: bound, ClampKeys: convert.BoundKeys(client), Client: client}
		switch e.EndUserIDs {
		case config.EndUserNamespacedAlways, config.EndUserNamespaced:
			// The account's identifiers in place of the client's end-user ids, in the same
			// pass and copy as the model's rewrite (an HMAC only when the client sent one);
			// the account's own added to a request naming none only where the provider is
			// known to take the field.
			ed.EndUser, ed.AddEndUser = endUser, e.EndUserIDs == config.EndUserNamespacedAlways
		case config.EndUserOff:
			ur.dropped = append(ur.dropped, convert.DropEndUserIDs(client, view, &edits)...)
		}
		switch client {
		case llm.FormatResponses:
			// The Responses API refuses bounds under 16; the gateway accepts them (a chat or
			// Messages expert may serve the same request), and bills at most what was asked.
			ed.BoundKey, ed.MinBound = "max_output_tokens", minResponsesOutput
		case llm.FormatChat:
			ed.BoundKey = "max_completion_tokens"
		}
		if asked <= 0 && ed.BoundKey != "" {
			// Messages requests always carry max_tokens.
			ed.DefaultBound = bound
		}
		ur.body, err = convert.ForUpstream(nil, view, e.Model, ed, &edits)
		return ur, err
	}
	req := *ir
	if req.MaxTokens <= 0 || req.MaxTokens > bound {
		req.MaxTokens = bound
	}
	if e.Kind == llm.FormatResponses && req.MaxTokens < minResponsesOutput {
		// The Responses API refuses smaller bounds. The answer may be longer than asked; the
		// client is billed for at most what it asked for (settle caps the output).
		req.MaxTokens = minResponsesOutput
	}
	req.Stream = stream
	req.IncludeUsage = true
	var droppedEndUser []string
	if e.EndUserIDs == config.EndUserOff && req.Source == e.Kind {
		// The same format passes Extra through: the client's go with it unless left out.
		req, droppedEndUser = convert.WithoutEndUserIDs(req)
	}
	req.EndUser = translatedEndUser(&req, e, endUser)
	// OpenAI's service_tier is carried between its two formats; a tier the upstream's price has
	// no rates for is dropped, as on the same-format path (trial h14 D5: a priced flex tier was
	// dropped on every translation, and billed at twice its price).
	// (A tier is only read from a request that has it: req.Extra holds its service_tier.)
	unpricedTier := tier != "" && !e.Price.HasServiceTier(tier)
	if unpricedTier {
		req.Extra = maps.Clone(req.Extra)
		delete(req.Extra, "service_tier")
	}
	var err error
	ur.body, ur.dropped, err = convert.EncodeRequestWith(e.Kind, &req, e.Model, convert.EncodeOptions{AutomaticCache: e.AutomaticCache})
	if unpricedTier && err == nil {
		ur.dropped = append(ur.dropped, "service_tier")
	}
	if err == nil {
		ur.dropped = append(ur.dropped, droppedEndUser...)
	}
	return ur, err
}

// translatedEndUser is the end-user identifier a request put in another format (or an
// in-process caller's) is sent with, by e's end_user_ids: the client's value as it came
// (pass_through); the account's identifier of that value, or the account's own when it names
// none (namespaced_always); the account's identifier of a value the client sent in e's own
// format, else none (namespaced: another format's field is one the upstream may refuse);
// none (off). With none, EncodeRequest drops and names the client's field.
func translatedEndUser(req *llm.Request, e routing.Expert, endUser *convert.EndUser) string {
	value, named := convert.ClientEndUser(req)
	switch {
	case e.EndUserIDs == config.EndUserPassThrough:
		return value
	case e.EndUserIDs == config.EndUserOff || endUser == nil:
		return ""
	case e.EndUserIDs == config.EndUserNamespaced && (!named || req.Source != e.Kind):
		return ""
	case named:
		return string(endUser.AppendUser(nil, []byte(value)))
	}
	return endUser.ID
}

// hasExpertOfKind reports whether one of the model's upstreams speaks format f.
func hasExpertOfKind(m *routing.Model, f llm.Format) bool {
	for _, e := range m.Experts {
		if e.Kind == f {
			return true
		}
	}
	return false
}

// toolPromptTokens is the input an upstream of the Messages kind adds to the request (its view,
// or ir for an in-process call, of format client) for the tools it offers
// (convert.AnthropicToolTokens), when such an upstream may serve it; 0 otherwise.
func toolPromptTokens(m *routing.Model, client llm.Format, view *jsonview.View, ir *llm.Request) int64 {
	switch {
	case !hasExpertOfKind(m, llm.FormatMessages):
		return 0
	case view != nil:
		return int64(convert.AnthropicToolTokens(client, view))
	case ir != nil && len(ir.Tools) > 0:
		return convert.AnthropicToolPromptTokens
	}
	return 0
}

// predictionTokens is what the reservation holds, beyond the output bound, for the rejected
// tokens of a chat request's predicted output (convert.PredictionTokens) for each of its
// choices, when an upstream of the chat format may serve it (any other drops the member): 0
// for a request without one.
func predictionTokens(m *routing.Model, client llm.Format, v *jsonview.View, choices int) int64 {
	p := convert.PredictionTokens(client, v)
	if p == 0 || !hasExpertOfKind(m, client) {
		return 0
	}
	return p * int64(max(choices, 1))
}

// compactionTokens is what the reservation holds for the output of server-side compaction,
// when the request v of format client asks for it (convert.AsksForCompaction) and an upstream
// of the client's own format may serve it (the field is dropped on the way to any other): the
// model's output bound, the most one sampling step of the model writes, for each summary the
// turn may write (compactions). Neither provider bounds the compaction's output by a parameter
// or publishes a size for it: Anthropic's summary is written by the model that answers and
// reported apart (usage.iterations); OpenAI's compaction pass emits an encrypted item, and its
// guide says nothing of its usage beyond the response's one usage object
// (developers.openai.com/api/docs/guides/compaction). hostedCalls is the most server-tool
// calls the request may make (routing.Model.HostedCalls). A request without a
// context_management member pays a look-up.
func compactionTokens(m *routing.Model, client llm.Format, v *jsonview.View, hostedCalls int64) int64 {
	if !convert.AsksForCompaction(client, v) || !hasExpertOfKind(m, client) {
		return 0
	}
	return compactions(client, hostedCalls) * int64(m.MaxOutputTokens)
}

// serverToolIterations is the most sampling steps of one Messages request with server tools:
// Anthropic's server-side sampling loop stops at 10 iterations and answers with pause_turn
// (platform.claude.com/docs, *Server tools* and *Handling stop reasons*: "The server-side
// sampling loop has a default limit of 10 iterations").
const serverToolIterations = 10

// compactions is how many compaction summaries a turn of format client may write, when it asks
// for compaction and may make up to hostedCalls server-tool calls. Anthropic checks the
// compaction trigger "at the start of each sampling iteration" when server tools are used, so
// that "compaction might occur multiple times within a single request" (*Compaction*,
// "Combining with other features", Server tools): a turn takes a sampling step before its
// first call and one after each round of calls, at least one call a round, and no more than
// serverToolIterations in all. OpenAI publishes nothing of several passes in one response: one.
func compactions(client llm.Format, hostedCalls int64) int64 {
	if client != llm.FormatMessages {
		return 1
	}
	return min(1+max(hostedCalls, 0), serverToolIterations)
}

// inputField names the request field that holds the conversation.
func inputField(f llm.Format) string {
	if f == llm.FormatResponses {
		return "input"
	}
	return "messages"
}

// contextOverflowMessage is the message of the 400 for an input of about estimate tokens
// beyond the window-token context window of model, worded as the client's provider words it:
// clients act on the words, not only on the code. Claude Code compacts its conversation on
// Anthropic's "prompt is too long: N tokens > M maximum" (the Messages envelope has no code);
// OpenAI's chat clients look for "maximum context length", its Responses clients for "exceeds
// the context window". The gateway's own detail (its estimate, the model) follows the words.
func contextOverflowMessage(f llm.Format, estimate, window int, model string) string {
	switch f {
	case llm.FormatMessages:
		return fmt.Sprintf("prompt is too long: %d tokens > %d maximum (the context window of %s; the input's count is the gateway's estimate)",
			estimate, window, model)
	case llm.FormatResponses:
		return fmt.Sprintf("Your input exceeds the context window of this model: about %d tokens, more than the %d-token context window of %s (the gateway's estimate). Please adjust your input and try again.",
			estimate, window, model)
	}
	return fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in about %d tokens (the gateway's estimate for %s). Please reduce the length of the messages.",
		window, estimate, model)
}

// maxTokensField names the request field that bounds the output.
func maxTokensField(f llm.Format, view *jsonview.View) string {
	switch {
	case f == llm.FormatResponses:
		return "max_output_tokens"
	case f == llm.FormatChat && view != nil && view.Has("max_completion_tokens"):
		return "max_completion_tokens"
	}
	return "max_tokens"
}

// lastUserText is the text of the last user message, for the router's code test: whole when
// it is short, else its first and last routing.CodeWindow bytes (all the test reads), so that
// a long prompt is not copied whole.
func lastUserText(r *llm.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role != llm.RoleUser {
			continue
		}
		parts := r.Messages[i].Parts
		if len(parts) == 1 {
			return parts[0].Text // no copy: the code test reads its own window of it
		}
		total := 0
		for _, p := range parts {
			total += len(p.Text)
		}
		var b strings.Builder
		if total <= 2*routing.CodeWindow {
			for _, p := range parts {
				b.WriteString(p.Text)
			}
			return b.String()
		}
		// A long message: only the ends the code test reads are copied, a window each,
		// joined by a line break.
		b.Grow(2*routing.CodeWindow + 1)
		for _, p := range parts {
			if b.Len() >= routing.CodeWindow {
				break
			}
			b.WriteString(p.Text[:min(len(p.Text), routing.CodeWindow-b.Len())])
		}
		b.WriteByte('\n')
		var tail []string
		for j, need := len(parts)-1, routing.CodeWindow; j >= 0 && need > 0; j-- {
			t := parts[j].Text
			t = t[max(0, len(t)-need):]
			tail = append(tail, t)
			need -= len(t)
		}
		for j := len(tail) - 1; j >= 0; j-- {
			b.WriteString(tail[j])
		}
		return b.String()
	}
	return ""
}

// Route is the API route of a client format, as usage records name it.
func Route(f llm.Format) string {
	switch f {
	case llm.FormatResponses:
		return "/v1/responses"
	case llm.FormatMessages:
		return "/v1/messages"
	}
	return "/v1/chat/completions"
}

// ResponseID is the id of the answer to request requestID in format f: the request id's
// random part after the format's prefix.
func ResponseID(f llm.Format, requestID string) string {
	suffix := strings.TrimPrefix(requestID, "req_")
	switch f {
	case llm.FormatResponses:
		return "resp_" + suffix
	case llm.FormatMessages:
		return "msg_" + suffix
	}
	return "chatcmpl-" + suffix
}
