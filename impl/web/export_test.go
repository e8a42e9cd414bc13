package web

import (
	"time"

	"github.com/tollgate/tollgate/impl/sealedid"
)

// SessionToken is the Sessions page's name of the session id, for the tests that end a session
// they found in the database.
func SessionToken(seal *sealedid.Seal, id int64) string { return seal.Tagged(id, sessionTag) }

// SetTailWriteWait sets how long a tail's write waits for its browser, until restore.
func SetTailWriteWait(d time.Duration) (restore func()) {
	old := tailWriteWait
	tailWriteWait = d
	return func() { tailWriteWait = old }
}

// RoutePatterns are the patterns of the console's routes, as registered on its router.
func (a *App) RoutePatterns() []string { return append([]string(nil), a.routePatterns...) }
