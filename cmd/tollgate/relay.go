package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/tollgate/tollgate/impl/bench"
	"github.com/tollgate/tollgate/impl/h1server"
)

// runRelay serves bench.Relay, a bare HTTP relay to one upstream that the bench measures beside
// the gateway, until ctx ends.
func runRelay(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8092", "address to listen on")
	upstream := fs.String("upstream", "http://127.0.0.1:8090", "base URL every request is forwarded to")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError(err.Error())
	}
	if fs.NArg() > 0 {
		return usageError(fmt.Sprintf("relay: unexpected argument %q", fs.Arg(0)))
	}
	log := newLogger("text")
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &h1server.Server{Handler: bench.Relay(*upstream), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	log.Info("relay listening", "addr", ln.Addr().String(), "upstream", *upstream)
	return serveUntilDone(ctx, srv, ln, 10*time.Second)
}
