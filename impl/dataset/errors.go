package dataset

import (
	"errors"
	"fmt"
)

// ErrNotOwned matches every *NotOwnedError under errors.Is.
var ErrNotOwned = errors.New("dataset is not owned by the caller")

// NotOwnedError refuses a dataset name that does not resolve to an existing dataset under the
// caller's own namespace. Its text is the exact refusal that the tools show.
type NotOwnedError struct {
	// Name is the name as the caller gave it.
	Name string
}

// Error returns "dataset '<name>' is not owned by the caller".
func (e *NotOwnedError) Error() string {
	return fmt.Sprintf("dataset '%s' is not owned by the caller", e.Name)
}

// Is reports whether target is ErrNotOwned.
func (e *NotOwnedError) Is(target error) bool { return target == ErrNotOwned }

// Code classifies an *Error.
type Code string

// The codes of *Error.
const (
	// CodeNotLoaded: the dataset is the caller's but has not been loaded.
	CodeNotLoaded Code = "not_loaded"
	// CodeInvalid: an argument (columns, limit, filter, name for put) is not acceptable.
	CodeInvalid Code = "invalid_argument"
	// CodeRefused: the SQL is not a single SELECT or WITH statement.
	CodeRefused Code = "refused"
	// CodeTimeout: the query ran longer than the statement timeout and was interrupted.
	CodeTimeout Code = "timeout"
	// CodeFailed: the engine rejected the SQL or the data (syntax, binder, permission, memory).
	CodeFailed Code = "query_failed"
)

// Error is a failure caused by the caller's request. Its message is meant for the caller
// (it never contains a storage path); every other error this package returns is internal and
// should be logged rather than shown.
type Error struct {
	Code Code
	Msg  string
}

// Error returns the message.
func (e *Error) Error() string { return e.Msg }

func userErr(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// ErrStoreUnavailable matches every *StoreUnavailableError under errors.Is.
var ErrStoreUnavailable = errors.New("the dataset store is unavailable")

// StoreUnavailableError reports that the dataset store (an object store, say) did not answer
// in time or could not be reached. It is nobody's mistake and it passes: callers see its text,
// which names the store and the operation but never an address, a key or a credential.
type StoreUnavailableError struct {
	// Op is what was being done: "list", "read", "write", "delete" or "stat".
	Op string
	// Err is the underlying failure (a timeout, a refused connection, a 5xx answer), for logs.
	Err error
}

// Error returns "the dataset store is unavailable (<op> failed): try again later".
func (e *StoreUnavailableError) Error() string {
	return fmt.Sprintf("the dataset store is unavailable (%s failed): try again later", e.Op)
}

// Unwrap returns the underlying failure.
func (e *StoreUnavailableError) Unwrap() error { return e.Err }

// Is reports whether target is ErrStoreUnavailable.
func (e *StoreUnavailableError) Is(target error) bool { return target == ErrStoreUnavailable }

// CallerMessage returns the text to show the caller for err and true when err is a
// *NotOwnedError, a *StoreUnavailableError or an *Error; otherwise it returns "", false and err
// is internal.
func CallerMessage(err error) (string, bool) {
	var no *NotOwnedError
	if errors.As(err, &no) {
		return no.Error(), true
	}
	var su *StoreUnavailableError
	if errors.As(err, &su) {
		return su.Error(), true
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Msg, true
	}
	return "", false
}
