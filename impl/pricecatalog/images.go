package pricecatalog

import "strings"

// DefaultImageTokens is the most input tokens one image is taken to cost on a model this
// package has no rule for: above what Anthropic bills an image at its largest accepted size
// and above the largest high-detail image of every OpenAI model whose rule is at most 85 base
// tokens and 170 a tile (1,445 tokens) or 1,536 patches at a multiplier of 1.3. Anthropic bills
// an image by its 28-pixel patches, ⌈width / 28⌉ × ⌈height / 28⌉ visual tokens, after scaling
// it down to the model's native resolution (platform.claude.com/docs/en/build-with-claude/vision):
// about 1.15 megapixels up to Claude Opus 4.6 (some 1,600 tokens), 2,576 pixels on the long
// edge and about 3.75 megapixels from Claude Opus 4.7 on, so up to 4,784 tokens (2,576 × 1,456
// pixels: 92 × 52 patches). Trial h4: at 2,000 an image, ten screenshots on claude-opus-4-7
// written to the one-hour cache were billed 207,670 micro-units of their 486,000.
const DefaultImageTokens = 4800

// openAIImageRules are OpenAI's published rules for what one image input costs, by model
// family, from the "Calculating costs" section of the Images and vision guide
// (platform.openai.com/docs/guides/images-vision#calculating-costs; the two systems and
// their model scopes are also set side by side in openai/openai-python issue 2851):
//
//   - tile models: a high-detail image is scaled to fit a 2048-pixel square, then so that its
//     shorter side is at most 768 pixels, and costs base + tile × the 512-pixel tiles that
//     cover it; the most tiles any image can need is 8 (768 × 2048: 2 × 4), so the most an
//     image costs is base + 8 × tile. A low-detail image costs base.
//   - patch models: an image costs its 32-pixel patches (scaled down to at most 1,536 of them)
//     times the model's multiplier; the most is 1,536 × multiplier, rounded up.
//
// gpt-4o-mini's rule (2,833 + 5,667 a tile: up to 48,169 tokens an image) is why a fixed
// allowance is not enough (trial h12 D9: four images on gpt-4o-mini were billed 102,024
// input tokens against a reservation of about 8,000).
var openAIImageRules = []struct {
	// family is the model name or the prefix of its dated snapshots.
	family string
	// base and tile are a tile model's tokens; multiplier (thousandths) a patch model's.
	base, tile, multiplierMilli int
}{
	{family: "gpt-4o-mini", base: 2833, tile: 5667},
	{family: "gpt-4o", base: 85, tile: 170},
	{family: "gpt-4.5", base: 85, tile: 170},
	{family: "gpt-4.1-mini", multiplierMilli: 1620},
	{family: "gpt-4.1-nano", multiplierMilli: 2460},
	{family: "gpt-4.1", base: 85, tile: 170},
	{family: "gpt-5-mini", multiplierMilli: 1620},
	{family: "gpt-5-nano", multiplierMilli: 2460},
	{family: "gpt-5-chat-latest", base: 70, tile: 140},
	{family: "gpt-5", base: 70, tile: 140},
	{family: "o4-mini", multiplierMilli: 1720},
	{family: "o1-pro", base: 75, tile: 150},
	{family: "o1", base: 75, tile: 150},
	{family: "o3", base: 75, tile: 150},
	{family: "computer-use-preview", base: 65, tile: 129},
}

// The bounds of OpenAI's image rules.
const (
	maxTiles   = 8
	maxPatches = 1536
)

// ImageTokens is the most input tokens one image can cost on the model named (a provider's
// model id such as "gpt-4o-mini-2024-07-18", or a catalog name), by the provider's published
// rule, and whether a rule is known for it. The rule of the longest family name that is the
// model's name or the start of its name followed by '-' (a dated snapshot) is used, so that
// "gpt-4o-mini" is not read as "gpt-4o", nor "gpt-5.1" as "gpt-5".
func ImageTokens(model string) (int, bool) {
	best := -1
	for i, r := range openAIImageRules {
		if model != r.family && !strings.HasPrefix(model, r.family+"-") {
			continue
		}
		if best < 0 || len(r.family) > len(openAIImageRules[best].family) {
			best = i
		}
	}
	if best < 0 {
		return 0, false
	}
	r := openAIImageRules[best]
	if r.multiplierMilli > 0 {
		return (maxPatches*r.multiplierMilli + 999) / 1000, true
	}
	return r.base + maxTiles*r.tile, true
}
