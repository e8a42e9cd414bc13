package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/user"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/sealedid"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/upstreamkeys"
	"github.com/tollgate/tollgate/impl/web/audit"
)

const providerKeyAdminUsage = `  provider-key set ACCOUNT PROVIDER [-from-env VAR]
                                            give the account its own key for a configured provider: its
                                            requests there are sent with it, not with the operator's, so
                                            the provider's prompt cache is its own; the key is read from
                                            stdin (one line), or from the environment variable VAR, never
                                            from the command line; stored sealed, replaces the one it had
  provider-key list ACCOUNT                 the account's own provider keys: provider, the key's last four
                                            characters, when and by whom set (never the keys); a key that
                                            does not open with the server secret is marked: set it again
  provider-key remove ACCOUNT PROVIDER      remove the account's own key for the provider (its requests
                                            there go with the operator's key again, or, with account_keys:
                                            required, not at all; every gateway within a second)
`

// providerKeyAdmin runs the provider-key commands: an account's own upstream keys
// (impl/upstreamkeys). A key is never printed and never taken from the command line, which other
// users of the host can read (ps, /proc) and shells keep in their history.
func (a *admin) providerKeyAdmin(ctx context.Context, verb string, args []string) error {
	fs := flag.NewFlagSet("provider-key "+verb, flag.ContinueOnError)
	want := 2
	var fromEnv *string
	asJSON := new(bool)
	switch verb {
	case "set":
		fromEnv = fs.String("from-env", "", "read the key from this environment variable instead of stdin")
	case "list":
		want = 1
		asJSON = jsonFlag(fs)
	}
	pos, err := parse(fs, args, want)
	if err != nil {
		return err
	}
	var key string
	if verb == "set" {
		if err := a.configuredProvider(pos[1]); err != nil {
			return err
		}
		if key, err = a.readProviderKey(*fromEnv); err != nil {
			return err
		}
	}
	if err := a.useDatabase(ctx); err != nil {
		return err
	}
	acct, err := a.account(ctx, pos[0])
	if err != nil {
		return err
	}
	st := a.svc.Store
	switch verb {
	case "set":
		secret, err := st.Secret(ctx, sealedid.SecretName)
		if err != nil {
			return err
		}
		sealer, err := upstreamkeys.New(secret)
		if err != nil {
			return err
		}
		sealed, err := sealer.Seal(acct.ID, pos[1], key)
		if err != nil {
			return err
		}
		k := store.UpstreamKey{AccountID: acct.ID, Provider: pos[1], Sealed: sealed, Hint: upstreamkeys.Hint(key), SetBy: operatorName()}
		if err := st.SetUpstreamKey(ctx, k); err != nil {
			return err
		}
		if err := a.audit(ctx, acct.ID, audit.ActionUpstreamKeySet, "provider "+pos[1], nil, map[string]string{"provider": pos[1], "key": k.Hint}); err != nil {
			return err
		}
		fmt.Fprintf(a.out, "account %s reaches %s with its own key %s from now on\n", acct.Name, pos[1], k.Hint)
		if err := a.noteSameUpstream(ctx, acct, pos[1]); err != nil {
			return err
		}
	case "remove":
		if err := st.RemoveUpstreamKey(ctx, acct.ID, pos[1]); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("account %s has no key of its own for %s", acct.Name, pos[1])
		} else if err != nil {
			return err
		}
		if err := a.audit(ctx, acct.ID, audit.ActionUpstreamKeyRemoved, "provider "+pos[1], map[string]string{"provider": pos[1]}, nil); err != nil {
			return err
		}
		then := "the operator's key"
		if p, ok := a.provider(pos[1]); ok && p.AccountKeysRequired() {
			then = "no key: the provider takes only accounts with their own (account_keys: required)"
		}
		fmt.Fprintf(a.out, "account %s reaches %s with %s from now on\n", acct.Name, pos[1], then)
	default:
		keys, err := st.UpstreamKeys(ctx, acct.ID)
		if err != nil {
			return err
		}
		// Whether each key opens with the server secret the gateways open it with: one that
		// does not (a database restored without its server secrets) is refused on every
		// request until set again, which only the operator can do. The secret is read, never
		// made in passing: without one, no key opens.
		var sealer *upstreamkeys.Sealer
		if len(keys) > 0 {
			secret, ok, err := st.ExistingSecret(ctx, sealedid.SecretName)
			if err != nil {
				return err
			}
			if ok {
				if sealer, err = upstreamkeys.New(secret); err != nil {
					return err
				}
			}
		}
		opens := func(k store.UpstreamKey) bool {
			if sealer == nil {
				return false
			}
			_, err := sealer.Open(acct.ID, k.Provider, k.Sealed)
			return err == nil
		}
		if *asJSON {
			list := make([]providerKeyJSON, 0, len(keys))
			for _, k := range keys {
				_, configured := a.provider(k.Provider)
				list = append(list, providerKeyJSON{Provider: k.Provider, Key: k.Hint, SetAt: utc(k.SetAt), SetBy: k.SetBy, Configured: configured, Opens: opens(k)})
			}
			return a.writeJSON(list)
		}
		tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PROVIDER\tKEY\tSET\tBY")
		for _, k := range keys {
			name := k.Provider
			if _, ok := a.provider(k.Provider); !ok {
				name += " (not configured)"
			}
			if !opens(k) {
				name += " (does not open: set it again)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, k.Hint, k.SetAt.UTC().Format(time.RFC3339), k.SetBy)
		}
		return tw.Flush()
	}
	return nil
}

// providerKeyJSON is one line of provider-key list -json: key is the key's hint (its last four
// characters), never the key.
type providerKeyJSON struct {
	Provider   string    `json:"provider"`
	Key        string    `json:"key"`
	SetAt      time.Time `json:"set_at"`
	SetBy      string    `json:"set_by"`
	Configured bool      `json:"configured"`
	// Opens is false for a key that does not open with the server secret (sealed under
	// another, or damaged): the account's requests to the provider are refused until it is
	// set again.
	Opens bool `json:"opens"`
}

// readProviderKey reads the key to set: from the environment variable name when given, else one
// line of stdin (asked for, without echo being turned off, only when stdin is a terminal: a
// script pipes it). Surrounding white space is dropped; what is left must be a key
// (upstreamkeys.Check), whose error never quotes it.
func (a *admin) readProviderKey(name string) (string, error) {
	var key string
	if name != "" {
		v, ok := os.LookupEnv(name)
		if !ok {
			return "", usageError(fmt.Sprintf("-from-env: the environment variable %s is not set", name))
		}
		key = v
	} else {
		var b []byte
		var err error
		if a.interactive {
			// A person types one line (and sees it: a pipe or -from-env keeps it off the
			// screen).
			fmt.Fprint(a.notes, "the provider key (one line; it shows as you type, prefer a pipe or -from-env): ")
			b, err = bufio.NewReader(io.LimitReader(a.in, upstreamkeys.MaxLen+2)).ReadSlice('\n')
			if errors.Is(err, io.EOF) || errors.Is(err, bufio.ErrBufferFull) {
				err = nil
			}
		} else {
			b, err = io.ReadAll(io.LimitReader(a.in, upstreamkeys.MaxLen+2))
		}
		if err != nil {
			return "", fmt.Errorf("reading the key from stdin: %w", err)
		}
		key = string(b)
		if i := strings.IndexByte(key, '\n'); i >= 0 && strings.TrimSpace(key[i:]) != "" {
			return "", usageError("stdin holds more than one line: give the key alone")
		}
	}
	key = strings.TrimSpace(key)
	if err := upstreamkeys.Check(key); err != nil {
		from := "stdin"
		if name != "" {
			from = name
		}
		return "", usageError(fmt.Sprintf("the key from %s: %v", from, err))
	}
	return key, nil
}

// noteSameUpstream tells the operator, beside the output of a key set for the account on
// provider, of the other configured providers on the same host (OpenAI's chat and Responses
// entries, say: one upstream account, one prompt cache) that the account has no key of its own
// for and that take the operator's: its requests there, a fusion model's other experts and
// failovers among them, are still sent with the operator's key and share its cache, which a key
// for one entry alone does not close.
func (a *admin) noteSameUpstream(ctx context.Context, acct store.Account, provider string) error {
	set, _ := a.provider(provider)
	keys, err := a.svc.Store.UpstreamKeys(ctx, acct.ID)
	if err != nil {
		return err
	}
	var others []string
	for _, p := range a.svc.Config.Providers {
		if p.Name == provider || p.AccountKeysRequired() || upstreamHost(p.BaseURL) != upstreamHost(set.BaseURL) ||
			slices.ContainsFunc(keys, func(k store.UpstreamKey) bool { return k.Provider == p.Name }) {
			continue
		}
		others = append(others, p.Name)
	}
	if len(others) > 0 {
		slices.Sort(others)
		verb, them := "reach", "them"
		if len(others) == 1 {
			verb, them = "reaches", "it"
		}
		fmt.Fprintf(a.notes, "note: %s %s the same host as %s, and account %s has no key of its own there: its requests to %s are still sent with the operator's key, whose prompt cache the other accounts share (give it a key there too, or set account_keys: required)\n",
			strings.Join(others, ", "), verb, provider, acct.Name, them)
	}
	return nil
}

// upstreamHost is the scheme and host a provider's base URL names (the whole URL when it names
// none, as the simulator's does).
func upstreamHost(base string) string {
	if u, err := url.Parse(base); err == nil && u.Host != "" {
		return u.Scheme + "://" + u.Host
	}
	return base
}

// configuredProvider refuses, as a mistake in the command line, a provider name the
// configuration does not have.
func (a *admin) configuredProvider(name string) error {
	if _, ok := a.provider(name); ok {
		return nil
	}
	names := make([]string, 0, len(a.svc.Config.Providers))
	for _, p := range a.svc.Config.Providers {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return usageError(fmt.Sprintf("provider %q is not in the configuration (it has %s)", name, strings.Join(names, ", ")))
}

// provider is the configured provider name.
func (a *admin) provider(name string) (config.Provider, bool) { return a.svc.Config.Provider(name) }

// operatorName says who set a key: the operator, with the host's user name when it is known.
func operatorName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "operator (" + u.Username + ")"
	}
	return "operator"
}
