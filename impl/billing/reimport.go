package billing

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usagespill"
)

// ReimportHolder is the holder the records billed by Reimport are written for: no process's,
// so their cost comes out of the account's free credit (then the holds, as for any record whose
// hold is gone), never out of the hold of a live process that took an earlier one's name.
const ReimportHolder = ""

// Reimported is what Reimport did, or would do, with one record set aside.
type Reimported struct {
	usagespill.SetAside
	// Fault is why the record is still not applied, by the replay's checks (recordFault); ""
	// when it passes them.
	Fault string
	// Billed reports that it was written and billed now; AlreadyBilled that its request had
	// been billed already (an earlier import, or the record reached the database another way),
	// so it was (or would be) skipped. Both are false for a record with a Fault, and Billed in
	// a dry run.
	Billed, AlreadyBilled bool
}

// Reimport checks records set aside from the spill file (usagespill.ReadSetAside) with the
// replay's rules, now that an operator has looked at them (an account that was missing may be
// back), and, when apply is set, bills those that pass, one transaction a record, idempotently
// by request id as the replay does (store.WriteUsage skips a request billed already). A record
// that still fails is not billed; one the database refuses as data again (the writer set it
// aside for that, and its cause is not fixed) still fails with the database's reason, which
// only the write finds, so a dry run says it would be billed. It stops at the first other
// database error, with what it did so far.
func Reimport(ctx context.Context, st *store.Store, records []usagespill.SetAside, apply bool) ([]Reimported, error) {
	known := make(map[uuid.UUID]bool)
	out := make([]Reimported, 0, len(records))
	for _, r := range records {
		fault, err := recordFault(ctx, st, r.Entry.Record, known)
		if err != nil {
			return out, fmt.Errorf("billing: check the record of request %q: %w", r.Entry.Record.RequestID, err)
		}
		done := Reimported{SetAside: r, Fault: fault}
		if !apply && fault == "" {
			// What WriteUsage would skip, said without writing.
			if done.AlreadyBilled, err = st.UsageBilled(ctx, r.Entry.Record.AccountID, r.Entry.Record.RequestID); err != nil {
				return out, fmt.Errorf("billing: look up the record of request %q: %w", r.Entry.Record.RequestID, err)
			}
		}
		if apply && fault == "" {
			res, err := st.WriteUsage(ctx, ReimportHolder, []store.UsageRecord{r.Entry.Record})
			if err != nil && store.RefusedData(err) {
				// Refused as data again (the cause is not fixed yet): this record still fails, and
				// the next is tried.
				done.Fault = "refused by the database: " + err.Error()
				out = append(out, done)
				continue
			}
			if err != nil {
				return out, fmt.Errorf("billing: bill the record of request %q: %w", r.Entry.Record.RequestID, err)
			}
			done.Billed, done.AlreadyBilled = res.Written > 0, res.Skipped > 0
			if res.Dropped > 0 {
				// The account went away between the check and the write.
				done.Fault = "an unknown account"
			}
		}
		out = append(out, done)
	}
	return out, nil
}
