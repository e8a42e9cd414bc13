package convert

import "testing"

// TestFitThinking: a thinking budget at or above the clamped bound is lowered below it, or
// thinking is left out when the bound leaves less than the API's minimum budget.
func TestFitThinking(t *testing.T) {
	cases := []struct {
		body, want, dropped string
		bound               int
	}{
		{`{"model":"m","max_tokens":32000,"thinking":{"type":"enabled","budget_tokens":31999}}`, `{"model":"m","max_tokens":32000,"thinking":{"type":"enabled","budget_tokens":8191}}`, "", 8192},
		{`{"model":"m","thinking":{"type":"enabled","budget_tokens":4000},"stream":true}`, `{"model":"m","stream":true}`, "thinking", 1000},
		{`{"model":"m","thinking":{"type":"enabled","budget_tokens":2000}}`, "", "", 8192},
		{`{"model":"m","thinking":{"type":"adaptive"}}`, "", "", 100},
	}
	for _, c := range cases {
		got, _, left, err := fitThinking([]byte(c.body), c.bound)
		dropped := ""
		if left {
			dropped = "thinking"
		}
		want := c.want
		if want == "" {
			want = c.body
		}
		if err != nil || string(got) != want || dropped != c.dropped {
			t.Errorf("%s at %d: %s %q %v; want %s %q", c.body, c.bound, got, dropped, err, want, c.dropped)
		}
	}
}
