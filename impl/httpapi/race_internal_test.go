//go:build race

package httpapi

// raceEnabled says the tests run under the race detector, which changes what some code
// allocates (slices.Grow allocates its temporary slice under -race).
const raceEnabled = true
