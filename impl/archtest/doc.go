// Package archtest holds the tests that keep the house's rules (docs/design.md) as code rather
// than prose, in the spirit of tailscale's deptest: they read the import graph with `go list`
// and fail when a package reaches where it must not. The package has no code of its own.
package archtest
