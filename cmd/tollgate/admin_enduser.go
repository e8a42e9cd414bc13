package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"

	"github.com/tollgate/tollgate/impl/enduserid"
	"github.com/tollgate/tollgate/impl/sealedid"
	"github.com/tollgate/tollgate/impl/store"
)

// accountEndUser is `admin account end-user ID [-value V]`: the account a provider's end-user
// identifier was made for (impl/enduserid: its account part opens to the account's id under
// the gateway's key), and, given the value the account's client sent, whether the identifier
// stands for it. The identifier's form is checked before the database is opened.
func (a *admin) accountEndUser(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("account end-user", flag.ContinueOnError)
	value := fs.String("value", "", "the end-user value (safety_identifier, user or metadata.user_id) a client of the account sent, to check")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	id, err := enduserid.Parse(pos[0])
	if err != nil {
		return usageError(fmt.Sprintf("%s: %v", strconv.Quote(pos[0]), err))
	}
	valueSet := false
	fs.Visit(func(f *flag.Flag) { valueSet = valueSet || f.Name == "value" })
	if valueSet && !id.EndUser() {
		return usageError("-value: " + strconv.Quote(pos[0]) + " is an account's own identifier (sent for its requests that name no end user), which stands for no end user's value")
	}
	if err := a.useDatabase(ctx); err != nil {
		return err
	}
	secret, err := a.svc.Store.Secret(ctx, sealedid.SecretName)
	if err != nil {
		return err
	}
	keys, err := enduserid.New(secret)
	if err != nil {
		return err
	}
	acct, err := a.svc.Store.GetAccount(ctx, keys.Open(id))
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%s names no account of this database: it was not made by a gateway on it (or its account was deleted)", strconv.Quote(pos[0]))
	} else if err != nil {
		return err
	}
	if !id.EndUser() {
		fmt.Fprintf(a.out, "account %s (%s): its own identifier, sent for its requests that name no end user\n", acct.Name, acct.ID)
		return nil
	}
	fmt.Fprintf(a.out, "account %s (%s): an end user of the account\n", acct.Name, acct.ID)
	if !valueSet {
		return nil
	}
	if !keys.Confirm(id, *value) {
		return fmt.Errorf("the value %s is not this end user's: the account's client sent another", strconv.Quote(*value))
	}
	fmt.Fprintf(a.out, "the value %s is this end user's\n", strconv.Quote(*value))
	return nil
}
