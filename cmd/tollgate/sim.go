package main

import (
	"context"
	"flag"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/tollgate/tollgate/impl/sim"
)

// runSim serves the upstream simulator (OpenAI chat completions and Responses, Anthropic
// Messages) until ctx ends, then shuts it down gracefully.
func runSim(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8090", "address to listen on")
	apiKey := fs.String("api-key", "", "require this key (Bearer on OpenAI routes, x-api-key on Anthropic); empty accepts anything")
	latency := fs.Duration("latency", 0, "pause before the first content event of a reply")
	tps := fs.Float64("tps", 0, "content events (tokens) per second; 0 = as fast as possible")
	words := fs.Int("words", sim.DefaultWords, "default reply length in words (tokens)")
	if err := parseFlags(fs, args, os.Stdout); err != nil {
		return err
	}
	if err := takesNoArguments(fs); err != nil {
		return err
	}
	if *tps < 0 || *words < 0 || *latency < 0 {
		return usageError("sim: -latency, -tps and -words must not be negative")
	}
	log := newLogger("text")
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler: sim.New(sim.Options{
			APIKey:            *apiKey,
			FirstTokenLatency: *latency,
			TokensPerSecond:   *tps,
			DefaultWords:      *words,
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Info("upstream simulator listening", "addr", ln.Addr().String(), "auth", *apiKey != "",
		"latency", *latency, "tps", *tps, "words", *words)
	err = serveUntilDone(ctx, srv, ln, 10*time.Second)
	log.Info("upstream simulator stopped")
	return err
}
