package web

import "testing"

// TestFormatDaysLeft shows the Usage page's "days left" estimate as a person reads it: tenths
// below ten days, whole days with thousands separators above.
func TestFormatDaysLeft(t *testing.T) {
	for days, want := range map[float64]string{
		0.25: "0.2", 3.06: "3.1", 9.94: "9.9", 10: "10", 999.4: "999", 999.6: "1,000",
		15648.3: "15,648", 1234567.8: "1,234,568",
	} {
		if got := formatDaysLeft(days); got != want {
			t.Errorf("formatDaysLeft(%v) = %q, want %q", days, got, want)
		}
	}
}
