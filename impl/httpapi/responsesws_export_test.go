package httpapi

import "time"

// SetResponsesSocketIdle sets how long a Responses WebSocket may stay idle, for the test, and
// restores it with the returned function.
func SetResponsesSocketIdle(d time.Duration) (restore func()) {
	old := responsesSocketIdle.Swap(int64(d))
	return func() { responsesSocketIdle.Store(old) }
}

// SetResponsesSocketStall sets how long a Responses WebSocket message may wait for its next
// bytes, for the test, and restores it with the returned function.
func SetResponsesSocketStall(d time.Duration) (restore func()) {
	old := responsesSocketStall.Swap(int64(d))
	return func() { responsesSocketStall.Store(old) }
}

// RaceEnabled lets the external tests ask whether the race detector is on.
const RaceEnabled = raceEnabled
