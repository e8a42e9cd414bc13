package mcp

import (
	"testing"
)

// TestCreditToolSchemaComesFromTheContract: get_credits' input schema is the OpenAPI component
// GetCreditsInput, converted, which takes no arguments (an argument is refused by the schema);
// the tool registers and is read-only, idempotent and closed-world.
func TestCreditToolSchemaComesFromTheContract(t *testing.T) {
	tools := CreditTools(nil)
	if len(tools) != 1 || tools[0].Name != ToolGetCredits {
		t.Fatalf("credit tools: %+v", tools)
	}
	tl := tools[0]
	want, err := ComponentSchema("GetCreditsInput")
	if err != nil {
		t.Fatal(err)
	}
	if string(tl.InputSchema) != string(want) {
		t.Errorf("input schema %s is not component GetCreditsInput %s", tl.InputSchema, want)
	}
	rt, err := newRegisteredTool(tl)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.schema.Check([]byte(`{}`)); err != nil {
		t.Errorf("no arguments refused: %v", err)
	}
	if err := rt.schema.Check([]byte(`{"key_id":"another"}`)); err == nil {
		t.Error("an argument (another key's id) is accepted: the tool must take none")
	}
	if a := tl.Annotations; !a.ReadOnly || !a.Idempotent || a.Destructive || a.OpenWorld {
		t.Errorf("annotations %+v", a)
	}
}
