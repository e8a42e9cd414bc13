//go:build dev

package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/bench"
	"github.com/tollgate/tollgate/impl/h1server"
)

// runRelay serves bench.Relay, a bare HTTP relay to one upstream that the bench measures beside
// the gateway, until ctx ends; with -bytes it serves bench.ByteRelay, the floor of any relay.
func runRelay(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8092", "address to listen on")
	upstream := fs.String("upstream", "http://127.0.0.1:8090", "base URL every request is forwarded to")
	bytesOnly := fs.Bool("bytes", false, "relay bytes framed by hand (bench.ByteRelay) instead of through the gateway's HTTP layers")
	if err := parseFlags(fs, args, os.Stdout); err != nil {
		return err
	}
	if err := takesNoArguments(fs); err != nil {
		return err
	}
	log := newLogger("text")
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	var srv server
	if *bytesOnly {
		u, err := url.Parse(*upstream)
		if err != nil || u.Scheme != "http" || u.Port() == "" {
			ln.Close()
			return usageError(fmt.Sprintf("relay: -bytes needs an http://host:port upstream, not %q", *upstream))
		}
		srv = &bench.ByteRelay{Upstream: u.Host}
	} else {
		srv = &h1server.Server{Handler: bench.Relay(*upstream), ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	}
	log.Info("relay listening", "addr", ln.Addr().String(), "upstream", *upstream, "bytes", *bytesOnly)
	return serveUntilDone(ctx, srv, ln, 10*time.Second)
}
