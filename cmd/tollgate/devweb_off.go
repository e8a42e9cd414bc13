//go:build !dev

package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/store"
)

// devWeb is the development OpenID provider of `tollgate dev`, which a build without -tags dev
// does not have (devweb.go): runServe never starts it there, as `dev` is not a command of it.
type devWeb struct{}

// Close does nothing: there is no provider.
func (d *devWeb) Close() {}

// redirectsToPublicURL is false: only dev's provider asks for it.
func (d *devWeb) redirectsToPublicURL() bool { return false }

// banner is empty: there is no provider to sign in with.
func (d *devWeb) banner() string { return "" }

// startDevWeb fails: the development OpenID provider is not in this build.
func startDevWeb(context.Context, *config.Config, *store.Store, string, string, *slog.Logger) (*devWeb, error) {
	return nil, errors.New("the development OpenID provider is not in this build: build with -tags dev")
}
