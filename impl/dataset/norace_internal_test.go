//go:build !race

package dataset

// raceEnabled says the tests run under the race detector, whose runtime makes an engine
// process (a re-executed test binary) reserve more of its data segment than a gateway's does.
const raceEnabled = false
