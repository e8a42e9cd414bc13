// Package streamconv converts streamed answers between the three wire formats. A Decoder turns
// one upstream's server-sent events (OpenAI chat completion chunks, OpenAI Responses events or
// Anthropic Messages events) into format-neutral llm.Events; an Encoder turns llm.Events into
// the server-sent events a client of any of the three formats expects, with the exact shapes,
// ordering, terminal events and in-band errors the official SDKs parse. Any Decoder composes
// with any Encoder, so every client format can be served from every upstream kind.
//
// Both halves are pure state machines: they do no I/O, start no goroutines and read no clock
// (the client-visible id, creation time and model come in through Meta). The caller reads
// upstream events with sse.Reader, feeds them to a Decoder, feeds the neutral events to an
// Encoder and writes what comes out with sse.Writer:
//
//	dec := streamconv.NewDecoder(upstreamFormat)
//	enc := streamconv.NewEncoder(clientFormat, meta)
//	for {
//		ev, err := r.Next()
//		if err != nil {
//			out = enc.Fail("upstream_error", "the upstream stream ended early", out[:0])
//			// write out, close
//		}
//		evs, done, err := dec.Decode(ev, evs[:0])
//		// on err: enc.Fail; otherwise for each of evs: out = enc.Encode(e, out[:0]); write out
//		// on done: out = enc.Finish(out[:0]); write out; close
//	}
//
// An llm.EventError given to Encode fails the client stream exactly as Fail does; once a
// stream has been finished or failed, the Encoder emits nothing more (it still records usage,
// so Usage is right for metering). The events an Encoder returns share one buffer that the
// next call reuses: write them before calling the Encoder again.
//
// Usage follows the convention of llm.Usage that the converters share: input tokens include
// those read from and written to a prompt cache (Anthropic's cache reads and writes are added to
// its input_tokens when decoding, and reported as cache_read_input_tokens and
// cache_creation_input_tokens, with the breakdown of the writes, when encoding); stop reasons, the
// usage objects and the service tiers are the converters' (package convert), so that a streamed
// and a complete answer say the same. Where each format carries its usage in a stream: chat in
// the chunk that stream_options.include_usage adds (with the service tier), Responses in its
// terminal response object (with the tier that served it), Messages in message_start (input,
// cache counts and tier) and, cumulatively, in message_delta (output, and in newer API versions
// the input and cache counts again; the latest non-zero count wins). A stream cut short keeps the
// counts it had seen, so message_start's input and cache counts are metered even when the stream
// never ends.
//
// The decoders read the hot events (text and argument deltas) with a small scanner and hand
// every other event, or any delta of an unusual shape, to encoding/json; the encoders append
// their JSON by hand into one reused buffer, so a delta costs one allocation (its text).
//
// The package owns the streaming half of format conversion only; request and complete
// response conversion live in the converters, and the SSE framing in package sse.
package streamconv
