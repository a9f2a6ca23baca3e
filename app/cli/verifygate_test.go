package cli

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/sandbox"
)

// TestApplyWarnsWithoutPassingVerify: apply says, before writing, that
// the sandbox's verify failed or never ran, and says nothing when it
// passed; diff --stat heads with the verify result.
func TestApplyWarnsWithoutPassingVerify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		verify *sandbox.VerifyResult
		want   string
	}{
		{"none", nil, "warning: no verify ran in the sandbox"},
		{"failed", &sandbox.VerifyResult{Command: "go test ./...", ExitCode: 1}, "warning: verify FAILED (exit 1) in the sandbox: go test ./..."},
		{"passed", &sandbox.VerifyResult{Command: "go test ./...", Passed: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			sb, _ := readySandbox(t, home, map[string]string{"a.txt": "a\n"}, map[string]string{"a.txt": "b\n"}, "", "", "")
			if _, err := sb.Update(func(m *sandbox.Meta) { m.Verify = tc.verify }); err != nil {
				t.Fatal(err)
			}
			code, stat, _ := airlockCLI(t, home, "diff", sb.ID, "--stat")
			gate := "# airlock: tests passed in the sandbox (go test ./...)"
			if tc.want != "" {
				gate = "# airlock: " + strings.TrimPrefix(tc.want, "warning: ")
			}
			if code != 0 || !strings.HasPrefix(stat, gate) {
				t.Errorf("diff --stat: %d\n%s\nwant it to start with %q", code, stat, gate)
			}
			code, _, errOut := airlockCLI(t, home, "apply", sb.ID, "--all")
			if code != 0 {
				t.Fatalf("apply: %d %s", code, errOut)
			}
			if tc.want == "" && strings.Contains(errOut, "warning:") || tc.want != "" && !strings.Contains(errOut, tc.want) {
				t.Errorf("apply's stderr %q, want %q", errOut, tc.want)
			}
		})
	}
}
