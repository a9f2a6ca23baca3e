package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/sandbox"
)

// conflictSandbox: the agent changed line 2 of a.txt and added b.txt;
// the user changed line 2 of a.txt too since the run.
func conflictSandbox(t *testing.T) (home, project, id string) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	home, project = t.TempDir(), t.TempDir()
	before := map[string]file{"a.txt": {"one\ntwo\nthree\n", 0o644}}
	after := map[string]file{"a.txt": {"one\nagent two\nthree\n", 0o644}, "b.txt": {"new\n", 0o644}}
	id = storedSandbox(t, home, project, before, after)
	if err := os.WriteFile(filepath.Join(project, "a.txt"), []byte("one\nmy two\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return home, project, id
}

func projectFiles(t *testing.T, project string) map[string]string {
	t.Helper()
	out := map[string]string{}
	des, err := os.ReadDir(project)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		data, err := os.ReadFile(filepath.Join(project, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[de.Name()] = string(data)
	}
	return out
}

// TestApplyIsAllOrNothing: a conflict keeps apply from writing anything
// by default; it names the file and says how to choose.
func TestApplyIsAllOrNothing(t *testing.T) {
	home, project, id := conflictSandbox(t)
	before := projectFiles(t, project)
	code, out, errOut := airlockCLI(t, home, "apply", id, "--all")
	if code != 1 {
		t.Fatalf("apply: exit %d, want 1\n%s%s", code, out, errOut)
	}
	if diff := cmp.Diff(before, projectFiles(t, project)); diff != "" {
		t.Errorf("the project changed (-before +after):\n%s", diff)
	}
	for _, want := range []string{"CONFLICT  a.txt", "held      b.txt", "Nothing was written: 1 file conflicts", "--resolve a.txt=theirs", "--partial"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = airlockCLI(t, home, "apply", id, "--all", "--json")
	var res sandbox.ApplyResult
	if err := json.Unmarshal([]byte(out), &res); code != 1 || err != nil {
		t.Fatalf("apply --json: exit %d, %v\n%s", code, err, out)
	}
	if !res.Held || len(res.Conflicts) != 1 || res.Conflicts[0].Path != "a.txt" || string(res.Conflicts[0].Ours) != "one\nmy two\nthree\n" ||
		string(res.Conflicts[0].Theirs) != "one\nagent two\nthree\n" || len(res.Withheld) != 1 || res.Withheld[0].Path != "b.txt" {
		t.Errorf("apply --json: %s", out)
	}
	if ev := lastEvent(t, home, id, sandbox.EventApplied); ev["held"] != true {
		t.Errorf("audit: %v", ev)
	}
	if des, _ := os.ReadDir(filepath.Join(home, "sandboxes", id, "applies")); len(des) != 0 {
		t.Errorf("held applies left journal directories: %v", des)
	}
	if diff := cmp.Diff(before, projectFiles(t, project)); diff != "" {
		t.Errorf("the project changed (-before +after):\n%s", diff)
	}
}

func TestApplyPartialWritesTheRest(t *testing.T) {
	home, project, id := conflictSandbox(t)
	code, out, _ := airlockCLI(t, home, "apply", id, "--all", "--partial")
	if code != 1 || !strings.Contains(out, "applied   b.txt") || !strings.Contains(out, "CONFLICT  a.txt") {
		t.Fatalf("apply --partial: exit %d\n%s", code, out)
	}
	want := map[string]string{"a.txt": "one\nmy two\nthree\n", "b.txt": "new\n"}
	if diff := cmp.Diff(want, projectFiles(t, project)); diff != "" {
		t.Errorf("project (-want +got):\n%s", diff)
	}
}

func TestApplyResolve(t *testing.T) {
	for _, tt := range []struct {
		choice, want, says string
	}{
		{"theirs", "one\nagent two\nthree\n", "took the approved change"},
		{"mine", "one\nmy two\nthree\n", "kept your version"},
		{"both", "one\nmy two\nagent two\nthree\n", "kept both sides"},
	} {
		t.Run(tt.choice, func(t *testing.T) {
			home, project, id := conflictSandbox(t)
			before := projectFiles(t, project)
			code, out, errOut := airlockCLI(t, home, "apply", id, "--all", "--resolve", "./a.txt="+tt.choice)
			if code != 0 || !strings.Contains(out, "resolved  a.txt ("+tt.says+")") {
				t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
			}
			want := map[string]string{"a.txt": tt.want, "b.txt": "new\n"}
			if diff := cmp.Diff(want, projectFiles(t, project)); diff != "" {
				t.Errorf("project (-want +got):\n%s", diff)
			}
			if code, out, errOut := airlockCLI(t, home, "undo", id); code != 0 {
				t.Fatalf("undo: exit %d\n%s%s", code, out, errOut)
			}
			if diff := cmp.Diff(before, projectFiles(t, project)); diff != "" {
				t.Errorf("after undo (-before +after):\n%s", diff)
			}
		})
	}
}

func TestApplyResolveErrors(t *testing.T) {
	home, _, id := conflictSandbox(t)
	for _, arg := range []string{"a.txt", "a.txt=ours", "=theirs"} {
		if code, _, errOut := airlockCLI(t, home, "apply", id, "--all", "--resolve", arg); code != ExitError || !strings.Contains(errOut, "--resolve") {
			t.Errorf("--resolve %q: exit %d, %s", arg, code, errOut)
		}
	}
	if code, _, errOut := airlockCLI(t, home, "apply", id, "b.txt", "--resolve", "b.txt=mine"); code != 0 || !strings.Contains(errOut, "did not conflict") {
		t.Errorf("--resolve of a file that does not conflict: exit %d, %s", code, errOut)
	}
}
