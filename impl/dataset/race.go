//go:build race

package dataset

// raceAllowance is added to an engine process's memory bound in a binary built with the race
// detector (the test binaries of make test, which serve as their own engines): its runtime
// counts about 300 MiB more of the data segment idle (555-611 MiB measured under go test
// -race, against 230-302 MiB for a gateway's engine), which would leave DuckDB too little of
// the configured bound. A gateway built without it adds nothing (norace.go).
const raceAllowance = 512 << 20
