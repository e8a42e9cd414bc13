package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// microsValue is a flag that takes an amount of micro-units, the admin commands' unit of money
// (1 USD = 1,000,000), written as an integer with optional underscores ("500_000"). An amount
// written in dollars ("0.5", "$0.50") is refused with the integer to give instead, rather
// than the flag package's bare "parse error" (seen by this session's newcomer check:
// `-credit-cap 0.5`).
type microsValue int64

// String is the amount as given.
func (m *microsValue) String() string { return strconv.FormatInt(int64(*m), 10) }

// Set reads s as micro-units.
func (m *microsValue) Set(s string) error {
	n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err == nil {
		*m = microsValue(n)
		return nil
	}
	usd, ferr := strconv.ParseFloat(strings.TrimPrefix(strings.ReplaceAll(s, ",", ""), "$"), 64)
	if ferr == nil && usd >= 0 && usd < math.MaxInt64/1_000_000 {
		return fmt.Errorf("the amount is in micro-units (1 USD = 1,000,000): for $%s give %d", strconv.FormatFloat(usd, 'f', -1, 64), int64(math.Round(usd*1_000_000)))
	}
	return errors.New("not an integer number of micro-units (1 USD = 1,000,000)")
}
