package pricecatalog

import "testing"

// TestImageTokens: the most one image costs, by OpenAI's published rules (the Images and
// vision guide's "Calculating costs"), is found for a model's name and its dated snapshots,
// by the longest family, and not for a model without a rule.
func TestImageTokens(t *testing.T) {
	for model, want := range map[string]int{
		"gpt-4o-mini":             2833 + 8*5667, // 48,169
		"gpt-4o-mini-2024-07-18":  2833 + 8*5667,
		"gpt-4o":                  85 + 8*170, // 1,445
		"gpt-4o-2024-08-06":       85 + 8*170,
		"gpt-4.1":                 85 + 8*170,
		"gpt-4.1-mini":            2489, // 1,536 patches × 1.62, rounded up
		"gpt-4.1-mini-2025-04-14": 2489,
		"gpt-4.1-nano":            3779, // × 2.46
		"gpt-5":                   70 + 8*140,
		"gpt-5-2025-08-07":        70 + 8*140,
		"gpt-5-mini":              2489,
		"gpt-5-nano":              3779,
		"o4-mini":                 2642, // × 1.72
		"o3":                      75 + 8*150,
		"o1-pro":                  75 + 8*150,
	} {
		if got, ok := ImageTokens(model); !ok || got != want {
			t.Errorf("%s: %d %v, want %d", model, got, ok, want)
		}
	}
	for _, model := range []string{"gpt-5.1", "gpt-4oo", "claude-sonnet-4-5", ""} {
		if got, ok := ImageTokens(model); ok {
			t.Errorf("%s: a rule (%d) where none is published", model, got)
		}
	}
}

// TestMostTilesAnImageNeeds: by the high-detail tile rule as the guide states it (fit in a
// 2048-pixel square, then scale the shorter side down to 768, then count 512-pixel tiles),
// no image size needs more than maxTiles tiles, and some size needs that many.
func TestMostTilesAnImageNeeds(t *testing.T) {
	tiles := func(w, h float64) int {
		if w > 2048 || h > 2048 {
			s := 2048 / max(w, h)
			w, h = w*s, h*s
		}
		if short := min(w, h); short > 768 {
			s := 768 / short
			w, h = w*s, h*s
		}
		ceil := func(x float64) int {
			n := int(x / 512)
			if float64(n)*512 < x {
				n++
			}
			return n
		}
		return ceil(w) * ceil(h)
	}
	most := 0
	for w := 16.0; w <= 8192; w += 16 {
		for h := 16.0; h <= 8192; h += 48 {
			most = max(most, tiles(w, h))
		}
	}
	if most != maxTiles {
		t.Errorf("the most tiles an image needs: %d, want %d", most, maxTiles)
	}
	if tiles(2048, 768) != maxTiles || tiles(1024, 1024) != 4 || tiles(2048, 4096) != 6 {
		t.Errorf("the guide's examples: 1024×1024 needs 4 tiles (765 tokens at gpt-4o), 2048×4096 needs 6 (1,105)")
	}
}
