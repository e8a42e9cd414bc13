package generated

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// checkGenerated runs `make check-generated` at the repository root with the given spec.
func checkGenerated(t *testing.T, spec string) (string, error) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "--no-print-directory", "-C", root, "check-generated", "OPENAPI_SPEC="+spec)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

func TestCheckGeneratedFailsOnAnUnregeneratedSpecEdit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the code generators")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	root, _ := filepath.Abs("../..")
	orig, err := os.ReadFile(filepath.Join(root, "openapi", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := checkGenerated(t, filepath.Join(root, "openapi", "openapi.yaml")); err != nil {
		t.Fatalf("check-generated fails on the committed tree: %v\n%s", err, out)
	}
	// An edit that changes generated code: a new optional field on the credit balance.
	edited := strings.Replace(string(orig), "        balance_micros:\n", "        currency: {type: string}\n        balance_micros:\n", 1)
	if edited == string(orig) {
		t.Fatal("the edit did not apply")
	}
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	if err := os.WriteFile(spec, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := checkGenerated(t, spec)
	if err == nil {
		t.Fatalf("check-generated passed although the spec changed without regenerating:\n%s", out)
	}
	if !strings.Contains(out, "stale") {
		t.Errorf("the failure does not say what is stale:\n%s", out)
	}
}
