package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/provider"
	"github.com/tollgate/tollgate/impl/routing"
	"github.com/tollgate/tollgate/impl/sse"
	"github.com/tollgate/tollgate/impl/streamconv"
)

// Response headers of the inference routes.
const (
	// headerExpert names the upstream that served the request ("provider/model").
	headerExpert = "X-Tollgate-Expert"
	// headerDropped lists advisory request fields the chosen upstream could not use.
	headerDropped = "x-tollgate-dropped-fields"
	// headerClamped names an output bound beyond the limit of the model (or of the chosen
	// expert) and the limit it was lowered to, e.g. "max_tokens=8192".
	headerClamped = "x-tollgate-clamped-fields"
)

// defaultHeartbeat is how long a stream may stay silent before a comment heartbeat is sent.
const defaultHeartbeat = 15 * time.Second

// minResponsesOutput is the smallest max_output_tokens the Responses API accepts.
const minResponsesOutput = 16

// largeBody is the body size above which the input is estimated from the request's neutral
// form, whatever the upstream: images and files, counted by the byte, would look far larger
// than they are.
const largeBody = 64 << 10

// maxResponseBytes bounds a non-streamed upstream answer.
const maxResponseBytes = 64 << 20

// CreateChatCompletion serves POST /v1/chat/completions.
func (s *Server) CreateChatCompletion(ctx context.Context, req api.CreateChatCompletionRequestObject) (api.CreateChatCompletionResponseObject, error) {
	x, err := s.startExchange(ctx, llm.FormatChat, *req.Body, nil, nil)
	if err != nil {
		return nil, err
	}
	return chatAnswer{x}, nil
}

// CreateResponse serves POST /v1/responses.
func (s *Server) CreateResponse(ctx context.Context, req api.CreateResponseRequestObject) (api.CreateResponseResponseObject, error) {
	x, err := s.startExchange(ctx, llm.FormatResponses, *req.Body, nil, nil)
	if err != nil {
		return nil, err
	}
	return responsesAnswer{x}, nil
}

// CreateMessage serves POST /v1/messages.
func (s *Server) CreateMessage(ctx context.Context, req api.CreateMessageRequestObject) (api.CreateMessageResponseObject, error) {
	forward := http.Header{}
	if v := req.Params.AnthropicVersion; v != nil {
		forward.Set("anthropic-version", *v)
	}
	if v := req.Params.AnthropicBeta; v != nil {
		forward.Set("anthropic-beta", *v)
	}
	x, err := s.startExchange(ctx, llm.FormatMessages, *req.Body, forward, nil)
	if err != nil {
		return nil, err
	}
	return messagesAnswer{x}, nil
}

// The answers implement the generated response interfaces; they write the upstream's answer.
type (
	chatAnswer      struct{ *exchange }
	responsesAnswer struct{ *exchange }
	messagesAnswer  struct{ *exchange }
)

func (a chatAnswer) VisitCreateChatCompletionResponse(w http.ResponseWriter) error {
	return a.respond(w)
}
func (a responsesAnswer) VisitCreateResponseResponse(w http.ResponseWriter) error {
	return a.respond(w)
}
func (a messagesAnswer) VisitCreateMessageResponse(w http.ResponseWriter) error { return a.respond(w) }

// exchange is one inference request from the moment an upstream accepted it.
type exchange struct {
	s         *Server
	ctx       context.Context
	client    llm.Format
	principal auth.Principal
	requestID string
	model     *routing.Model
	expert    routing.Expert
	res       *http.Response
	stream    bool
	include   bool   // chat stream_options.include_usage
	echo      []byte // what a Responses stream's response objects echo from the request
	dropped   []string
	clamped   string // the clamped output bound, "field=limit", or ""
	// hostedBounds are the calls of each hosted tool passed to the upstream that the
	// reservation covers: the most that are billed.
	hostedBounds llm.HostedCalls
	inputEst     int64
	// askedOutput is the output bound the client asked for (or the limit it was clamped to),
	// times the choices it asked for (0 when it gave no bound): the most output it is billed
	// for, even when an upstream's own minimum made the gateway ask for more.
	askedOutput int64
	ir          *llm.Request
	reserve     *billing.Reservation
	started     time.Time
	opts        *exchangeOptions // an in-process call's (agentcall.go); nil on the HTTP routes
}

// resolveModel is the model id names for principal p on a route of format client: model
// not found when the id is unknown or the account may not use it, and, for a model of the
// caller's sent to the other family's route, model not found naming the route that serves it
// (a model the caller may not use is not even said to exist).
func (s *Server) resolveModel(ctx context.Context, p auth.Principal, id string, client llm.Format) (*routing.Model, error) {
	m, ok := s.registry.Model(id)
	if !ok || !p.AllowsModel(id) {
		// A model outside the key's subset is answered as one that does not exist.
		return nil, apierror.ModelNotFound(id)
	}
	allowed, err := s.access.allowed(ctx, p.AccountID, id)
	if err != nil {
		return nil, err
	}
	if !allowed {
		return nil, apierror.ModelNotFound(id)
	}
	if m.Family != familyFor(client) {
		return nil, apierror.ModelOnOtherRoute(id, familyRoute(m.Family))
	}
	return m, nil
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

// startExchange does everything that can still fail with an HTTP status: it resolves the
// model, reserves the worst-case cost, and calls upstreams (with retries and failover) until
// one answers. The returned exchange owns the reservation and the upstream response. o is nil
// on the HTTP routes (see exchangeOptions).
func (s *Server) startExchange(ctx context.Context, client llm.Format, body []byte, forward http.Header, o *exchangeOptions) (*exchange, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	peek, err := convert.PeekRequest(client, body)
	if err != nil {
		return nil, err
	}
	modelID, stream, maxTokens, choices := peek.Model, peek.Stream, peek.MaxTokens, peek.Choices
	if choices > 1 && stream {
		// A stream cut short is billed from the text it carried, which the decoders read for
		// the first choice only; and only a chat upstream could stream several.
		return nil, apierror.Invalid("n", "'n' is %d, but a streamed answer through tollgate has one choice: set 'n' to 1 or 'stream' to false", choices)
	}
	m, err := s.resolveModel(ctx, p, modelID, client)
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
	size := unescapedSize(body)
	inputEst := int64(sizeEstimate(size))
	features := routing.Features{OutputTokens: maxTokens} // what the client asked for; 0 when it did not say
	// onlySameFormat is set when the request cannot be put in the neutral form (it holds what
	// only its own format knows): it may still go, untouched, to an upstream of its format.
	onlySameFormat := false
	if needIR {
		if ir, err = convert.DecodeRequest(client, body); err != nil {
			if !hasExpertOfKind(m, client) {
				return nil, err
			}
			ir, onlySameFormat = nil, true
		}
	}
	// parsed is the request's neutral form where it was read (nil when it cannot be: it holds
	// what only its own format knows), and read says whether reading it was tried. A large body
	// is read even when its bytes go through untouched: it is mostly images or files, which
	// providers count by the picture, not by the byte, and the neutral form's estimate counts
	// an image at a fixed cost.
	parsed, read := ir, needIR
	if !read && size > largeBody {
		parsed, _ = convert.DecodeRequest(client, body)
		read = true
	}
	// The context check uses a lenient count (four bytes a token; three quarters of the neutral
	// estimate, which counts three) so that a request near the limit is not refused on an
	// estimate; the reservation keeps the cautious one, capped at the context window.
	contextEst := size / 4
	if parsed != nil {
		inputEst = int64(convert.EstimateInputTokens(parsed))
		contextEst = int(inputEst) * 3 / 4
	}
	if m.ContextTokens > 0 && contextEst > m.ContextTokens {
		return nil, &apierror.Error{Kind: apierror.KindInvalidRequest, Param: inputField(client), Code: "context_length_exceeded", Message: fmt.Sprintf(
			"the input is about %d tokens, more than the %d-token context window of %s", contextEst, m.ContextTokens, modelID)}
	}
	if m.ContextTokens > 0 {
		inputEst = min(inputEst, int64(m.ContextTokens))
	}
	features.InputTokens = int(inputEst)
	if m.Fusion && len(m.Experts) > 1 {
		// Only the fusion router reads the request's features, and only once the request is
		// known to fit the context window; the code test reads a bounded window of the text.
		if ir != nil {
			features.Tools = len(ir.Tools) > 0
			features.Code = routing.LooksLikeCode(lastUserText(ir))
		} else {
			features.Tools = bytes.Contains(body, []byte(`"tools"`))
			features.Code = routing.LooksLikeCodeBytes(body)
		}
	}
	if o != nil && o.ceiling > 0 {
		if outBound, err = o.fit(m, inputEst, outBound, choices); err != nil {
			return nil, err
		}
		maxTokens = outBound
	}

	requestID := requestIDFrom(ctx)
	// n choices may each be as long as the bound (the upstream's usage counts them all); hosted
	// tools (a web search) may each be called up to their configured bound.
	// Every input token is reserved at the dearest input kind (a one-hour cache write is twice
	// the input price at Anthropic) and at the long-context tier when the input may reach it.
	worst := price.Worst(inputEst, int64(outBound)*int64(choices), m.MaxPrice())
	if m.HostedPriced {
		worst = billing.SaturatingAdd(worst, m.HostedWorst(client, convert.HostedToolsIn(client, body)))
	}
	reservation, err := s.meter.ReserveForKey(ctx, p.AccountID, requestID, worst, keyCap(p))
	if err != nil {
		return nil, err
	}
	x := &exchange{s: s, ctx: ctx, client: client, principal: p, requestID: requestID, model: m, stream: stream,
		inputEst: inputEst, ir: ir, reserve: reservation, started: time.Now(), opts: o}
	if client == llm.FormatChat && stream {
		x.include = convert.IncludeUsage(body)
	}
	if client == llm.FormatResponses && stream {
		// A stream's response objects echo the request as the whole answer does; a request
		// that only its own format can read echoes the defaults.
		if !read {
			parsed, _ = convert.DecodeRequest(client, body)
		}
		x.echo = convert.ResponsesEchoMembers(parsed)
	}
	// lastErr is the last upstream failure; refusal why an expert could not take the request
	// as it is (a field it cannot honour), which another expert may still serve: the first
	// expert's reason, or a same-format expert's, which names what the gateway itself refuses
	// rather than what a translation lacks.
	var lastErr, refusal error
	refusalSameFormat := false
	order := s.router.Order(m, features)
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
	for _, e := range order {
		if onlySameFormat && e.Kind != client {
			continue
		}
		up, ok := s.upstreams[e.Provider]
		if !ok {
			lastErr = fmt.Errorf("no upstream %q", e.Provider)
			continue
		}
		// The expert's bound: the model's, or its own limit when that is lower.
		bound := outBound
		if e.MaxOutputTokens > 0 {
			bound = min(bound, e.MaxOutputTokens)
		}
		ur, err := s.upstreamBody(client, body, ir, e, stream, bound, maxTokens)
		if err != nil {
			if refusal == nil || (e.Kind == client && !refusalSameFormat) {
				refusal, refusalSameFormat = err, e.Kind == client
			}
			continue
		}
		t0 := time.Now()
		res, _, err := up.Call(ctx, ur.body, stream, forward)
		if err == nil {
			s.router.Observe(e.Key, time.Since(t0), false)
			x.expert, x.res, x.dropped, x.hostedBounds = e, res, ur.dropped, ur.hosted
			if maxTokens > 0 {
				// The client is billed for at most the bound it asked for, or the clamp.
				x.askedOutput = int64(min(maxTokens, bound)) * int64(choices)
				if maxTokens > bound {
					x.clamped = maxTokensField(client, body) + "=" + strconv.Itoa(bound)
					if ur.thinkingBudget > 0 {
						x.clamped += ", thinking.budget_tokens=" + strconv.Itoa(ur.thinkingBudget)
					}
				}
			}
			return x, nil
		}
		lastErr = publicRefusal(err, e, modelID, client)
		if ctx.Err() != nil {
			break
		}
		if !provider.Retryable(err) {
			// The upstream refused this request (a 400, say): the caller's doing, which says
			// nothing about the expert's health and must not move other callers' traffic.
			break
		}
		s.router.Observe(e.Key, time.Since(t0), true)
		s.logger(ctx).Warn("upstream failed; trying the next expert", "expert", e.Key, "err", err)
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
		s.logger(ctx).Error("no upstream could serve the request", "err", lastErr)
		return nil, &apierror.Error{Kind: apierror.KindUpstream, Message: "no upstream could serve the request"}
	}
	return nil, lastErr
}

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

// unescapedSize is the size of a request body with each \uXXXX escape counted as the one
// character it stands for: a client that escapes all non-ASCII text (Python's json.dumps does)
// sends six bytes a character, which must not count six times against the context window or
// the credit.
func unescapedSize(body []byte) int {
	return len(body) - 5*bytes.Count(body, []byte(`\u`))
}

// sizeEstimate is the cautious input estimate of a request known only by its (unescaped)
// size, for one that cannot be put in the neutral form.
func sizeEstimate(size int) int {
	return size/convert.BytesPerToken + 16
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
// what the model's card promises, hold only for answers within it.
func (s *Server) upstreamBody(client llm.Format, body []byte, ir *llm.Request, e routing.Expert, stream bool, bound, asked int) (upstreamRequest, error) {
	var ur upstreamRequest
	if e.Kind == client {
		// Provider-kept state is refused or turned off: every tenant reaches the provider
		// through one account. Usage is what the gateway bills: a streamed chat request asks
		// for it whatever the client asked (the usage chunk reaches only clients that asked).
		dropped, err := convert.SharedStateFields(client, body)
		if err != nil {
			return ur, err
		}
		// Tools the provider runs and bills per call go only where they are priced.
		plan, err := convert.PlanHostedTools(client, body, e.HostedPolicy)
		if err != nil {
			return ur, err
		}
		body, ur.dropped, ur.hosted = plan.Body, append(dropped, plan.Dropped...), plan.Bounds
		if client == llm.FormatMessages && asked > bound {
			// A thinking budget must stay below the clamped max_tokens.
			fitted, lowered, left, err := convert.FitThinking(body, bound)
			if err != nil {
				return ur, err
			}
			body, ur.thinkingBudget = fitted, lowered
			if left {
				ur.dropped = append(ur.dropped, "thinking")
			}
		}
		ed := convert.UpstreamEdits{IncludeUsage: stream && client == llm.FormatChat, NoStore: client == llm.FormatResponses,
			MaxBound: bound, ClampKeys: convert.BoundKeys(client)}
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
		ur.body, err = convert.ForUpstream(nil, body, e.Model, ed)
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
	var err error
	ur.body, ur.dropped, err = convert.EncodeRequest(e.Kind, &req, e.Model)
	return ur, err
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

// inputField names the request field that holds the conversation.
func inputField(f llm.Format) string {
	if f == llm.FormatResponses {
		return "input"
	}
	return "messages"
}

// maxTokensField names the request field that bounds the output.
func maxTokensField(f llm.Format, body []byte) string {
	switch {
	case f == llm.FormatResponses:
		return "max_output_tokens"
	case f == llm.FormatChat && bytes.Contains(body, []byte(`"max_completion_tokens"`)):
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

// requestIDFrom returns the request id the edge assigned.
func requestIDFrom(ctx context.Context) string {
	if id, ok := ctx.Value(requestIDKey{}).(string); ok {
		return id
	}
	return newRequestID()
}

// respond writes the upstream's answer in the client's format and settles the cost.
func (x *exchange) respond(w http.ResponseWriter) error {
	defer x.res.Body.Close()
	h := w.Header()
	h[headerExpert] = []string{x.expert.Key}
	if len(x.dropped) > 0 {
		h.Set(headerDropped, strings.Join(x.dropped, ", "))
	}
	if x.clamped != "" {
		h.Set(headerClamped, x.clamped)
	}
	if x.stream {
		return x.respondStream(w)
	}
	return x.respondJSON(w)
}

func (x *exchange) respondJSON(w http.ResponseWriter) error {
	rawBuf, outBuf := getAnswerBuffer(), getAnswerBuffer()
	defer putAnswerBuffer(rawBuf)
	defer putAnswerBuffer(outBuf)
	raw, err := readAnswer(x.res, (*rawBuf)[:0])
	*rawBuf = raw
	if err != nil {
		x.settleUndelivered(llm.Usage{}, "upstream_read_failed")
		if x.ctx.Err() != nil {
			// The client went away, which cut the upstream call short: recorded as 499.
			w.WriteHeader(StatusClientClosedRequest)
			return nil
		}
		writeErrorFamily(w, x.family(), &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream answer was cut off"})
		return nil
	}
	// Same format: the upstream's bytes go to the client with only the model replaced, and
	// only the usage is read. Another format: decode and encode.
	var (
		usage llm.Usage
		out   []byte
	)
	if x.expert.Kind == x.client {
		if usage, err = convert.ResponseUsage(x.expert.Kind, raw); err == nil {
			out, err = convert.SetModel((*outBuf)[:0], raw, x.model.ID)
			*outBuf = out
		}
	} else {
		var resp *llm.Response
		if resp, err = convert.DecodeResponse(x.expert.Kind, raw); err == nil {
			usage = resp.Usage
			out, err = convert.EncodeResponse(x.client, resp, convert.Meta{ID: responseID(x.client, x.requestID), Created: x.started.Unix(), Model: x.model.ID, Request: x.ir})
		}
	}
	if err != nil {
		x.settleUndelivered(usage, "upstream_malformed")
		x.s.logger(x.ctx).Error("unusable upstream answer", "expert", x.expert.Key, "err", err)
		var e *apierror.Error
		if !errors.As(err, &e) {
			err = &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream answer could not be read"}
		}
		writeErrorFamily(w, x.family(), err)
		return nil
	}
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(out))}
	w.WriteHeader(http.StatusOK)
	_, werr := w.Write(out)
	if werr == nil {
		// The answer leaves now: settling, the access log and the metrics happen after the
		// client has it, not before net/http's own flush when the handler returns.
		werr = http.NewResponseController(w).Flush()
	}
	x.settle(usage, 0, "ok")
	return werr
}

// maxPooledAnswer bounds the buffers kept for reuse; larger answers get buffers of their own.
const maxPooledAnswer = 256 << 10

// answerBuffers recycles the buffers of non-streamed answers (the upstream's bytes and the
// bytes written to the client), which live only until the answer is written.
var answerBuffers = sync.Pool{New: func() any { return new([]byte) }}

func getAnswerBuffer() *[]byte { return answerBuffers.Get().(*[]byte) }

func putAnswerBuffer(b *[]byte) {
	if cap(*b) <= maxPooledAnswer {
		answerBuffers.Put(b)
	}
}

// readAnswer appends a complete upstream answer, at most maxResponseBytes, to dst.
func readAnswer(res *http.Response, dst []byte) ([]byte, error) {
	return appendBody(dst, res.Body, res.ContentLength, maxResponseBytes)
}

// family is the client's error envelope: the one of its route.
func (x *exchange) family() family { return familyOf(routeOf(x.client)) }

// routeOf is the API route of a client format, as usage records name it.
func routeOf(f llm.Format) string {
	switch f {
	case llm.FormatResponses:
		return "/v1/responses"
	case llm.FormatMessages:
		return "/v1/messages"
	}
	return "/v1/chat/completions"
}

func responseID(f llm.Format, requestID string) string {
	suffix := strings.TrimPrefix(requestID, "req_")
	switch f {
	case llm.FormatResponses:
		return "resp_" + suffix
	case llm.FormatMessages:
		return "msg_" + suffix
	}
	return "chatcmpl-" + suffix
}

func (x *exchange) respondStream(w http.ResponseWriter) error {
	sw := &lockedSSE{w: sse.NewWriter(w), every: x.s.heartbeat, onSilence: func() { _ = x.res.Body.Close() }}
	sw.w.WriteHeader()
	dec := streamconv.NewDecoder(x.expert.Kind)
	meta := streamconv.Meta{
		ID: responseID(x.client, x.requestID), Created: x.started.Unix(), Model: x.model.ID,
		IncludeUsage: x.include, InputTokensEstimate: x.inputEst, ResponsesEcho: x.echo,
	}
	// An upstream of the client's format is relayed event by event (streamconv.Relay): the
	// encoder follows it only to end the stream in the format should it fail, with the
	// upstream's own id.
	meta.Relayed = x.expert.Kind == x.client
	enc := streamconv.NewEncoder(x.client, meta)
	var relay *streamconv.Relay
	if meta.Relayed {
		relay = streamconv.NewRelay(x.client, x.model.ID, x.include, enc)
	}
	// The upstream is read in this goroutine: an event goes out as soon as it is read, with no
	// hand-off between goroutines. The first events are flushed as soon as they are written;
	// after them, events are flushed before every read from the upstream, the only place the
	// gateway can wait: events that arrived together leave together, and none waits for the
	// upstream's next one. While the upstream is silent, a timer sends comment heartbeats; the
	// lock keeps its writes apart from the events'. A client that goes away ends the request's
	// context, which interrupts the upstream read, or fails the next flush.
	sw.startHeartbeat()
	defer sw.close()
	// When a shutdown's grace period is over (EndStreams), the upstream read is interrupted and
	// the stream ends with the in-band error below: set up once a stream, nothing per event.
	defer context.AfterFunc(x.s.streamsEnd, func() { _ = x.res.Body.Close() })()
	var (
		upstream  = &flushBeforeRead{r: x.res.Body, sw: sw}
		r         = sse.NewReader(upstream)
		neutral   []llm.Event
		out       []sse.Event
		text      int // output characters seen, for billing when no usage arrives
		status    = "ok"
		wrote     bool // an event was written
		sentFirst bool // the first events were flushed
	)
	fail := func(errType, message string) {
		out = enc.Fail(errType, message, out[:0])
		_ = sw.send(out)
	}
loop:
	for {
		ev, err := r.Next()
		if err != nil {
			switch {
			case x.ctx.Err() != nil || upstream.flushErr != nil:
				status = "client_disconnected"
			case x.s.streamsEnd.Err() != nil:
				status = "shutdown"
				fail("overloaded_error", "the gateway is shutting down; retry the request")
			case sw.silenced():
				status = "upstream_stalled"
				x.s.logger(x.ctx).Warn("upstream stream silent for too long; cut off", "expert", x.expert.Key, "silence", sw.every*maxSilentHeartbeats)
				fail("api_error", "the upstream sent nothing for too long")
			default:
				status = "upstream_cut_off"
				x.s.logger(x.ctx).Warn("upstream stream ended early", "expert", x.expert.Key, "err", err)
				fail("api_error", "the upstream stream ended unexpectedly")
			}
			break
		}
		var done bool
		neutral, done, err = dec.Decode(ev, neutral[:0])
		if err != nil {
			status = "upstream_malformed"
			x.s.logger(x.ctx).Warn("malformed upstream event", "expert", x.expert.Key, "err", err)
			fail("api_error", "the upstream stream could not be read")
			break
		}
		// The encoder reuses its buffer on every call: write each call's events at once.
		failed := false
		for _, n := range neutral {
			switch n.Kind {
			case llm.EventTextDelta:
				text += len(n.Text)
			case llm.EventToolCallDelta:
				text += len(n.Arguments)
			case llm.EventError:
				failed = true
				status = "upstream_error"
				n = x.inBandError(n)
			}
			out = enc.Encode(n, out[:0])
			if relay != nil && n.Kind != llm.EventError {
				continue // the upstream's own event goes out instead, below
			}
			if err := sw.write(out); err != nil {
				status = "client_disconnected"
				break loop
			}
			wrote = wrote || len(out) > 0
		}
		if relay != nil && !failed {
			out = relay.Event(ev, out[:0])
			if err := sw.write(out); err != nil {
				status = "client_disconnected"
				break
			}
			wrote = wrote || len(out) > 0
		}
		if wrote && !sentFirst {
			// The first events leave at once, with the response head: the time to the first
			// byte does not wait for events already buffered behind them.
			sentFirst = true
			if err := sw.flush(); err != nil {
				status = "client_disconnected"
				break
			}
		}
		if failed {
			_ = sw.flush()
			break
		}
		if done {
			if relay == nil {
				out = enc.Finish(out[:0])
			} else {
				out = out[:0] // the upstream's terminal event has been relayed
			}
			if err := sw.send(out); err != nil {
				status = "client_disconnected"
				break
			}
			x.drainUpstream()
			break
		}
	}
	sw.close()
	if relay != nil {
		text += relay.Unmodelled() // thinking and the like: output the client has, if no usage says so
	}
	usage := enc.Usage()
	if status != "ok" && status != "client_disconnected" && text == 0 && usage.OutputTokens == 0 {
		// The upstream failed before producing anything: the client got only the error event,
		// which costs it nothing, as a non-streamed answer's 502 does not.
		x.settleUndelivered(usage, status)
		return nil
	}
	x.settle(usage, text, status)
	return nil
}

// inBandError is the error event the client gets for an upstream's in-band error: the
// upstream's type, and the gateway's own words unless the caller's request is at fault. What
// an upstream says of a rate limit or an outage can name the operator's organisation, the
// hidden upstream model and every tenant's combined usage; it goes to the log only.
func (x *exchange) inBandError(ev llm.Event) llm.Event {
	if ev.Err == nil {
		ev.Err = &llm.StreamError{}
	}
	kind := apierror.KindOfType(ev.Err.Type)
	e := *ev.Err
	ev.Err = &e
	if kind == apierror.KindInvalidRequest {
		e.Message = apierror.Excerpt(inPublicWords(e.Message, x.expert.Model, x.model.ID), apierror.MaxQuotedLen)
		return ev
	}
	x.s.logger(x.ctx).Warn("upstream error in the stream", "expert", x.expert.Key, "type", e.Type, "message", e.Message)
	switch kind {
	case apierror.KindRateLimited:
		e.Message = "the upstream is rate limited"
	case apierror.KindOverloaded:
		e.Message = "the upstream is overloaded"
	case apierror.KindUnauthenticated, apierror.KindInsufficientCredit, apierror.KindForbidden:
		// The gateway's own credentials or credit at the provider, not the client's.
		e.Type, e.Message = "upstream_error", "the upstream failed while streaming the answer"
	default:
		e.Message = "the upstream failed while streaming the answer"
	}
	return ev
}

// maxSilentHeartbeats is how many heartbeat intervals in a row an upstream stream may stay
// silent (10 minutes at the default 15 s) before the gateway cuts it off with an in-band error,
// so that a hung upstream does not hold the request, its connection and its reservation for
// ever.
const maxSilentHeartbeats = 40

// lockedSSE writes a stream's events and, while nothing else is written for the heartbeat
// interval, comment heartbeats from a timer's goroutine; the lock keeps the two apart. After
// maxSilentHeartbeats heartbeats in a row it calls onSilence (which ends the upstream read)
// instead. After close it writes nothing.
type lockedSSE struct {
	w         *sse.Writer
	every     time.Duration
	onSilence func()

	mu     sync.Mutex
	timer  *time.Timer
	beats  int
	silent bool
	closed bool
}

// silenced reports whether the stream was cut off for silence.
func (l *lockedSSE) silenced() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.silent
}

// startHeartbeat arms the heartbeat timer.
func (l *lockedSSE) startHeartbeat() {
	l.mu.Lock()
	l.timer = time.AfterFunc(l.every, l.beat)
	l.mu.Unlock()
}

// beat sends a heartbeat and re-arms the timer, unless the stream has ended or the client is
// gone (the request's context then ends the stream).
func (l *lockedSSE) beat() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if l.beats++; l.beats > maxSilentHeartbeats {
		l.silent = true
		l.onSilence()
		return
	}
	if l.w.Comment("keep-alive") == nil {
		l.timer.Reset(l.every)
	}
}

// write frames events onto the response, unflushed, and restarts the heartbeat interval.
func (l *lockedSSE) write(evs []sse.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errStreamClosed
	}
	for _, ev := range evs {
		if err := l.w.Write(ev); err != nil {
			return err
		}
	}
	l.beats = 0
	if l.timer != nil {
		l.timer.Reset(l.every)
	}
	return nil
}

// flush sends what was written and not yet flushed.
func (l *lockedSSE) flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errStreamClosed
	}
	return l.w.Flush()
}

// send writes events and flushes them.
func (l *lockedSSE) send(evs []sse.Event) error {
	if err := l.write(evs); err != nil {
		return err
	}
	return l.flush()
}

// flushBeforeRead reads the upstream stream and, before each read, flushes the events written
// so far: a read is where the gateway may wait for the upstream. A failed flush (the client is
// gone) ends the stream and is kept in flushErr.
type flushBeforeRead struct {
	r        io.Reader
	sw       *lockedSSE
	flushErr error
}

func (f *flushBeforeRead) Read(p []byte) (int, error) {
	if err := f.sw.flush(); err != nil {
		f.flushErr = err
		return 0, err
	}
	return f.r.Read(p)
}

// close ends the stream: no heartbeat or event is written after it.
func (l *lockedSSE) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
	}
}

// errStreamClosed is what a write after the end of the stream returns.
var errStreamClosed = errors.New("the stream has ended")

// streamEndWait bounds the wait, after an upstream stream's terminal event, for the end of its
// body.
const streamEndWait = 20 * time.Millisecond

// drainUpstream reads, briefly, the rest of the upstream stream after its terminal event. An
// upstream ends its body right after that event; read to the end, the connection goes back to
// the pool instead of being closed when the request's context ends, and the next stream does
// not pay for a new connection. An upstream that keeps the stream open is cut after
// streamEndWait.
func (x *exchange) drainUpstream() {
	cut := time.AfterFunc(streamEndWait, func() { _ = x.res.Body.Close() })
	_, _ = io.Copy(io.Discard, io.LimitReader(x.res.Body, 64<<10))
	cut.Stop()
}

// settle bills what the upstream produced at the chosen expert's price, each token kind (uncached
// input, cache reads, cache writes, output) at its own rate, and returns the amount charged.
// When the upstream reported no usage (a stream cut short), the output is estimated from the
// characters produced and the input from the request (as uncached input: the dearest kind an
// upstream that said nothing can be assumed to have billed, short of cache writes).
func (x *exchange) settle(u llm.Usage, producedChars int, status string) int64 {
	t := x.tokens(u, producedChars)
	rec := x.usageRecord(t, u.ServiceTier, status)
	rec.HostedCalls = x.hostedCalls(u)
	rec.HostedMicros = x.expert.HostedCost(rec.HostedCalls, x.hostedBounds)
	return x.reserve.SettleUsage(rec)
}

// tokens are the counts per kind billed for an answer with usage u of which producedChars
// characters were produced.
func (x *exchange) tokens(u llm.Usage, producedChars int) price.Tokens {
	t := u.Tokens()
	if u.InputTokens == 0 {
		t.Uncached = x.inputEst
	}
	if t.Output == 0 && producedChars > 0 {
		t.Output = int64((producedChars + 3) / 4)
	}
	if x.askedOutput > 0 && t.Output > x.askedOutput {
		// More than asked: the Responses API's minimum bound, say. The excess is not billed.
		t.Output = x.askedOutput
		t.Reasoning = min(t.Reasoning, t.Output)
	}
	return t
}

// hostedCalls are the hosted-tool calls billed for an answer with usage u: those the upstream
// reported, each capped at the bound the reservation covered. A chat completion reports no
// count: its web_search_options is one search an answer.
func (x *exchange) hostedCalls(u llm.Usage) llm.HostedCalls {
	calls := u.HostedCalls
	if x.client == llm.FormatChat && x.hostedBounds[llm.HostedWebSearch] > 0 {
		calls[llm.HostedWebSearch] = 1
	}
	for t := range calls {
		calls[t] = min(calls[t], x.hostedBounds[t])
	}
	return calls
}

// settleUndelivered settles an exchange whose answer never reached the client, which got a 502
// in its place: nothing is billed (a client retrying such a request would otherwise pay for
// every failed try). The usage record keeps what the upstream reported, for the operator.
func (x *exchange) settleUndelivered(u llm.Usage, status string) {
	x.reserve.Settle(0, x.usageRecord(u.Tokens(), u.ServiceTier, status))
}

// usageRecord is the exchange's usage record, finished now: the counts per kind and the price
// of the expert that served it.
func (x *exchange) usageRecord(t price.Tokens, tier, status string) billing.UsageRecord {
	p := x.expert.Price
	rec := billing.UsageRecord{
		KeyID: x.principal.KeyID, Model: x.model.ID, Route: routeOf(x.client),
		Provider: x.expert.Provider, UpstreamModel: x.expert.Model,
		Tokens: t, Price: &p, ServiceTier: tier, Status: status, StartedAt: x.started, FinishedAt: time.Now(),
	}
	if x.opts != nil {
		rec.Route, rec.AgentSessionID = x.opts.route, x.opts.sessionID
	}
	return rec
}
