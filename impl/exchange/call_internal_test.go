package exchange

import (
	"errors"
	"testing"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/routing"
)

// TestAgentCallFit: an in-process call's output bound is lowered to the largest one whose
// worst case (at the model's highest expert price, every input token at the dearest input kind:
// here a one-hour cache write) fits the ceiling; below 16 tokens the call
// does not fit (ErrSpendCeiling).
func TestAgentCallFit(t *testing.T) {
	m := &routing.Model{ID: "m", MaxOutputTokens: 4096, Experts: []routing.Expert{
		{Price: price.Price{Rates: price.Rates{Input: 1_000_000, CacheRead: 100_000, CacheWrite5m: 1_250_000, CacheWrite1h: 2_000_000, Output: 4_000_000}}},
		{Price: price.Price{Rates: price.Rates{Input: 2_000_000, CacheRead: 200_000, CacheWrite5m: 2_500_000, CacheWrite1h: 4_000_000, Output: 8_000_000}}},
	}}
	const input = 1000
	worst := func(out int) int64 { return price.Part(input, 4_000_000) + price.Part(int64(out), 8_000_000) }
	if got, want := price.Worst(input, 4096, m.MaxPrice()), worst(4096); got != want {
		t.Fatalf("worst case %d, want %d (input at the dearer expert's one-hour cache-write price)", got, want)
	}
	for _, c := range []struct {
		name    string
		ceiling int64
		want    int // 0: ErrSpendCeiling
	}{
		{"the whole bound fits", worst(4096), 4096},
		{"lowered", worst(1000), 1000},
		{"lowered between two costs", worst(1000) + 1, 1000},
		{"the smallest call", worst(16), 16},
		{"nothing fits", worst(16) - 1, 0},
		{"not even the input", worst(0) - 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := (&callOptions{ceiling: c.ceiling}).fit(m, input, 4096, 1)
			if c.want == 0 {
				if !errors.Is(err, ErrSpendCeiling) {
					t.Fatalf("fit = %d, %v; want ErrSpendCeiling", got, err)
				}
				return
			}
			if err != nil || worst(got) > c.ceiling || (got < 4096 && worst(got+1) <= c.ceiling) {
				t.Fatalf("fit = %d, %v (worst %d, ceiling %d)", got, err, worst(got), c.ceiling)
			}
			if got != c.want && worst(got) != worst(c.want) {
				t.Fatalf("fit = %d, want %d", got, c.want)
			}
		})
	}
}
