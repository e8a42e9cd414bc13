package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/sealedid"
	"github.com/tollgate/tollgate/impl/usageview"
)

// usageExportUsage documents the statement command.
const usageExportUsage = `  usage export ACCOUNT (-month YYYY-MM | -from DATE -to DATE) [-out FILE [-force]]
                                            the account's statement as CSV: the opening balance, one
                                            line per credit ledger entry recorded from -from up to
                                            (not including) -to (usage lines with their tokens per
                                            kind, prices, costs and what was billed; grants and
                                            adjustments), and the closing balance; amounts in micros
                                            and dollars. -month: one calendar month in UTC (-month
                                            2026-11 is -from 2026-11-01 -to 2026-12-01); a month not
                                            over yet is said on stderr. DATE: a UTC day (2025-01-01)
                                            or an RFC 3339 time. -out: write FILE (whole or not at
                                            all) and print a summary instead of writing to standard
                                            output; a FILE that exists is refused, unless -force
                                            replaces it; archived months are read from the dataset
                                            store, and a local directory is named on stderr
`

// usageExport writes the statement of an account and a period (usageview.WriteStatement).
func (a *admin) usageExport(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("usage export", flag.ContinueOnError)
	monthFlag := fs.String("month", "", "the period: one calendar month in UTC, YYYY-MM (instead of -from and -to)")
	fromFlag := fs.String("from", "", "the period's first day (UTC) or time, included")
	toFlag := fs.String("to", "", "the period's end: a day (UTC) or time, not included")
	outPath := fs.String("out", "", "the file to write (default: standard output); it must not exist, unless -force")
	force := fs.Bool("force", false, "with -out: replace FILE if it exists")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	from, to, err := statementPeriod(*monthFlag, *fromFlag, *toFlag)
	if err != nil {
		return err
	}
	if now := time.Now(); to.After(now) {
		fmt.Fprintf(a.notes, "note: the period is not over (it ends %s): the statement holds what is recorded so far\n", periodBound(to))
	}
	if *force && *outPath == "" {
		return usageError("-force replaces the file of -out, and there is none")
	}
	if *outPath != "" && !*force {
		// Said before the statement is read; writeFileWhole checks again as it names the file.
		if _, err := os.Lstat(*outPath); err == nil {
			return existsError(*outPath)
		}
	}
	if err := a.useDatabase(ctx); err != nil {
		return err
	}
	acct, err := a.account(ctx, pos[0])
	if err != nil {
		return err
	}
	svc, closeStore, err := a.usageView(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	// The entries are named as on the console's statement (sealed): the file may go to the
	// account, and plain ledger ids would tell it every other account's volume.
	key, err := a.svc.Store.Secret(ctx, sealedid.SecretName)
	if err != nil {
		return err
	}
	seal, err := sealedid.New(key)
	if err != nil {
		return err
	}
	if *outPath == "" {
		_, err := svc.WriteStatement(ctx, acct.ID, from, to, seal, a.out)
		return err
	}
	var st usageview.Statement
	err = writeFileWhole(*outPath, *force, func(w io.Writer) error {
		st, err = svc.WriteStatement(ctx, acct.ID, from, to, seal, w)
		return err
	})
	if errors.Is(err, iofs.ErrExist) {
		return existsError(*outPath)
	} else if err != nil {
		return fmt.Errorf("statement of %s: %w", acct.Name, err)
	}
	fmt.Fprintf(a.out, "statement of account %s from %s to %s (not included): %d lines; opening balance %d micros (%s), "+
		"usage %d micros (%s), credit %+d micros (%s), closing balance %d micros (%s); written to %s\n",
		acct.Name, periodBound(from), periodBound(to), st.Lines, st.OpeningMicros, apierror.USD(st.OpeningMicros),
		st.UsageMicros, apierror.USD(st.UsageMicros), st.CreditMicros, apierror.USD(st.CreditMicros),
		st.ClosingMicros, apierror.USD(st.ClosingMicros), *outPath)
	return nil
}

// usageView is the usage reader of the console's: when months have been archived (usage
// retention), it reads them from their Parquet objects in the dataset store, so that a
// statement over them has its usage lines whole. The store is opened only then; close releases
// it.
func (a *admin) usageView(ctx context.Context) (*usageview.Service, func(), error) {
	pool := a.svc.Store.Pool()
	plain := usageview.New(pool, usageview.Options{})
	months, err := plain.ArchivedMonths(ctx)
	if err != nil || len(months) == 0 {
		return plain, func() {}, err
	}
	storage, closeStorage, err := a.openDatasetStore(ctx, "usage archives", "", newLogger("text"))
	if err != nil {
		return nil, nil, fmt.Errorf("the dataset store, which holds the archived usage months: %w", err)
	}
	files, ok := storage.(dataset.LocalStorage)
	if !ok {
		closeStorage()
		return nil, nil, errors.New("the dataset store gives no local files of the archived usage months")
	}
	return usageview.New(pool, usageview.Options{Archive: files}), closeStorage, nil
}

// statementPeriod reads -month, or -from and -to: a calendar month in UTC
// (usageview.MonthPeriod, the console's boundaries), or both of -from and -to, each a UTC day
// or an RFC 3339 time, -to after -from.
func statementPeriod(monthText, fromText, toText string) (from, to time.Time, err error) {
	if monthText != "" {
		if fromText != "" || toText != "" {
			return from, to, usageError("-month is the whole period: give it without -from and -to")
		}
		p, err := usageview.MonthPeriod(monthText)
		if err != nil {
			return from, to, usageError("-month " + err.Error())
		}
		return p.From, p.To, nil
	}
	if fromText == "" || toText == "" {
		return from, to, usageError("usage export needs -month (a UTC calendar month such as 2026-11), or -from and -to (a UTC day such as 2025-01-01, or an RFC 3339 time)")
	}
	if from, err = statementTime("-from", fromText); err != nil {
		return from, to, err
	}
	if to, err = statementTime("-to", toText); err != nil {
		return from, to, err
	}
	if !to.After(from) {
		return from, to, usageError(fmt.Sprintf("-to %s is not after -from %s (-to is the first moment not included)", toText, fromText))
	}
	return from, to, nil
}

// statementTime reads a UTC day (its midnight) or an RFC 3339 time.
func statementTime(name, s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, usageError(fmt.Sprintf("%s %q: want a UTC day (2025-01-01) or an RFC 3339 time", name, s))
}

// periodBound writes a period's bound as a day when it is a UTC midnight, else as an RFC 3339 time.
func periodBound(t time.Time) string {
	if t.UTC().Truncate(24 * time.Hour).Equal(t) {
		return t.UTC().Format(time.DateOnly)
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// existsError is the refusal to write the statement over the file at path.
func existsError(path string) error {
	return fmt.Errorf("%s exists already: nothing written (-force replaces it)", path)
}

// writeFileWhole writes path through write: into a temporary file beside it, renamed to path
// only when write succeeded, so that a failed statement leaves no file that looks whole. Unless
// overwrite, a file at path, even one made while write ran, is left as it is and the error is
// fs.ErrExist: the temporary file is linked to path, which never replaces a file.
func writeFileWhole(path string, overwrite bool, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	err = write(tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if !overwrite {
		return os.Link(tmp.Name(), path)
	}
	return os.Rename(tmp.Name(), path)
}
