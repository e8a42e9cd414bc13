package web

import "time"

// SessionToken is sessionToken, for the tests that end a session they found in the database.
var SessionToken = sessionToken

// SealedIDsSecret is the server secret the console seals ids with.
const SealedIDsSecret = sealedIDsSecret

// SetTailWriteWait sets how long a tail's write waits for its browser, until restore.
func SetTailWriteWait(d time.Duration) (restore func()) {
	old := tailWriteWait
	tailWriteWait = d
	return func() { tailWriteWait = old }
}
