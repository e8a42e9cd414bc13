package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/impl/web/audit"
)

// auditAdminUsage documents the operator's audit log command.
const auditAdminUsage = `  audit list ACCOUNT [-n N]                 the account's audit log, newest first (the console's Audit log
                                            page): who (a member's e-mail, or operator), what, on what,
                                            and the thing as it was and as it is
`

// auditList prints the newest entries of the account's audit log.
func (a *admin) auditList(ctx context.Context, args []string) error {
	acct, n, asJSON, err := a.accountAndCount(ctx, "audit list", "audit entries", args)
	if err != nil {
		return err
	}
	entries, err := (&audit.Log{Store: a.svc.Store}).List(ctx, acct.ID, 0, n)
	if err != nil {
		return err
	}
	if asJSON {
		list := make([]auditJSON, 0, len(entries))
		for _, e := range entries {
			list = append(list, auditJSON{ID: e.ID, At: utc(e.At), Actor: e.Actor, Action: e.Action, Target: e.Target,
				Before: e.Before, After: e.After})
		}
		return a.writeJSON(list)
	}
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAT\tACTOR\tACTION\tTARGET\tBEFORE\tAFTER")
	for _, e := range entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.At.UTC().Format(time.RFC3339), e.Actor, e.Action, e.Target,
			auditState(e.Before), auditState(e.After))
	}
	return tw.Flush()
}

// auditState is an entry's Before or After as one line of JSON, or "-" when it has none.
func auditState(v any) string {
	raw, ok := v.(json.RawMessage)
	if !ok || len(raw) == 0 {
		return "-"
	}
	var compact map[string]any
	if json.Unmarshal(raw, &compact) != nil {
		return string(raw)
	}
	b, err := json.Marshal(compact)
	if err != nil {
		return string(raw)
	}
	return string(b)
}
