//go:build !race

package dataset

// raceAllowance is added to an engine process's memory bound in a binary built with the race
// detector (race.go); nothing in any other build.
const raceAllowance = 0
