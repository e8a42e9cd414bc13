package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable reports whether err says that the database cannot be reached or used right now
// (a connection refused, lost or timed out, a server shutting down, starting up or out of
// connections), rather than that a query was wrong. Such a failure is worth retrying later:
// the HTTP edge answers it with 503 and Retry-After, and the caches of a gateway process keep
// serving what they hold. The store's own errors (ErrNotFound, ErrConflict,
// ErrInsufficientCredit) and a server's refusal of a query (a constraint, a syntax error) are
// not.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) || errors.Is(err, ErrInsufficientCredit) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// The server answered: only some classes of SQLSTATE say it cannot serve now.
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "53"),          // insufficient resources: too many connections, out of memory or disk
			strings.HasPrefix(pgErr.Code, "57"),          // operator intervention: shutting down, starting up, query cancelled
			strings.HasPrefix(pgErr.Code, "58"),          // system error: I/O
			pgErr.Code == "40001", pgErr.Code == "40P01": // serialization failure, deadlock: a retry succeeds
			return true
		}
		return false
	}
	// No answer from the server: the connection could not be made, was lost, or timed out.
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded)
}

// RefusedData reports whether err is the server refusing the data of a statement (SQLSTATE
// classes 22, data exception, and 23, integrity constraint violation): the same data is refused
// again on a retry, unlike an Unavailable failure.
func RefusedData(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23"))
}
