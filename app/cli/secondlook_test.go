package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/review"
)

// secondLookSandbox is a run whose agent fixed a bug and, on the way,
// added a dependency, skipped a test, deleted another test file and
// wrote a token into a config file.
func secondLookSandbox(t *testing.T) (home, id string) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	home, project := t.TempDir(), t.TempDir()
	before := map[string]file{
		"main.go":      {"package main\n", 0o644},
		"package.json": {`{"name": "w", "dependencies": {"lodash": "^4"}}` + "\n", 0o644},
		"a_test.go":    {"package main\n\nfunc TestA(t *testing.T) {\n\ta()\n}\n", 0o644},
		"b_test.go":    {"package main\n\nfunc TestB(t *testing.T) {\n\tb()\n}\n", 0o644},
	}
	after := map[string]file{
		"main.go":        {"package main\n\nfunc main() {}\n", 0o644},
		"package.json":   {`{"name": "w", "dependencies": {"left-pad": "^1.3.0"}}` + "\n", 0o644},
		"a_test.go":      {"package main\n\nfunc TestA(t *testing.T) {\n\tt.Skip(\"flaky\")\n\ta()\n}\n", 0o644},
		"config/ci.env":  {"GITHUB_TOKEN=ghp_" + strings.Repeat("aB3x", 9) + "\n", 0o644},
		".envrc":         {"use nix\n", 0o644},
		"docs/readme.md": {"# docs\n", 0o644},
	}
	return home, storedSandbox(t, home, project, before, after)
}

// Each flagged file's reasons come before its diff as "# " lines; --stat
// marks them and counts them in one line; --flagged keeps only them;
// --json carries them.
func TestDiffShowsSecondLook(t *testing.T) {
	home, id := secondLookSandbox(t)

	code, patch, errOut := airlockCLI(t, home, "diff", id)
	if code != 0 {
		t.Fatalf("diff: exit %d\n%s%s", code, patch, errOut)
	}
	for _, want := range []string{
		"# tests skipped: t.Skip at line 4\ndiff --git a/a_test.go b/a_test.go\n",
		"# test file deleted (5 lines)\ndiff --git a/b_test.go b/b_test.go\n",
		"# possible credential: GitHub token at line 1\ndiff --git a/config/ci.env b/config/ci.env\n",
		"# dependencies: package.json changed: added left-pad; removed lodash\ndiff --git a/package.json b/package.json\n",
		"diff --git a/main.go b/main.go\n",
	} {
		if !strings.Contains(patch, want) {
			t.Errorf("diff lacks %q:\n%s", want, patch)
		}
	}

	code, stat, _ := airlockCLI(t, home, "diff", id, "--stat")
	want := `# airlock: no verify ran in the sandbox: nothing checked these changes (airlock run --verify "CMD", or verify = "CMD" in the project's airlock.toml)
 .envrc         | 1 +  # runs on your machine: direnv runs it when you cd in
 a_test.go      | 1 +  # tests skipped: t.Skip at line 4
 b_test.go      | 5 -----  # test file deleted (5 lines)
 config/ci.env  | 1 +  # possible credential: GitHub token at line 1
 docs/readme.md | 1 +
 main.go        | 2 ++
 package.json   | 2 +-  # dependencies: package.json changed: added left-pad; removed lodash
 7 files changed, 7 insertions(+), 6 deletions(-)
 5 files deserve a second look: 1 file that runs on your machine, 1 possible credential, 1 dependency change (added: left-pad; removed: lodash), 1 test deletion, 1 test skipped
 1 file runs on your machine (marked #): airlock apply --all leaves it out; name it, or add --include-host-exec
`
	if code != 0 || stat != want {
		t.Errorf("diff --stat: exit %d\n%s\nwant\n%s", code, stat, want)
	}

	code, stat, _ = airlockCLI(t, home, "diff", id, "--stat", "--flagged")
	if code != 0 || strings.Contains(stat, "main.go") || strings.Contains(stat, "docs/readme.md") || !strings.Contains(stat, " 5 files changed") ||
		!strings.Contains(stat, " 5 files deserve a second look") {
		t.Errorf("diff --stat --flagged: exit %d\n%s", code, stat)
	}
	code, patch, _ = airlockCLI(t, home, "diff", id, "--flagged")
	if code != 0 || strings.Contains(patch, "main.go") || !strings.Contains(patch, "diff --git a/package.json b/package.json") {
		t.Errorf("diff --flagged: exit %d\n%s", code, patch)
	}

	code, out, _ := airlockCLI(t, home, "--json", "diff", id, "--flagged")
	var got struct {
		Files []struct {
			Path  string        `json:"path"`
			Flags []review.Flag `json:"flags"`
		} `json:"files"`
		SecondLook review.SecondLook `json:"second_look"`
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("diff --json: exit %d, %v\n%s", code, err, out)
	}
	var paths []string
	for _, f := range got.Files {
		paths = append(paths, f.Path)
		if f.Path == "package.json" {
			if diff := cmp.Diff(review.Flag{Kind: review.FlagDependency, Reason: "dependencies: package.json changed: added left-pad; removed lodash",
				Added: []string{"left-pad"}, Removed: []string{"lodash"}}, f.Flags[0]); diff != "" {
				t.Errorf("package.json flag (-want +got):\n%s", diff)
			}
		}
	}
	if diff := cmp.Diff([]string{".envrc", "a_test.go", "b_test.go", "config/ci.env", "package.json"}, paths); diff != "" {
		t.Errorf("--json --flagged files (-want +got):\n%s", diff)
	}
	if got.SecondLook.Files != 5 || len(got.SecondLook.Kinds) != 5 || got.SecondLook.Added[0] != "left-pad" {
		t.Errorf("second_look: %+v", got.SecondLook)
	}
}

// With nothing flagged, --flagged shows nothing and says so on stderr,
// so that a patch written to a file stays empty.
func TestDiffFlaggedNothing(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	home, project := t.TempDir(), t.TempDir()
	id := storedSandbox(t, home, project, map[string]file{"main.go": {"package main\n", 0o644}},
		map[string]file{"main.go": {"package main\n\nfunc main() {}\n", 0o644}})
	code, out, errOut := airlockCLI(t, home, "diff", id, "--flagged")
	if code != 0 || out != "" || !strings.Contains(errOut, "No file is flagged") {
		t.Errorf("diff --flagged: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	code, out, _ = airlockCLI(t, home, "diff", id, "--stat")
	if code != 0 || strings.Contains(out, "second look") {
		t.Errorf("diff --stat: exit %d\n%s", code, out)
	}
}

// A row keeps every reason after its bar, and the overview comes only
// when it says more than the marks and the host-exec line.
func TestWriteStatSecondLook(t *testing.T) {
	cs := &review.Changeset{Files: []*review.File{
		{Path: "Makefile", Status: review.Modified, Added: 1, Removed: 1, Flags: []review.Flag{
			{Kind: review.FlagHostExec, Reason: "runs on your machine: make runs it"},
			{Kind: review.FlagCredential, Reason: "possible credential: AWS access key ID at line 3", Lines: []int{3}},
		}},
		{Path: "go.mod", Status: review.Modified, Added: 1, Flags: []review.Flag{{Kind: review.FlagDependency, Reason: "dependencies: go.mod changed: added a.example/b", Added: []string{"a.example/b"}}}},
		{Path: "logo.png", Status: review.Added, Binary: true, New: &review.Side{Size: 12}, Flags: []review.Flag{{Kind: review.FlagBinary, Reason: "binary (12 bytes): its content is not shown"}}},
	}}
	want := ` Makefile | 2 +-  # runs on your machine: make runs it  # possible credential: AWS access key ID at line 3
 go.mod   | 1 +  # dependencies: go.mod changed: added a.example/b
 logo.png | Bin 0 -> 12 bytes  # binary (12 bytes): its content is not shown
 3 files changed, 2 insertions(+), 1 deletion(-)
 3 files deserve a second look: 1 file that runs on your machine, 1 possible credential, 1 dependency change (added: a.example/b), 1 binary file
 1 file runs on your machine (marked #): airlock apply --all leaves it out; name it, or add --include-host-exec
`
	var out bytes.Buffer
	writeStat(&out, cs, 80)
	if out.String() != want {
		t.Errorf("stat:\n%s\nwant\n%s", out.String(), want)
	}
}

// The notes before flagged files stay out of the commit: an exported mbox
// of flagged changes applies with git am, its tree exactly the agent's.
func TestExportFlaggedAppliesWithGitAm(t *testing.T) {
	gitEnv(t)
	home := t.TempDir()
	old := map[string]string{
		"go.mod":    "module x\n\nrequire a.example/b v1.0.0\n",
		"a_test.go": "package x\n\nfunc TestA(t *testing.T) {\n\ta()\n}\n",
		"gone.txt":  numbered("g", 150),
	}
	sb, project, base := promoteSandbox(t, home, old, func(dir string) {
		writeFiles(t, dir, map[string]string{
			"go.mod":    "module x\n\nrequire (\n\ta.example/b v1.0.0\n\tevil.example/c v0.1.0\n)\n",
			"a_test.go": "package x\n\nfunc TestA(t *testing.T) {\n\tt.Skip()\n\ta()\n}\n",
		})
		must(t, os.Remove(filepath.Join(dir, "gone.txt")))
	}, true)
	mbox := filepath.Join(t.TempDir(), "agent.mbox")
	if code, out, errOut := airlockCLI(t, home, "export", sb.ID, "--all", "--format", "mbox", "-o", mbox); code != 0 {
		t.Fatalf("export: exit %d: %s\n%s", code, errOut, out)
	}
	data, err := os.ReadFile(mbox)
	must(t, err)
	for _, note := range []string{"# dependencies: go.mod changed: added evil.example/c\n", "# tests skipped: t.Skip at line 4\n", "# large deletion: deletes a file of 150 lines\n"} {
		if !strings.Contains(string(data), note) {
			t.Errorf("mbox lacks %q:\n%s", note, data)
		}
	}
	clone := filepath.Join(t.TempDir(), "clone")
	git(t, project, "clone", "-q", project, clone)
	git(t, clone, "checkout", "-q", "-b", "am", base)
	git(t, clone, "am", "-q", mbox)
	if got := git(t, clone, "show", "HEAD:go.mod"); !strings.Contains(got, "evil.example/c v0.1.0") {
		t.Errorf("go.mod after git am:\n%s", got)
	}
	if msg := git(t, clone, "log", "-1", "--format=%B"); strings.Contains(msg, "# ") {
		t.Errorf("a note reached the commit message:\n%s", msg)
	}
	if _, err := os.Stat(filepath.Join(clone, "gone.txt")); !os.IsNotExist(err) {
		t.Errorf("gone.txt after git am: %v", err)
	}
}
