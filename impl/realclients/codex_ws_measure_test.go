package realclients_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestCodexSocketAgainstHTTP measures what Codex's Responses WebSocket mode saves against its
// HTTP mode (docs/speed.md, "Codex over the Responses WebSocket mode"). The same three-turn
// conversation (codex exec, then codex exec resume --last twice, with the same prompts) runs
// three times against gateways on the simulator: on Codex's built-in provider, which uses the
// WebSocket mode; on a custom provider with wire_api = "responses", which POSTs each turn
// whole; and on the built-in provider again against a gateway whose service-flint has only
// chat-completions experts, so every response on the socket is served by a chat upstream.
//
// Per turn it records the bytes Codex sent to the gateway (the payloads of its response.create
// messages, the "generate": false warm-ups counted apart, or the POST bodies), the time from
// the turn's first request byte at the recorder to the end of its last answer, and the codex
// process's wall time, and logs them as a table. It asserts what must hold and never a time:
// every turn completes, the socket runs never POST and never meet a 426 or an error event, the
// chat run is served by the chat upstream only, and from the second turn on the socket mode
// sends fewer bytes than the HTTP mode, since it sends only the new input after
// previous_response_id.
func TestCodexSocketAgainstHTTP(t *testing.T) {
	c := findClients(t)
	fx := startGateway(t)

	chatGateway := apitest.Start(t, apitest.Options{Config: chatOnlyFlint(t)})
	chatTenant := chatGateway.NewTenant(t, "codex-chat-flint", 0, 100_000_000)
	chatFixture := fixture{gw: chatGateway, key: chatTenant.Key}

	// One after the other, not in parallel: the times are only comparable on a quiet host.
	var socket, posted, chat []codexTurnMeasure
	t.Run("WebSocket", func(t *testing.T) {
		socket = measureCodexTurns(t, c, fx, true)
		checkSocketTurns(t, socket)
	})
	t.Run("HTTP", func(t *testing.T) {
		posted = measureCodexTurns(t, c, fx, false)
		for _, m := range posted {
			if m.posts == 0 {
				t.Errorf("turn %d: no POST /v1/responses", m.turn)
			}
			if m.handshakes > 0 {
				t.Errorf("turn %d: the custom provider opened %d WebSocket handshakes; the HTTP mode should POST only", m.turn, m.handshakes)
			}
		}
	})
	t.Run("WebSocketChatUpstream", func(t *testing.T) {
		chat = measureCodexTurns(t, c, chatFixture, true)
		checkSocketTurns(t, chat)
		generating := 0
		for _, m := range chat {
			generating += m.requests
		}
		records := usageRecords(t, chatGateway, chatTenant.Account.ID, generating)
		if len(records) != generating {
			t.Errorf("%d usage records for %d generating response.create messages", len(records), generating)
		}
		for _, u := range records {
			if u.Provider != "sim-openai-chat" || u.Route != "/v1/responses" || u.Model != "service-flint" {
				t.Errorf("usage record %s: %s on %s served by %s/%s; want service-flint on /v1/responses served by sim-openai-chat",
					u.RequestID, u.Model, u.Route, u.Provider, u.UpstreamModel)
			}
		}
	})

	if len(socket) == len(codexPrompts) && len(posted) == len(codexPrompts) {
		for i := 1; i < len(codexPrompts); i++ {
			if socket[i].requestBytes >= posted[i].requestBytes {
				t.Errorf("turn %d: the socket's response.create sent %d bytes, the HTTP mode's POST %d; want fewer on the socket from the second turn on",
					i+1, socket[i].requestBytes, posted[i].requestBytes)
			}
		}
	}
	var table strings.Builder
	table.WriteString("| mode | turn | request bytes | warm-up bytes | all bytes sent | first request byte to answer end | generating request to answer end | codex exec wall time |\n")
	table.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, run := range []struct {
		mode  string
		turns []codexTurnMeasure
	}{
		{"WebSocket (built-in provider)", socket},
		{"HTTP (custom provider, wire_api responses)", posted},
		{"WebSocket, chat upstream behind service-flint", chat},
	} {
		for _, m := range run.turns {
			warm := "–"
			if m.warmups > 0 {
				warm = fmt.Sprintf("%d (%d)", m.warmupBytes, m.warmups)
			}
			fmt.Fprintf(&table, "| %s | %d | %d (%d) | %s | %d | %s | %s | %s |\n", run.mode, m.turn, m.requestBytes, m.requests, warm,
				m.requestBytes+m.warmupBytes, m.answer.Round(time.Millisecond), m.generation.Round(time.Millisecond), m.wall.Round(10*time.Millisecond))
		}
	}
	t.Logf("Codex %s, three turns; request bytes are the payloads of the generating response.create messages or the POST bodies (their count in brackets):\n%s",
		pinned["@openai/codex"], table.String())
}

// codexPrompts are the three turns' prompts: the first for codex exec, the others for codex
// exec resume --last.
var codexPrompts = []string{"Say hi", "Say hi again", "And once more"}

// codexTurnMeasure is what one turn of codex exec sent and how long it took.
type codexTurnMeasure struct {
	turn int
	// requestBytes is the payload of the generating response.create messages (socket) or the
	// POST bodies (HTTP); requests counts them.
	requestBytes, requests int
	// warmupBytes is the payload of the "generate": false response.create messages; warmups
	// counts them.
	warmupBytes, warmups int
	// handshakes counts the WebSocket handshakes answered 101, posts the POST /v1/responses.
	handshakes, posts int
	// answer runs from the turn's first request byte at the recorder (the warm-up's, on the
	// socket) to the end of its last answer (response.completed on the socket, the end of the
	// POST's stream); generation from the first generating request's first byte to the same
	// end, which leaves out the warm-up and Codex's pause after it.
	answer, generation time.Duration
	// wall is the codex process's run, start to exit.
	wall time.Duration
	// problems lists what must not happen: a refused handshake (426 among them), an error
	// event, a failed POST, a response that never completed.
	problems []string
	// continued counts the generating messages that carried previous_response_id.
	continued int
}

// measureCodexTurns runs the three turns in one Codex home, on the built-in provider (the
// WebSocket mode) or the custom HTTP provider, and measures each from the recorder's log.
func measureCodexTurns(t *testing.T, c clients, fx fixture, builtin bool) []codexTurnMeasure {
	t.Helper()
	rec := newRecorder(t, fx.gw.URL, fx.key)
	sb := codexSandbox(t, c, fx, rec, builtin, false)
	flags := []string{"--json", "--strict-config", "--skip-git-repo-check"}
	var out []codexTurnMeasure
	for i, prompt := range codexPrompts {
		args := append([]string{"exec"}, flags...)
		if i > 0 {
			args = append([]string{"exec", "resume", "--last"}, flags...)
		}
		before := len(rec.snapshot())
		r := run(t, rec, sb, append(c.codex(), append(args, prompt)...)...)
		codexTurn(t, r)
		m := measureTurn(rec.snapshot()[before:])
		m.turn, m.wall = i+1, r.took
		out = append(out, m)
	}
	rec.checkEgress(t)
	return out
}

// checkSocketTurns checks that every turn went over the WebSocket: a 101, no POST, no problem,
// a generating response.create, and from the second turn on only new input after
// previous_response_id.
func checkSocketTurns(t *testing.T, turns []codexTurnMeasure) {
	t.Helper()
	for _, m := range turns {
		if m.handshakes == 0 {
			t.Errorf("turn %d: no WebSocket handshake answered 101", m.turn)
		}
		if m.posts > 0 {
			t.Errorf("turn %d: Codex fell back to POST /v1/responses %d times", m.turn, m.posts)
		}
		if m.requests == 0 {
			t.Errorf("turn %d: no generating response.create on the socket", m.turn)
		}
		if m.continued < m.requests {
			t.Errorf("turn %d: %d of %d generating response.create messages carried previous_response_id", m.turn, m.continued, m.requests)
		}
		for _, p := range m.problems {
			t.Errorf("turn %d: %s", m.turn, p)
		}
	}
}

// measureTurn sums up the exchanges of one turn.
func measureTurn(list []recorded) codexTurnMeasure {
	var m codexTurnMeasure
	var first, firstGenerating, last time.Duration = -1, -1, 0
	mark := func(start, generating, end time.Duration) {
		if first < 0 || start < first {
			first = start
		}
		if firstGenerating < 0 || generating < firstGenerating {
			firstGenerating = generating
		}
		last = max(last, end)
	}
	for _, ex := range list {
		if ex.Path() != "/v1/responses" {
			continue
		}
		switch {
		case ex.Method == http.MethodPost:
			m.posts++
			m.requests++
			m.requestBytes += len(ex.RequestBody)
			mark(ex.At, ex.At, ex.At+ex.Took)
			if ex.Status != http.StatusOK {
				m.problems = append(m.problems, fmt.Sprintf("POST /v1/responses answered %d: %s", ex.Status, errorMessage(ex.ResponseBody)))
			}
			var body struct {
				Previous string `json:"previous_response_id"`
			}
			if json.Unmarshal(ex.RequestBody, &body) == nil && body.Previous != "" {
				m.continued++
			}
		case ex.Method == http.MethodGet && ex.Status == http.StatusSwitchingProtocols:
			m.handshakes++
			measureSocket(&m, ex.Socket, mark)
		default:
			m.problems = append(m.problems, fmt.Sprintf("%s /v1/responses answered %d: %s", ex.Method, ex.Status, errorMessage(ex.ResponseBody)))
		}
	}
	if first >= 0 {
		m.answer, m.generation = last-first, last-firstGenerating
	}
	return m
}

// measureSocket adds the messages of one WebSocket connection to m: the client's
// response.create messages by kind, and the spans from the first of them, and from the first
// generating one, to the last response.completed the gateway sent.
func measureSocket(m *codexTurnMeasure, chunks []socketChunk, mark func(start, generating, end time.Duration)) {
	var created []time.Duration
	completed, generating := time.Duration(-1), time.Duration(-1)
	pending := 0 // generating messages not yet answered with response.completed
	for _, msg := range socketMessages(chunks, true) {
		var body struct {
			Type     string `json:"type"`
			Generate *bool  `json:"generate"`
			Previous string `json:"previous_response_id"`
		}
		if json.Unmarshal(msg.payload, &body) != nil || body.Type != "response.create" {
			m.problems = append(m.problems, fmt.Sprintf("the client sent a message that is not a response.create: %s", shorten(msg.payload, 200)))
			continue
		}
		created = append(created, msg.start)
		if body.Generate != nil && !*body.Generate {
			m.warmups++
			m.warmupBytes += len(msg.payload)
			continue
		}
		if generating < 0 {
			generating = msg.start
		}
		m.requests++
		pending++
		m.requestBytes += len(msg.payload)
		if body.Previous != "" {
			m.continued++
		}
	}
	for _, msg := range socketMessages(chunks, false) {
		var ev struct {
			Type     string `json:"type"`
			Response struct {
				Output []json.RawMessage `json:"output"`
			} `json:"response"`
		}
		_ = json.Unmarshal(msg.payload, &ev)
		switch ev.Type {
		case "error", "response.failed", "response.incomplete":
			m.problems = append(m.problems, fmt.Sprintf("the gateway sent %s", shorten(msg.payload, 300)))
		case "response.completed":
			// A warm-up completes with no output; the answer's end is the last completion.
			if len(ev.Response.Output) > 0 {
				pending--
			}
			completed = msg.end
		}
	}
	if pending > 0 {
		m.problems = append(m.problems, fmt.Sprintf("%d generating response.create messages never completed with output", pending))
	}
	if generating >= 0 && completed >= 0 {
		mark(created[0], generating, completed)
	}
}

// socketMessage is one WebSocket message reassembled from its frames, with when its first and
// last bytes were relayed.
type socketMessage struct {
	opcode     byte
	payload    []byte
	start, end time.Duration
}

// socketMessages reassembles the messages one side sent on a WebSocket connection (RFC 6455
// framing; the client's frames are masked, the gateway's not; no extension is negotiated, so
// the payloads are the messages themselves). Control frames are left out; a message cut off by
// the end of the recording is too.
func socketMessages(chunks []socketChunk, fromClient bool) []socketMessage {
	var stream []byte
	var offsets []int // offsets[i] is where chunk i of this side begins in stream
	var times []time.Duration
	for _, ch := range chunks {
		if ch.fromClient == fromClient {
			offsets = append(offsets, len(stream))
			times = append(times, ch.at)
			stream = append(stream, ch.data...)
		}
	}
	timeAt := func(off int) time.Duration {
		i := len(offsets) - 1
		for i > 0 && offsets[i] > off {
			i--
		}
		return times[i]
	}
	var out []socketMessage
	var partial *socketMessage
	for pos := 0; pos+2 <= len(stream); {
		start := pos
		fin, opcode := stream[pos]&0x80 != 0, stream[pos]&0x0f
		masked, size := stream[pos+1]&0x80 != 0, uint64(stream[pos+1]&0x7f)
		pos += 2
		switch size {
		case 126:
			if pos+2 > len(stream) {
				return out
			}
			size = uint64(binary.BigEndian.Uint16(stream[pos:]))
			pos += 2
		case 127:
			if pos+8 > len(stream) {
				return out
			}
			size = binary.BigEndian.Uint64(stream[pos:])
			pos += 8
		}
		var mask []byte
		if masked {
			if pos+4 > len(stream) {
				return out
			}
			mask = stream[pos : pos+4]
			pos += 4
		}
		if uint64(len(stream)-pos) < size {
			return out
		}
		payload := bytes.Clone(stream[pos : pos+int(size)])
		pos += int(size)
		for i := range payload {
			if mask != nil {
				payload[i] ^= mask[i%4]
			}
		}
		if opcode >= 0x8 { // close, ping, pong
			continue
		}
		if opcode != 0 {
			partial = &socketMessage{opcode: opcode, start: timeAt(start)}
		}
		if partial == nil {
			continue
		}
		partial.payload = append(partial.payload, payload...)
		if fin {
			partial.end = timeAt(pos - 1)
			out = append(out, *partial)
			partial = nil
		}
	}
	return out
}

// chatOnlyFlint is the built-in configuration with service-flint's experts cut to those on a
// chat-completions upstream, so that whatever the router chooses, a chat upstream serves it.
func chatOnlyFlint(t *testing.T) *config.Config {
	t.Helper()
	cfg := config.Default()
	kinds := map[string]string{}
	for _, p := range cfg.Providers {
		kinds[p.Name] = p.Kind
	}
	for i, m := range cfg.Models {
		if m.ID != "service-flint" {
			continue
		}
		var chat []config.Upstream
		for _, e := range m.Experts {
			if kinds[e.Provider] == "openai-chat" {
				chat = append(chat, e)
			}
		}
		if len(chat) == 0 {
			t.Fatalf("service-flint has no expert on a chat-completions upstream: %+v", m.Experts)
		}
		cfg.Models[i].Experts = chat
		return cfg
	}
	t.Fatal("the built-in configuration has no service-flint")
	return nil
}
