package cli

import (
	"bytes"
	"encoding/json"
	"github.com/airlock-dev/airlock/app/cli/clitest/auditcheck"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// airlockCLI runs the command line in-process with home as Airlock's home.
func airlockCLI(t *testing.T, home string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return airlockCLIIn(t, home, strings.NewReader(""), args...)
}

func airlockCLIIn(t *testing.T, home string, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	auditcheck.AtEnd(t, home)
	var out, errOut bytes.Buffer
	code = Main(append([]string{"--home", home}, args...), stdin, &out, &errOut)
	return code, out.String(), errOut.String()
}

// onRead calls do on the first Read, then reads from r: a way to act
// while the command runs in the VM (its input is read only once it runs).
type onRead struct {
	do   func()
	once sync.Once
	r    io.Reader
}

func (o *onRead) Read(p []byte) (int, error) {
	o.once.Do(o.do)
	return o.r.Read(p)
}

// TestEditDuringRun edits the real project while the command runs in the
// VM: apply then merges where the edits do not overlap and reports a
// conflict, leaving the user's file alone, where they do.
func TestEditDuringRun(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	project := t.TempDir()
	copyTree(t, filepath.Join(testenv.RepoRoot(t), "examples", "demo-project"), project)
	readme, _ := os.ReadFile(filepath.Join(project, "README.md"))
	todo := "# TODO (edited by you)\n\n- Stop words: let users leave out \"the\", \"a\", \"and\"… from the counts.\n"
	stdin := &onRead{r: strings.NewReader("go\n"), do: func() {
		os.WriteFile(filepath.Join(project, "README.md"), append([]byte("Edited by you, during the run.\n"), readme...), 0o644)
		os.WriteFile(filepath.Join(project, "TODO.md"), []byte(todo), 0o644)
	}}
	agent := `read go && echo "Agent line." >> README.md && sed -i "1s/.*/# TODO (edited by the agent)/" TODO.md`
	code, out, errOut := airlockCLIIn(t, home, stdin, "run", "-q", "--arch", "amd64", "-i", "--project", project, "--", "sh", "-c", agent)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	_, ids, _ := airlockCLI(t, home, "ls", "-q")
	id := strings.TrimSpace(ids)
	code, out, _ = airlockCLI(t, home, "apply", id, "--all", "--partial")
	if code != 1 || !regexp.MustCompile(`(?m)^merged +README\.md`).MatchString(out) || !regexp.MustCompile(`(?m)^CONFLICT +TODO\.md`).MatchString(out) {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	gotReadme, _ := os.ReadFile(filepath.Join(project, "README.md"))
	if want := "Edited by you, during the run.\n" + string(readme) + "Agent line.\n"; string(gotReadme) != want {
		t.Errorf("README.md after the merge:\n%s\nwant\n%s", gotReadme, want)
	}
	if got, _ := os.ReadFile(filepath.Join(project, "TODO.md")); string(got) != todo {
		t.Errorf("the conflicting TODO.md was changed:\n%s", got)
	}
}

func TestSandboxCommandsHelp(t *testing.T) {
	for _, args := range [][]string{{"run", "--help"}, {"ls", "--help"}, {"diff", "--help"}, {"apply", "--help"}, {"undo", "--help"}, {"logs", "--help"}, {"rm", "--help"}, {"stop", "--help"}} {
		code, out, _ := airlockCLI(t, t.TempDir(), args...)
		if code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%v: exit %d, output %q", args, code, out)
		}
	}
}

func TestSandboxCommandsWithoutSandboxes(t *testing.T) {
	home := t.TempDir()
	if code, out, _ := airlockCLI(t, home, "ls", "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("ls --json: exit %d, %q", code, out)
	}
	if code, out, _ := airlockCLI(t, home, "ls"); code != 0 || !strings.Contains(out, "airlock run") {
		t.Errorf("ls on an empty home should say how to make a sandbox: exit %d, %q", code, out)
	}
	for _, args := range [][]string{{"diff", "abc"}, {"apply", "abc", "--all"}, {"undo", "abc"}, {"logs", "abc"}, {"rm", "abc"}} {
		code, _, errOut := airlockCLI(t, home, args...)
		if code != ExitError || !strings.Contains(errOut, "no such sandbox") || !strings.Contains(errOut, "airlock ls") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	if code, _, errOut := airlockCLI(t, home, "run", "--project", t.TempDir()); code != ExitError || !strings.Contains(errOut, "no command") {
		t.Errorf("run without a command: exit %d, %q", code, errOut)
	}
}

// entry is one path of a tree, for comparing trees byte for byte.
type entry struct {
	Mode    fs.FileMode
	Content string // file content or link target
}

func treeState(t *testing.T, root string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := entry{Mode: fi.Mode()}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Content, err = os.Readlink(p)
		case fi.Mode().IsRegular():
			var b []byte
			b, err = os.ReadFile(p)
			e.Content = string(b)
		}
		out[filepath.ToSlash(rel)] = e
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func copyTree(t testing.TB, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from+"/.", to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
}

// testAgent is the demo agent plus a symbolic link and a check that the
// secret did not reach the workspace.
func testAgent(t *testing.T) string {
	t.Helper()
	demo, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "examples", "demo-agent.sh"))
	if err != nil {
		t.Fatal(err)
	}
	script := string(demo) + `
ln -s wordfreq/counter.py counter-link.py
if [ -e .env ]; then echo "SECRET IN THE WORKSPACE"; else echo "no .env in the workspace"; fi
`
	p := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(p, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunDiffApplyUndo runs the demo agent in a real VM through the
// command line and reviews its changes: the changeset, the diff against
// git's, partial applies, undo, and applies over the user's own edits.
func TestRunDiffApplyUndo(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	root := t.TempDir()
	project := filepath.Join(root, "project")
	os.Mkdir(project, 0o755)
	copyTree(t, filepath.Join(testenv.RepoRoot(t), "examples", "demo-project"), project)
	original := treeState(t, project)
	agent := testAgent(t)

	// The agent's result, made on the host from the same script, to check
	// what comes back from the VM against.
	base, after := filepath.Join(root, "base"), filepath.Join(root, "after")
	for _, d := range []string{base, after} {
		os.Mkdir(d, 0o755)
		copyTree(t, project, d)
		os.Remove(filepath.Join(d, ".env"))
	}
	if out, err := exec.Command("sh", "-c", "cd "+after+" && sh "+agent+" && rm -r .airlock").CombinedOutput(); err != nil {
		t.Fatalf("demo agent on the host: %v\n%s", err, out)
	}
	want := treeState(t, after)

	// run
	code, out, errOut := airlockCLI(t, home, "run", "--arch", "amd64", "--project", project, "--script", agent)
	if code != 0 {
		t.Fatalf("run: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "not copied, looks like a secret: .env") {
		t.Errorf("run did not report the secret:\n%s", errOut)
	}
	if !strings.Contains(out, "no .env in the workspace") || strings.Contains(out, "SECRET IN THE WORKSPACE") {
		t.Errorf("the secret reached the VM, or the agent did not run:\n%s", out)
	}
	for _, s := range []string{"Added stop words to wordfreq", "ready for review", "6 files changed: 2 modified, 2 added, 1 deleted, 1 mode changed"} {
		if !strings.Contains(out, s) {
			t.Errorf("run output lacks %q:\n%s", s, out)
		}
	}
	code, out, _ = airlockCLI(t, home, "ls", "--json")
	var list []sandbox.Info
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list) != 1 {
		t.Fatalf("ls --json: exit %d, %v, %q", code, err, out)
	}
	id := list[0].ID
	if list[0].Status != sandbox.StatusReady || list[0].Changes.Files != 6 || list[0].ScriptName != "agent.sh" {
		t.Errorf("ls: %+v", list[0])
	}
	if treeState(t, project)["README.md"] != original["README.md"] {
		t.Fatal("run changed the real project")
	}

	// Exactly the expected changeset.
	code, out, errOut = airlockCLI(t, home, "diff", id[:5], "--json")
	if code != 0 {
		t.Fatalf("diff --json: exit %d: %s", code, errOut)
	}
	var cs review.Changeset
	if err := json.Unmarshal([]byte(out), &cs); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range cs.Files {
		s := string(f.Status) + " " + f.Path
		if f.IsSymlink() {
			s += " -> " + f.New.Target
		}
		got = append(got, s)
	}
	wantChanges := []string{
		"modified README.md",
		"deleted TODO.md",
		"added counter-link.py -> wordfreq/counter.py",
		"mode-changed scripts/release.sh",
		"added tests/test_stopwords.py",
		"modified wordfreq/counter.py",
	}
	if diff := cmp.Diff(wantChanges, got); diff != "" {
		t.Errorf("changeset (-want +got):\n%s", diff)
	}

	// airlock diff agrees with git diff --no-index on the same two trees.
	code, ours, _ := airlockCLI(t, home, "diff", id)
	if code != 0 {
		t.Fatalf("diff: exit %d", code)
	}
	gitCmd := exec.Command("git", "-c", "core.quotepath=off", "diff", "--no-index", "--no-color", "--no-renames", "base", "after")
	gitCmd.Dir = root
	gitOut, _ := gitCmd.Output() // exit 1: the trees differ
	// Airlock's notes on files ("# runs on your machine: …") stand
	// between files' diffs, where git apply skips them; git has none.
	var notesOut strings.Builder
	for _, l := range strings.SplitAfter(ours, "\n") {
		if !strings.HasPrefix(l, "# ") {
			notesOut.WriteString(l)
		}
	}
	if !strings.Contains(ours, "# made executable: it can be run on your machine") {
		t.Errorf("airlock diff does not flag scripts/release.sh, made executable:\n%s", ours)
	}
	if diff := cmp.Diff(patchBodies(t, string(gitOut), "a/base/", "b/base/", "a/after/", "b/after/"), patchBodies(t, notesOut.String(), "a/", "b/")); diff != "" {
		t.Errorf("airlock diff and git diff --no-index differ (-git +airlock):\n%s\nairlock:\n%s\ngit:\n%s", diff, ours, gitOut)
	}
	applied := filepath.Join(root, "applied")
	os.Mkdir(applied, 0o755)
	copyTree(t, base, applied)
	gitApply := exec.Command("git", "apply", "--whitespace=nowarn", "-")
	gitApply.Dir, gitApply.Stdin = applied, strings.NewReader(ours)
	if out, err := gitApply.CombinedOutput(); err != nil {
		t.Errorf("git apply of airlock diff: %v\n%s", err, out)
	} else if diff := cmp.Diff(want, treeState(t, applied)); diff != "" {
		t.Errorf("git apply of airlock diff on the baseline (-agent's tree +patched):\n%s", diff)
	}
	code, stat, _ := airlockCLI(t, home, "diff", id, "--stat")
	if code != 0 || !strings.Contains(stat, " 6 files changed") || !strings.Contains(stat, "scripts/release.sh      |  0") {
		t.Errorf("diff --stat: exit %d\n%s", code, stat)
	}
	gitStat := exec.Command("git", "diff", "--no-index", "--shortstat", "base", "after")
	gitStat.Dir = root
	gs, _ := gitStat.Output()
	summary := ""
	for _, l := range strings.Split(stat, "\n") {
		if strings.Contains(l, " changed, ") {
			summary = strings.TrimSpace(l)
		}
	}
	if summary != strings.TrimSpace(string(gs)) {
		t.Errorf("diff --stat summary %q, git's %q", summary, strings.TrimSpace(string(gs)))
	}

	// Apply a subset of files and of hunks: exactly the expected bytes.
	code, out, errOut = airlockCLI(t, home, "apply", id, "--hunks", "wordfreq/counter.py:2", "tests/test_stopwords.py", "scripts/release.sh", "counter-link.py")
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	expect := maps.Clone(original)
	agentCounter := want["wordfreq/counter.py"].Content
	expect["wordfreq/counter.py"] = entry{Mode: 0o644, Content: strings.Replace(agentCounter, `"""Word counting, with optional stop words."""`, `"""Word counting."""`, 1)}
	expect["tests/test_stopwords.py"] = want["tests/test_stopwords.py"]
	expect["scripts/release.sh"] = entry{Mode: 0o755, Content: original["scripts/release.sh"].Content}
	expect["counter-link.py"] = want["counter-link.py"]
	if diff := cmp.Diff(expect, treeState(t, project)); diff != "" {
		t.Errorf("project after a partial apply (-want +got):\n%s", diff)
	}

	// Undo restores the original bytes.
	if code, out, errOut := airlockCLI(t, home, "undo", id); code != 0 {
		t.Fatalf("undo: exit %d\n%s\n%s", code, out, errOut)
	}
	if diff := cmp.Diff(original, treeState(t, project)); diff != "" {
		t.Errorf("project after undo (-original +got):\n%s", diff)
	}

	// The user edits the project after the run: a clean three-way merge
	// where the edits do not overlap, a reported conflict where they do,
	// never an overwrite.
	readme := "Edited by you.\n" + original["README.md"].Content
	counter := strings.Replace(original["wordfreq/counter.py"].Content, `"""Word counting."""`, `"""Counting words."""`, 1)
	os.WriteFile(filepath.Join(project, "README.md"), []byte(readme), 0o644)
	os.WriteFile(filepath.Join(project, "wordfreq/counter.py"), []byte(counter), 0o644)
	// The sandbox knows its baseline is behind the project now.
	code, out, errOut = airlockCLI(t, home, "status", id)
	if code != 0 || !regexp.MustCompile(`baseline is \d+ (second|minute)s? and 2 files behind the project \(2 modified\)`).MatchString(out) ||
		!strings.Contains(out, "README.md") || !strings.Contains(out, "wordfreq/counter.py") {
		t.Errorf("status: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = airlockCLI(t, home, "status", id, "--json")
	var status struct {
		ID        string            `json:"id"`
		Staleness sandbox.Staleness `json:"staleness"`
	}
	if err := json.Unmarshal([]byte(out), &status); code != 0 || err != nil || status.ID != id || status.Staleness.Modified != 2 || status.Staleness.Behind() != 2 {
		t.Errorf("status --json: exit %d, %v: %s", code, err, out)
	}
	code, out, errOut = airlockCLI(t, home, "apply", id, "README.md", "--hunks", "wordfreq/counter.py:1", "--partial")
	if code != 1 {
		t.Errorf("apply with a conflict: exit %d, want 1", code)
	}
	if !strings.Contains(errOut, "2 files behind the project") {
		t.Errorf("apply did not say the baseline is behind:\n%s", errOut)
	}
	if !regexp.MustCompile(`(?m)^merged +README\.md`).MatchString(out) || !regexp.MustCompile(`(?m)^CONFLICT +wordfreq/counter\.py`).MatchString(out) {
		t.Errorf("apply output:\n%s", out)
	}
	now := treeState(t, project)
	if now["wordfreq/counter.py"].Content != counter {
		t.Errorf("a conflicting file was overwritten:\n%s", now["wordfreq/counter.py"].Content)
	}
	if now["README.md"].Content != "Edited by you.\n"+want["README.md"].Content {
		t.Errorf("README.md after the merge:\n%s", now["README.md"].Content)
	}

	// The audit log tells the whole story.
	code, out, _ = airlockCLI(t, home, "logs", id, "--audit")
	if code != 0 {
		t.Fatalf("logs --audit: exit %d", code)
	}
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev sandbox.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		kinds = append(kinds, string(ev.Event))
	}
	// (The disk sync mode writes the baseline disk, "pushed", before boot.)
	wantKinds := "created excluded snapshot pushed limits booted egress-policy command exit collected cache-kept disk decisions applied undone decisions applied"
	if strings.Join(kinds, " ") != wantKinds {
		t.Errorf("audit events:\n %s\nwant\n %s", strings.Join(kinds, " "), wantKinds)
	}
	if !strings.Contains(out, `{"path":".env","reason":"secret"`) {
		t.Errorf("the audit does not record the secret left out:\n%s", out)
	}
	code, out, _ = airlockCLI(t, home, "logs", id)
	if code != 0 || !strings.Contains(out, "demo-agent: done") || !strings.Contains(out, "Added stop words") {
		t.Errorf("logs: exit %d\n%s", code, out)
	}

	// rm
	if code, _, errOut := airlockCLI(t, home, "rm", id); code != 0 {
		t.Fatalf("rm: exit %d: %s", code, errOut)
	}
	if _, out, _ := airlockCLI(t, home, "ls", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("ls after rm: %s", out)
	}
}

// patchBodies splits a git patch by file (paths without the prefixes)
// and keeps what both tools must agree on: mode lines, hunk ranges, and
// the lines of each hunk. git's index lines, function context after @@
// and the a/ b/ folder names are dropped. The lines of a hunk are sorted:
// where a change can be drawn several ways with as many lines (where a
// blank line goes), git and review may pick differently; that both
// patches turn the old tree into the new one is checked by git apply.
func patchBodies(t *testing.T, patch string, prefixes ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var cur string
	var hunk []string
	inHunk := false
	flush := func() {
		slices.Sort(hunk)
		out[cur] += strings.Join(hunk, "")
		hunk = nil
	}
	hunkHeader := regexp.MustCompile(`^@@ -\S+ \+\S+ @@`)
	for _, line := range strings.SplitAfter(patch, "\n") {
		switch {
		case strings.HasPrefix(line, "diff --git "):
			flush()
			inHunk = false
			f := strings.Fields(strings.TrimSpace(line))
			cur = ""
			for _, p := range prefixes {
				if strings.HasPrefix(f[3], p) {
					cur = strings.TrimPrefix(f[3], p)
					break
				}
			}
			if cur == "" {
				t.Fatalf("unexpected diff header %q", line)
			}
			out[cur] = ""
		case cur == "" || strings.HasPrefix(line, "index "), strings.HasPrefix(line, "# airlock:"):
		case strings.HasPrefix(line, "@@"):
			flush()
			inHunk = true
			out[cur] += hunkHeader.FindString(line) + "\n"
		case inHunk:
			hunk = append(hunk, line)
		case strings.HasPrefix(line, "--- "), strings.HasPrefix(line, "+++ "):
			for _, p := range prefixes {
				line = strings.Replace(line, " "+p, " ", 1)
			}
			out[cur] += line
		default:
			out[cur] += line
		}
	}
	flush()
	return out
}
