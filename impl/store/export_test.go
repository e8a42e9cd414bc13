package store

import "sync"

// ResetSessionBoundsWarning lets a test see again the warning that warnSessionBoundsDropped gives
// once per process.
func ResetSessionBoundsWarning() { sessionBoundsDropped = sync.Once{} }
