package web

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestApprovalArgumentsShowHiddenCharacters: the arguments an approver reads show every
// character that would otherwise reorder or hide text (a right-to-left override making
// "delete" read backwards, zero-width characters, a C1 control, a tag character beyond the
// Basic Multilingual Plane) as its \u escape, keep printable text of any script as it is, and
// stay the same JSON.
func TestApprovalArgumentsShowHiddenCharacters(t *testing.T) {
	purpose := "summarise sales \u202eeteled\u202c all\u200b rows\u00a0now\u009b2J\U000E0041 – café 中文"
	raw, _ := json.Marshal(map[string]string{"purpose": purpose})
	got := prettyJSON(raw)
	for _, hidden := range []string{"\u202e", "\u202c", "\u200b", "\u00a0", "\u009b", "\U000E0041"} {
		if strings.Contains(got, hidden) {
			t.Errorf("the arguments shown carry %q raw: %q", hidden, got)
		}
	}
	for _, want := range []string{`\u202e`, `\u202c`, `\u200b`, `\u00a0`, `\u009b`, `\udb40\udc41`, "– café 中文", "{\n  \"purpose\""} {
		if !strings.Contains(got, want) {
			t.Errorf("the arguments shown lack %q: %q", want, got)
		}
	}
	var back map[string]string
	if err := json.Unmarshal([]byte(got), &back); err != nil || back["purpose"] != purpose {
		t.Fatalf("the arguments shown are not the same JSON: %v %q", err, back["purpose"])
	}
}
