package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/usagespill"
)

// usageImportSpillUsage documents the command that bills the records the spill set aside.
const usageImportSpillUsage = `  usage import-spill FILE [-apply]          the usage records the spill file set aside (FILE: its
                                            .quarantine, or a .torn-<n> or .damaged-<n> file, whose
                                            whole records are found), checked as the replay checks
                                            them: prints per record its request, account and cost
                                            and whether it would be billed, is billed already, or
                                            still fails (and why), and a total; changes nothing.
                                            -apply: bill those that pass, once each (a request
                                            billed already is skipped), and exit 1 if any still
                                            fails. FILE is never changed
`

// usageImportSpill checks, and with -apply bills, the records of a file the spill set aside
// (billing.Reimport).
func (a *admin) usageImportSpill(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("usage import-spill", flag.ContinueOnError)
	apply := fs.Bool("apply", false, "bill the records that pass (default: only say what would be billed)")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	file, err := usagespill.ReadSetAside(pos[0])
	if errors.Is(err, usagespill.ErrNotSetAside) {
		return usageError(err.Error())
	}
	if err != nil {
		return err
	}
	if err := a.useDatabase(ctx); err != nil {
		return err
	}
	done, err := billing.Reimport(ctx, a.svc.Store, file.Records, *apply)
	for _, r := range done {
		fmt.Fprintln(a.out, reimportLine(r, *apply))
	}
	if err != nil {
		return err
	}
	failed := a.reimportTotal(pos[0], file, done, *apply)
	if *apply && failed > 0 {
		return fmt.Errorf("%d records of %s still fail the replay's checks and were not billed; they stay in the file", failed, pos[0])
	}
	return nil
}

// reimportLine is the line of one record: where it is, its request, account and cost, and what
// was (or would be) done with it.
func reimportLine(r billing.Reimported, apply bool) string {
	rec := r.Entry.Record
	line := fmt.Sprintf("%s: request %s account %s cost %d micros (%s): ", r.Where, rec.RequestID, rec.AccountID,
		rec.CostMicros, apierror.USD(rec.CostMicros))
	switch {
	case r.Fault != "":
		line += "still fails: " + r.Fault
	case r.AlreadyBilled && !apply:
		line += "billed already, would be skipped"
	case r.AlreadyBilled:
		line += "billed already, skipped"
	case r.Billed:
		line += "billed"
	case apply:
		line += "not billed"
	default:
		line += "would be billed"
	}
	if r.Reason != "" {
		line += " (set aside for " + r.Reason + ")"
	}
	return line
}

// reimportTotal prints the totals of an import and returns how many records still fail.
func (a *admin) reimportTotal(path string, file usagespill.SetAsideFile, done []billing.Reimported, apply bool) int {
	var pass, failed, skipped int
	var micros int64
	for _, r := range done {
		switch {
		case r.Fault != "":
			failed++
		case r.AlreadyBilled:
			skipped++
		default:
			pass++
			micros += r.Entry.Record.CostMicros
		}
	}
	verb := "would be billed"
	if apply {
		verb = "billed"
	}
	fmt.Fprintf(a.out, "%s: %d records: %d %s (%d micros, %s), %d billed already, %d still failing",
		path, len(done), pass, verb, micros, apierror.USD(micros), skipped, failed)
	if !apply {
		fmt.Fprint(a.out, "; nothing changed (-apply bills them)")
	}
	fmt.Fprintln(a.out)
	if file.Unread > 0 {
		unit := "lines that do not decode"
		if file.Frames {
			unit = "bytes outside whole records"
		}
		fmt.Fprintf(a.notes, "%s: %d %s, passed over\n", path, file.Unread, unit)
	}
	if file.GaveUp {
		fmt.Fprintf(a.notes, "%s: the search for whole records reached its bound; the rest of the file was not searched\n", path)
	}
	return failed
}
