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

// TestApprovalSummary: beside the exact JSON, an approval says in words what it asks for, with
// max_spend in dollars (100000 micro-units is $0.10, not 100000 dollars), the limits left out
// named as the resource profile's, and a prompt by its session and length.
func TestApprovalSummary(t *testing.T) {
	for _, c := range []struct{ action, args, want string }{
		{"spawn", `{"purpose":"p","model":"small","max_turns":5,"max_spend":100000}`,
			"Start a session: max spend $0.10, max turns 5, model small."},
		{"spawn", `{"purpose":"p","max_spend":5000000,"resource_profile":"large","agent_name":"a\u202eb"}`,
			`Start a session: max spend $5.00, the resource profile's max turns, the default model, resource profile large, agent name a\u202eb.`},
		{"spawn", `{"purpose":"p","max_spend":125}`,
			"Start a session: max spend $0.000125, the resource profile's max turns, the default model."},
		{"prompt", `{"session_id":"s1","prompt":"héllo"}`, "Send session s1 a prompt of 5 characters."},
		{"spawn", `not json`, ""},
		{"other", `{}`, ""},
	} {
		if got := actionSummary(c.action, json.RawMessage(c.args)); got != c.want {
			t.Errorf("actionSummary(%s, %s) = %q, want %q", c.action, c.args, got, c.want)
		}
	}
}
