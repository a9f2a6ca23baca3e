package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// TestFanOutInVMs runs three attempts of one script from one baseline in
// three real VMs: each edits the project its own way, each is its own
// reviewable sandbox, compare shows them side by side, and the one picked
// is applied.
func TestFanOutInVMs(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	project := t.TempDir()
	copyTree(t, filepath.Join(testenv.RepoRoot(t), "examples", "demo-project"), project)
	script := filepath.Join(t.TempDir(), "attempt.sh")
	os.WriteFile(script, []byte(`set -e
echo "attempt $AIRLOCK_ATTEMPT of $AIRLOCK_GROUP" > ATTEMPT.txt
echo "- idea $AIRLOCK_ATTEMPT" >> TODO.md
mkdir -p .airlock
echo "Attempt $AIRLOCK_ATTEMPT: one idea" > .airlock/summary.md
echo "attempt $AIRLOCK_ATTEMPT done"
`), 0o644)

	code, out, errOut := airlockCLI(t, home, "run", "--arch", "amd64", "--memory", "256MiB", "--disk", "none",
		"--project", project, "--script", script, "--fan-out", "3", "--parallel", "3",
		"--verify", `grep -q "idea 2" TODO.md && echo verified`)
	if code != 0 || !regexp.MustCompile(`(?m)^2 +[0-9a-f]{8} +- +ready for review +0 +passed`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^1 +[0-9a-f]{8} +- +ready for review +0 +FAILED \(exit 1\)`).MatchString(out) {
		t.Fatalf("run --fan-out 3: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for k := 1; k <= 3; k++ {
		if !strings.Contains(out, fmt.Sprintf("[%d] attempt %d done", k, k)) {
			t.Errorf("attempt %d's output is not shown with its number:\n%s", k, out)
		}
	}
	m := regexp.MustCompile(`fan-out ([0-9a-f]{8}): 3 attempts from one baseline`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no group in the output:\n%s", out)
	}
	group := m[1]

	code, out, errOut = airlockCLI(t, home, "compare", group, "--json")
	var rows []sandbox.Comparison
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 3 {
		t.Fatalf("compare --json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	ids := map[string]bool{}
	for i, r := range rows {
		ids[r.ID] = true
		if r.Attempt != i+1 || r.Group != group || r.Status != sandbox.StatusReady || r.ExitCode == nil || *r.ExitCode != 0 {
			t.Errorf("row %d: %+v", i, r)
		}
		if r.Verify == nil || r.Verify.Passed != (i == 1) {
			t.Errorf("row %d: verify %+v, want passed only for attempt 2", i, r.Verify)
		}
		if r.Changes == nil || r.Changes.Files != 2 || r.Rationale != fmt.Sprintf("Attempt %d: one idea", i+1) {
			t.Errorf("row %d: changes %+v rationale %q", i, r.Changes, r.Rationale)
		}
		// Each attempt is reviewable on its own and holds its own result.
		code, diff, _ := airlockCLI(t, home, "diff", r.ID, "ATTEMPT.txt")
		if code != 0 || !strings.Contains(diff, fmt.Sprintf("+attempt %d of %s", i+1, group)) {
			t.Errorf("diff of attempt %d: exit %d\n%s", i+1, code, diff)
		}
	}
	if len(ids) != 3 {
		t.Errorf("attempts share sandboxes: %v", ids)
	}
	var st struct {
		BaselineSHA256 string `json:"baseline_sha256"`
	}
	shas := map[string]bool{}
	for id := range ids {
		_, out, _ := airlockCLI(t, home, "status", id, "--json")
		json.Unmarshal([]byte(out), &st)
		shas[st.BaselineSHA256] = true
	}
	if len(shas) != 1 {
		t.Errorf("the attempts do not share one baseline: %v", shas)
	}

	// Pick the second attempt.
	if code, out, errOut := airlockCLI(t, home, "apply", rows[1].ID, "--all"); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	if got, _ := os.ReadFile(filepath.Join(project, "ATTEMPT.txt")); string(got) != "attempt 2 of "+group+"\n" {
		t.Errorf("ATTEMPT.txt after applying attempt 2: %q", got)
	}
	code, out, _ = airlockCLI(t, home, "compare", rows[0].ID[:6], rows[2].ID)
	if code != 0 || !strings.Contains(out, "RATIONALE") || !strings.Contains(out, "Attempt 3: one idea") || strings.Contains(out, "Attempt 2") {
		t.Errorf("compare of two IDs: exit %d\n%s", code, out)
	}
}

// TestFanOutAgents runs two agents on one prompt side by side, in two real
// VMs from one snapshot: the demo agent (its fake model through the
// proxy) and a preset of the user's agents.toml; compare names the agent
// of each attempt and its rationale (the summary, or else the final
// message from its JSON output).
func TestFanOutAgents(t *testing.T) {
	testenv.SkipIfShort(t)
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	os.MkdirAll(filepath.Join(cfg, "airlock"), 0o700)
	if err := os.WriteFile(filepath.Join(cfg, "airlock", "agents.toml"), []byte(`[scribe]
command = ["sh", "-c", "echo \"$1\" > SCRIBE.txt; echo '{\"result\": \"Wrote the task down.\"}'", "sh", "{prompt}"]
interactive = ["sh"]
hosts = []
user = "root"
rationale = { json_field = "result" }
`), 0o600); err != nil {
		t.Fatal(err)
	}
	home := testenv.VMHome(t)
	project := t.TempDir()
	copyTree(t, filepath.Join(testenv.RepoRoot(t), "examples", "demo-project"), project)

	code, out, errOut := airlockCLI(t, home, "run", "--arch", "amd64", "--memory", "256MiB", "--disk", "none",
		"--project", project, "--agent", "demo,scribe", "--prompt", "Add stop words", "--parallel", "2", "--json")
	var res fanOutResult
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || len(res.Attempts) != 2 {
		t.Fatalf("run --agent demo,scribe: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	code, out, errOut = airlockCLI(t, home, "compare", res.Group, "--json")
	var rows []sandbox.Comparison
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 2 {
		t.Fatalf("compare --json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if rows[0].Agent != "demo" || !strings.Contains(rows[0].Rationale, "Add stop words") || rows[0].Changes == nil {
		t.Errorf("demo attempt: %+v", rows[0])
	}
	if rows[1].Agent != "scribe" || rows[1].Rationale != "Wrote the task down." || rows[1].Changes == nil || rows[1].Changes.Added != 1 {
		t.Errorf("scribe attempt: %+v", rows[1])
	}
	code, diff, _ := airlockCLI(t, home, "diff", rows[1].ID, "SCRIBE.txt")
	if code != 0 || !strings.Contains(diff, "+Add stop words") {
		t.Errorf("the scribe's change: exit %d\n%s", code, diff)
	}
	code, out, _ = airlockCLI(t, home, "compare", res.Group)
	if code != 0 || !regexp.MustCompile(`(?m)^2 +[0-9a-f]{8} +scribe +ready for review`).MatchString(out) {
		t.Errorf("compare: exit %d\n%s", code, out)
	}
}
