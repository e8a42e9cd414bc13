package dataset

import (
	"context"
	"errors"
	"io/fs"
	"regexp"
	"strings"

	"github.com/google/uuid"
)

// Format is a dataset file format.
type Format string

// The dataset formats, each stored as <name>.<format>.
const (
	CSV     Format = "csv"
	Parquet Format = "parquet"
	JSONL   Format = "jsonl"
)

// formats is the order in which a name is resolved when files of several formats exist
// (Put leaves only one, so this matters only for files placed by other means).
var formats = []Format{Parquet, CSV, JSONL}

// ParseFormat returns the format with the given name (as in a file extension, without the
// dot), or false.
func ParseFormat(s string) (Format, bool) {
	for _, f := range formats {
		if s == string(f) {
			return f, true
		}
	}
	return "", false
}

// nameRE is the grammar of dataset names: ASCII letters, digits, '_' and '-', starting with a
// letter or digit, at most 64 characters.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// ValidName reports whether name is a well-formed dataset name.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// tenantPrefix is the storage key prefix of an account's datasets.
func tenantPrefix(account uuid.UUID) string { return "tenant/" + account.String() + "/" }

// FullName returns the full name of the account's dataset name: "tenant/<account-id>/<name>",
// with the account id in its canonical lowercase form. Every operation that takes a dataset
// reference accepts it as well as the short name, and the tools show both.
func FullName(account uuid.UUID, name string) string { return tenantPrefix(account) + name }

// datasetKey is the storage key of the account's dataset file.
func datasetKey(account uuid.UUID, name string, f Format) string {
	return tenantPrefix(account) + name + "." + string(f)
}

// cleanName checks a caller's dataset reference and returns the bare dataset name. It accepts
// a bare name, optionally with one of the format extensions (which then pins the format), and
// the full name "tenant/<caller's account id>/<name>[.ext]" (see FullName), the id written
// exactly as FullName writes it. Everything else is refused with a *NotOwnedError that echoes
// the reference as given: another account's id, an id in another spelling (upper case, no
// hyphens, braces), the account's name in place of its id, any other path.
func cleanName(account uuid.UUID, ref string) (string, Format, error) {
	s := strings.TrimPrefix(ref, tenantPrefix(account))
	var pinned Format
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		f, ok := ParseFormat(s[i+1:])
		if !ok {
			return "", "", &NotOwnedError{Name: ref}
		}
		s, pinned = s[:i], f
	}
	if !ValidName(s) {
		return "", "", &NotOwnedError{Name: ref}
	}
	return s, pinned, nil
}

// resolved is a dataset reference resolved to an existing object in the caller's namespace.
type resolved struct {
	Name   string
	Format Format
	Object Object
}

// resolve finds the caller's dataset file for ref. A reference that is malformed, outside the
// caller's namespace or names no existing file is a *NotOwnedError; a store that does not
// answer is a *StoreUnavailableError.
func (s *Service) resolve(ctx context.Context, account uuid.UUID, ref string) (resolved, error) {
	name, pinned, err := cleanName(account, ref)
	if err != nil {
		return resolved{}, err
	}
	try := formats
	if pinned != "" {
		try = []Format{pinned}
	}
	for _, f := range try {
		obj, err := s.storage.Stat(ctx, datasetKey(account, name, f))
		if err == nil {
			return resolved{Name: name, Format: f, Object: obj}, nil
		}
		if errors.Is(err, ErrStoreUnavailable) {
			// Nothing can be said of the name while the store does not answer.
			return resolved{}, err
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrInvalid) {
			// Refuse what cannot be checked (a link that escapes, an I/O error), and say why
			// in the log only.
			s.opts.Logger.Warn("dataset storage refused a lookup", "account", account, "dataset", name, "err", err)
		}
	}
	return resolved{}, &NotOwnedError{Name: ref}
}
