package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/promote"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// gitEnv makes every git of the test (ours and Airlock's) hermetic: no
// user or system config, a fixed identity.
func gitEnv(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Skip(t, testenv.Git, "git not found")
	}
	cfg := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(cfg, []byte("[init]\n\tdefaultBranch = main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"GIT_CONFIG_GLOBAL": cfg, "GIT_CONFIG_NOSYSTEM": "1",
		"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com",
		"GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.com",
	} {
		t.Setenv(k, v)
	}
}

// git runs git in dir and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	return strings.TrimSpace(string(out))
}

// promoteSandbox is readySandbox in a git repository: the project holds
// old, committed (its commit returned); the guest's tree is made by
// guest. The sandbox keeps no baseline commit unless recorded is set.
func promoteSandbox(t *testing.T, home string, old map[string]string, guest func(dir string), recorded bool) (sb *sandbox.Sandbox, project, base string) {
	t.Helper()
	return promoteSandboxIn(t, home, "", old, guest, recorded)
}

// promoteSandboxIn is promoteSandbox with the project in the folder sub
// of its repository.
func promoteSandboxIn(t *testing.T, home, sub string, old map[string]string, guest func(dir string), recorded bool) (sb *sandbox.Sandbox, project, base string) {
	t.Helper()
	store, err := sandbox.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	project = filepath.Join(repo, sub)
	must(t, os.MkdirAll(project, 0o755))
	writeFiles(t, project, old)
	guestDir := t.TempDir()
	writeFiles(t, guestDir, old)
	guest(guestDir)
	manifests := walkTrees(t, store, project, guestDir)
	git(t, repo, "init", "-q")
	writeFiles(t, repo, map[string]string{"top.txt": "outside the project\n"})
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-q", "-m", "baseline")
	base = git(t, repo, "rev-parse", "HEAD")
	sb, err = store.Create(sandbox.Meta{Project: project, Command: []string{"agent", "--fix"}, Agent: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	writeManifests(t, sb, manifests)
	summary := "# Rate-limit the login endpoint\n\nThe login handler now counts attempts.\nAirlock-Verify: passed\n"
	if err := os.WriteFile(sb.Path(sandbox.SummaryFile), []byte(summary), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Update(func(m *sandbox.Meta) {
		m.Baseline, m.Guest, m.Status = sandbox.BaselineFile, sandbox.GuestFile, sandbox.StatusReady
		m.BaselineTime = store.Now().UTC()
		m.Verify = &sandbox.VerifyResult{Command: "go test ./...", ExitCode: 1}
		if recorded {
			m.BaselineCommit = base
		}
	}); err != nil {
		t.Fatal(err)
	}
	return sb, project, base
}

var promoteOld = map[string]string{
	"login.go":  "package login\n\n" + numbered("a", 30),
	"old.txt":   "going away\n",
	"notes.txt": "my notes\n",
	"run.sh":    "#!/bin/sh\necho hi\n",
}

func numbered(prefix string, n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(prefix + "line" + strings.Repeat("x", i%3) + "\n")
		prefix = string(rune('a' + i%26))
	}
	return b.String()
}

// promoteGuest changes login.go in two far-apart hunks, deletes old.txt,
// adds new.txt, a symbolic link and an executable, and makes run.sh
// executable.
func promoteGuest(t *testing.T) func(string) {
	return func(dir string) {
		lines := strings.SplitAfter(promoteOld["login.go"], "\n")
		lines[3] = "// counted attempts\n"
		lines[28] = "// rate limited\n"
		writeFiles(t, dir, map[string]string{"login.go": strings.Join(lines, ""), "new.txt": "brand new\n", "bin/tool": "#!/bin/sh\n"})
		must(t, os.Remove(filepath.Join(dir, "old.txt")))
		must(t, os.Symlink("new.txt", filepath.Join(dir, "link")))
		must(t, os.Chmod(filepath.Join(dir, "bin/tool"), 0o755))
		must(t, os.Chmod(filepath.Join(dir, "run.sh"), 0o755))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// approved are the arguments that approve part of promoteGuest: hunk 1
// of login.go (not hunk 2), the deletion, the link, the executables.
var approved = []string{"--hunks", "login.go:1", "old.txt", "link", "bin/tool", "run.sh"}

// treeOfPatch is the tree of base with the exported patch of the sandbox
// applied by git itself, in a fresh clone.
func treeOfPatch(t *testing.T, home, id, project, base string) string {
	t.Helper()
	code, patch, errOut := airlockCLI(t, home, append([]string{"export", id, "--format", "patch"}, approved...)...)
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	git(t, project, "clone", "-q", "--no-checkout", project, clone)
	git(t, clone, "checkout", "-q", "--detach", base)
	p := filepath.Join(t.TempDir(), "p.patch")
	must(t, os.WriteFile(p, []byte(patch), 0o644))
	git(t, clone, "apply", "--index", p)
	return git(t, clone, "write-tree")
}

func trailers(t *testing.T, project, commit string) string {
	return git(t, project, "log", "-1", "--format=%(trailers:only,unfold)", commit)
}

func TestApplyCommit(t *testing.T) {
	gitEnv(t)
	home := t.TempDir()
	sb, project, base := promoteSandbox(t, home, promoteOld, promoteGuest(t), true)
	// An edit of the user's, not staged: it stays out of the commit.
	must(t, os.WriteFile(filepath.Join(project, "notes.txt"), []byte("my notes, edited\n"), 0o644))

	code, out, errOut := airlockCLI(t, home, append([]string{"apply", sb.ID, "--commit"}, approved...)...)
	if code != 0 {
		t.Fatalf("apply --commit: exit %d: %s\n%s", code, errOut, out)
	}
	if !strings.Contains(out, "committed ") {
		t.Errorf("apply --commit does not say it committed:\n%s", out)
	}
	head := git(t, project, "rev-parse", "HEAD")
	if parent := git(t, project, "rev-parse", "HEAD^"); parent != base {
		t.Errorf("the commit's parent is %s, want the baseline's %s", parent, base)
	}
	if got, want := git(t, project, "rev-parse", "HEAD^{tree}"), treeOfPatch(t, home, sb.ID, project, base); got != want {
		t.Errorf("the commit's tree %s is not the baseline plus the approved patch (%s):\n%s", got, want, git(t, project, "show", "--stat", "HEAD"))
	}
	// git's own diff of the commit is the approved patch, but for the
	// abbreviated blob ids git adds and the comment lines Airlock adds.
	_, patch, _ := airlockCLI(t, home, append([]string{"export", sb.ID, "--format", "patch"}, approved...)...)
	if got, want := withoutNotes(git(t, project, "diff", "--binary", "HEAD^", "HEAD")), withoutNotes(patch); got != want {
		t.Errorf("git diff HEAD^ HEAD is not the approved patch:\n%s\nwant\n%s", got, want)
	}
	stat := git(t, project, "show", "--stat", "--format=", "HEAD")
	for _, p := range []string{"login.go", "old.txt", "link", "bin/tool", "run.sh"} {
		if !strings.Contains(stat, p) {
			t.Errorf("git show --stat does not list %s:\n%s", p, stat)
		}
	}
	for _, p := range []string{"new.txt", "notes.txt"} {
		if strings.Contains(stat, p) {
			t.Errorf("git show --stat lists %s, which was not approved:\n%s", p, stat)
		}
	}
	if diff := git(t, project, "diff", "HEAD^", "HEAD", "--", "login.go"); !strings.Contains(diff, "+// counted attempts") || strings.Contains(diff, "rate limited") {
		t.Errorf("the commit does not hold exactly hunk 1 of login.go:\n%s", diff)
	}
	if got := git(t, project, "log", "-1", "--format=%s"); got != "Rate-limit the login endpoint" {
		t.Errorf("subject %q, want the summary's first line", got)
	}
	tr := trailers(t, project, "HEAD")
	for _, want := range []string{"Airlock-Sandbox: " + sb.ID, "Airlock-Agent: claude", "Airlock-Verify: failed"} {
		if !strings.Contains(tr, want) {
			t.Errorf("trailers lack %q:\n%s", want, tr)
		}
	}
	if strings.Contains(tr, "Airlock-Verify: passed") {
		t.Errorf("the agent's summary forged a trailer:\n%s", tr)
	}
	requireReceiptTrailer(t, sb, tr)
	if st := git(t, project, "status", "--porcelain"); st != "M notes.txt" {
		t.Errorf("after the commit git status is %q, want only the user's edit", st)
	}
	m, err := sb.Meta()
	must(t, err)
	if m.Stage != sandbox.StageCommitted || m.Promotion == nil || m.Promotion.Commit != head {
		t.Errorf("stage %q, promotion %+v: want committed at %s", m.Stage, m.Promotion, head)
	}
	requireEvent(t, sb, sandbox.EventCommitted, head)
	// undo still works: the files go back, the commit stays.
	if code, _, errOut := airlockCLI(t, home, "undo", sb.ID); code != 0 {
		t.Fatalf("undo: %s", errOut)
	}
	if data, _ := os.ReadFile(filepath.Join(project, "login.go")); string(data) != promoteOld["login.go"] {
		t.Error("undo after --commit did not restore login.go")
	}
}

func requireEvent(t *testing.T, sb *sandbox.Sandbox, kind sandbox.EventKind, with string) {
	t.Helper()
	evs, err := sb.ReadAudit()
	must(t, err)
	for _, ev := range evs {
		if ev.Event == kind {
			b, _ := json.Marshal(ev.Data)
			if strings.Contains(string(b), with) {
				return
			}
		}
	}
	t.Errorf("no %q audit event with %q", kind, with)
}

func TestApplyCommitRefusesStagedChanges(t *testing.T) {
	gitEnv(t)
	home := t.TempDir()
	sb, project, _ := promoteSandbox(t, home, promoteOld, promoteGuest(t), true)
	must(t, os.WriteFile(filepath.Join(project, "notes.txt"), []byte("staged by me\n"), 0o644))
	git(t, project, "add", "notes.txt")
	code, out, errOut := airlockCLI(t, home, "apply", sb.ID, "--all", "--commit")
	if code != ExitError || !strings.Contains(errOut, "staged") || !strings.Contains(errOut, "notes.txt") {
		t.Fatalf("apply --commit with a staged change: exit %d, %q %q; want refused naming it", code, out, errOut)
	}
	if data, _ := os.ReadFile(filepath.Join(project, "login.go")); string(data) != promoteOld["login.go"] {
		t.Error("a refused apply --commit wrote login.go")
	}
	if n := git(t, project, "rev-list", "--count", "HEAD"); n != "1" {
		t.Errorf("%s commits, want the baseline alone", n)
	}
}

func TestPromoteRefusesNonGitProject(t *testing.T) {
	gitEnv(t)
	home := t.TempDir()
	sb, project := readySandbox(t, home, map[string]string{"a.txt": "a\n"}, map[string]string{"a.txt": "b\n"}, "", "", "")
	for _, args := range [][]string{{"apply", sb.ID, "--all", "--commit"}, {"apply", sb.ID, "--all", "--branch", "x"}, {"push", sb.ID, "--branch", "x"}} {
		code, _, errOut := airlockCLI(t, home, args...)
		if code != ExitError || !strings.Contains(errOut, "not a git repository") || !strings.Contains(errOut, "git init") {
			t.Errorf("%v in a project without git: exit %d, %q", args, code, errOut)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(project, "a.txt")); string(data) != "a\n" {
		t.Error("a refused commit wrote the project")
	}
}

// fileHash is the SHA-256 of a file.
func fileHash(t *testing.T, p string) string {
	data, err := os.ReadFile(p)
	must(t, err)
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

func TestApplyBranch(t *testing.T) {
	gitEnv(t)
	home := t.TempDir()
	sb, project, base := promoteSandbox(t, home, promoteOld, promoteGuest(t), true)
	// The user moves on after the run: a new commit, an unstaged edit and
	// a staged one. None of it may change, nor reach the branch.
	must(t, os.WriteFile(filepath.Join(project, "notes.txt"), []byte("later\n"), 0o644))
	git(t, project, "commit", "-q", "-am", "later work")
	must(t, os.WriteFile(filepath.Join(project, "notes.txt"), []byte("unstaged\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(project, "extra.txt"), []byte("staged\n"), 0o644))
	git(t, project, "add", "extra.txt")
	statusBefore := git(t, project, "status", "--porcelain")
	indexBefore := fileHash(t, filepath.Join(project, ".git", "index"))
	headBefore := git(t, project, "rev-parse", "HEAD")

	code, out, errOut := airlockCLI(t, home, append([]string{"apply", sb.ID, "--branch", "agent/rate-limit"}, approved...)...)
	if code != 0 {
		t.Fatalf("apply --branch: exit %d: %s\n%s", code, errOut, out)
	}
	if st := git(t, project, "status", "--porcelain"); st != statusBefore {
		t.Errorf("git status changed:\n%s\nwant\n%s", st, statusBefore)
	}
	if h := fileHash(t, filepath.Join(project, ".git", "index")); h != indexBefore {
		t.Error("the index file changed")
	}
	if h := git(t, project, "rev-parse", "HEAD"); h != headBefore {
		t.Error("HEAD moved")
	}
	if data, _ := os.ReadFile(filepath.Join(project, "login.go")); string(data) != promoteOld["login.go"] {
		t.Error("apply --branch wrote the working tree")
	}
	if _, err := os.Stat(sb.Path("applies")); err == nil {
		t.Error("apply --branch wrote an apply journal")
	}
	if strings.Contains(out, "not committed") {
		t.Errorf("apply --branch speaks of uncommitted changes the baseline did not have:\n%s", out)
	}
	if parent := git(t, project, "rev-parse", "agent/rate-limit^"); parent != base {
		t.Errorf("the branch's parent is %s, want the baseline's commit %s (not HEAD %s)", parent, base, headBefore)
	}
	if got, want := git(t, project, "rev-parse", "agent/rate-limit^{tree}"), treeOfPatch(t, home, sb.ID, project, base); got != want {
		t.Errorf("the branch's tree is not the baseline plus the approved patch:\n%s", git(t, project, "show", "--stat", "agent/rate-limit"))
	}
	modes := git(t, project, "ls-tree", "-r", "agent/rate-limit")
	for _, want := range []string{"120000 blob", "100755 blob"} {
		if !strings.Contains(modes, want) {
			t.Errorf("the branch lacks a %s entry:\n%s", want, modes)
		}
	}
	if strings.Contains(modes, "\told.txt") || strings.Contains(modes, "\tnew.txt") {
		t.Errorf("the branch holds old.txt or new.txt:\n%s", modes)
	}
	requireReceiptTrailer(t, sb, trailers(t, project, "agent/rate-limit"))
	if !strings.Contains(trailers(t, project, "agent/rate-limit"), "Airlock-Sandbox: "+sb.ID) {
		t.Error("the branch's commit has no Airlock-Sandbox trailer")
	}
	requireEvent(t, sb, sandbox.EventCommitted, "agent/rate-limit")

	// An existing branch is refused.
	code, _, errOut = airlockCLI(t, home, "apply", sb.ID, "--all", "--branch", "agent/rate-limit")
	if code != ExitError || !strings.Contains(errOut, "exists") {
		t.Errorf("apply --branch onto an existing branch: exit %d, %q", code, errOut)
	}
}

// TestApplyBranchOlderSandbox: a sandbox that did not record the
// baseline's commit branches from HEAD, and says so.
func TestApplyBranchOlderSandbox(t *testing.T) {
	gitEnv(t)
	home := t.TempDir()
	sb, project, base := promoteSandbox(t, home, promoteOld, promoteGuest(t), false)
	code, out, errOut := airlockCLI(t, home, "apply", sb.ID, "--all", "--branch", "b")
	if code != 0 || !strings.Contains(out, "did not record") {
		t.Fatalf("apply --branch: exit %d: %s\n%s", code, errOut, out)
	}
	if parent := git(t, project, "rev-parse", "b^"); parent != base {
		t.Errorf("parent %s, want HEAD %s", parent, base)
	}
}

func TestExportMboxAppliesWithGitAm(t *testing.T) {
	gitEnv(t)
	home := t.TempDir()
	sb, project, base := promoteSandbox(t, home, promoteOld, promoteGuest(t), true)
	if code, _, errOut := airlockCLI(t, home, append([]string{"apply", sb.ID, "--branch", "b"}, approved...)...); code != 0 {
		t.Fatal(errOut)
	}
	mbox := filepath.Join(t.TempDir(), "agent.mbox")
	code, out, errOut := airlockCLI(t, home, append([]string{"export", sb.ID, "--format", "mbox", "-o", mbox}, approved...)...)
	if code != 0 || !strings.Contains(out, "git am") {
		t.Fatalf("export: exit %d: %s\n%s", code, errOut, out)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	git(t, project, "clone", "-q", project, clone)
	git(t, clone, "checkout", "-q", "-b", "am", base)
	git(t, clone, "am", "-q", mbox)
	if got, want := git(t, clone, "rev-parse", "HEAD^{tree}"), git(t, project, "rev-parse", "b^{tree}"); got != want {
		t.Errorf("git am of the mbox gives tree %s, the branch has %s:\n%s", got, want, git(t, clone, "show", "--stat", "HEAD"))
	}
	if got := git(t, clone, "log", "-1", "--format=%s%n%an <%ae>"); got != "Rate-limit the login endpoint\nAda <ada@example.com>" {
		t.Errorf("the mail's commit: %q", got)
	}
	if !strings.Contains(trailers(t, clone, "HEAD"), "Airlock-Verify: failed") {
		t.Errorf("the mail's commit lacks the trailers:\n%s", git(t, clone, "log", "-1"))
	}
	requireEvent(t, sb, sandbox.EventExported, mbox)

	// --json names the output.
	code, out, _ = airlockCLI(t, home, "export", sb.ID, "--all", "--format", "patch", "--json")
	var v struct {
		Format, Patch string
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Format != "patch" || !strings.Contains(v.Patch, "diff --git") {
		t.Errorf("export --json: exit %d: %s", code, out)
	}
}

// fakeBin is a directory for PATH holding git and, when gh is set, a
// fake gh that records its arguments in args and prints a URL.
func fakeBin(t *testing.T, gh bool) (dir, args string) {
	t.Helper()
	dir = t.TempDir()
	real, err := exec.LookPath("git")
	must(t, err)
	must(t, os.Symlink(real, filepath.Join(dir, "git")))
	args = filepath.Join(t.TempDir(), "gh-args")
	if gh {
		script := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> " + args + "; done\necho 'Creating pull request'\necho https://github.com/ada/login/pull/7\n"
		must(t, os.WriteFile(filepath.Join(dir, "gh"), []byte(script), 0o755))
	}
	return dir, args
}

func TestPush(t *testing.T) {
	gitEnv(t)
	home := t.TempDir()
	sb, project, _ := promoteSandbox(t, home, promoteOld, promoteGuest(t), true)
	bare := filepath.Join(t.TempDir(), "origin.git")
	git(t, project, "init", "-q", "--bare", bare)
	git(t, project, "remote", "add", "origin", bare)

	if code, _, errOut := airlockCLI(t, home, "push", sb.ID); code != ExitError || !strings.Contains(errOut, "--branch NAME") {
		t.Errorf("push without a branch: exit %d, %q", code, errOut)
	}
	if code, _, errOut := airlockCLI(t, home, append([]string{"apply", sb.ID, "--branch", "agent/x"}, approved...)...); code != 0 {
		t.Fatal(errOut)
	}
	bin, argsFile := fakeBin(t, true)
	t.Setenv("PATH", bin)
	code, out, errOut := airlockCLI(t, home, "push", sb.ID)
	if code != 0 {
		t.Fatalf("push: exit %d: %s\n%s", code, errOut, out)
	}
	if got, want := git(t, bare, "rev-parse", "refs/heads/agent/x"), git(t, project, "rev-parse", "agent/x"); got != want {
		t.Errorf("the remote's branch is %s, want %s", got, want)
	}
	if !strings.Contains(out, "https://github.com/ada/login/pull/7") {
		t.Errorf("push does not print the pull request:\n%s", out)
	}
	data, err := os.ReadFile(argsFile)
	must(t, err)
	args := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(args) < 5 || !slices.Equal(args[:4], []string{"pr", "create", "--head=agent/x", "--title=Rate-limit the login endpoint"}) || !strings.HasPrefix(args[4], "--body=") {
		t.Errorf("gh called with %q", args)
	}
	if body := strings.Join(args[4:], "\n"); !strings.Contains(body, "counts attempts") || !strings.Contains(body, "Airlock-Sandbox: "+sb.ID) {
		t.Errorf("the pull request's body is %q, want the summary and trailers", body)
	}
	if body := strings.Join(args[4:], "\n"); !strings.Contains(body, "Airlock receipt") || !strings.Contains(body, `"audit_head"`) {
		t.Errorf("the pull request's body has no receipt: %q", body)
	}
	requireEvent(t, sb, sandbox.EventBranchPushed, "agent/x")

	// The stage shows in status and ls --json.
	code, out, _ = airlockCLI(t, home, "status", sb.ID, "--json")
	var st sandbox.Meta
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Stage != sandbox.StagePushed || st.Promotion.PullRequest == "" {
		t.Errorf("status --json: stage %q, promotion %+v (exit %d)", st.Stage, st.Promotion, code)
	}
	_, out, _ = airlockCLI(t, home, "ls", "--json")
	if !strings.Contains(out, `"stage": "pushed"`) {
		t.Errorf("ls --json lacks the stage:\n%s", out)
	}
	if code, out, _ := airlockCLI(t, home, "status", sb.ID); code != 0 || !strings.Contains(out, "stage     pushed") {
		t.Errorf("status:\n%s", out)
	}
}

// TestPushWithoutGh: without gh the branch is pushed and the way to open
// a pull request is printed.
func TestPushWithoutGh(t *testing.T) {
	gitEnv(t)
	home := t.TempDir()
	sb, project, _ := promoteSandbox(t, home, promoteOld, promoteGuest(t), true)
	bare := filepath.Join(t.TempDir(), "origin.git")
	git(t, project, "init", "-q", "--bare", bare)
	git(t, project, "remote", "add", "fork", bare)
	if code, _, errOut := airlockCLI(t, home, "apply", sb.ID, "--all", "--branch", "y"); code != 0 {
		t.Fatal(errOut)
	}
	bin, _ := fakeBin(t, false)
	t.Setenv("PATH", bin)
	code, out, errOut := airlockCLI(t, home, "push", sb.ID, "--remote", "fork")
	if code != 0 || !strings.Contains(out, "gh") || !strings.Contains(out, "pull request") {
		t.Fatalf("push: exit %d: %s\n%s", code, out, errOut)
	}
	git(t, bare, "rev-parse", "refs/heads/y")
	if code, _, errOut := airlockCLI(t, home, "push", sb.ID, "--remote", "nowhere"); code != ExitError || !strings.Contains(errOut, "no remote") {
		t.Errorf("push to a missing remote: exit %d, %q", code, errOut)
	}
}

// TestPromoteInSubdirectory: a project that is a folder of its
// repository commits its paths under that folder, a rename included.
func TestPromoteInSubdirectory(t *testing.T) {
	gitEnv(t)
	home := t.TempDir()
	old := map[string]string{"docs/a.md": "# a\nsame content long enough to be a rename\n", "main.go": "package main\n"}
	sb, project, base := promoteSandboxIn(t, home, "svc", old, func(dir string) {
		must(t, os.Rename(filepath.Join(dir, "docs/a.md"), filepath.Join(dir, "docs/b.md")))
		writeFiles(t, dir, map[string]string{"main.go": "package main\n\nfunc main() {}\n"})
	}, true)
	if code, out, errOut := airlockCLI(t, home, "apply", sb.ID, "--all", "--branch", "sub"); code != 0 {
		t.Fatalf("apply --branch: %s\n%s", errOut, out)
	}
	if got := git(t, project, "diff", "--name-status", "-M", base, "sub"); got != "M\tsvc/main.go\nR100\tsvc/docs/a.md\tsvc/docs/b.md" && got != "R100\tsvc/docs/a.md\tsvc/docs/b.md\nM\tsvc/main.go" {
		t.Errorf("the branch changes:\n%s", got)
	}
	if code, out, errOut := airlockCLI(t, home, "apply", sb.ID, "--all", "--commit"); code != 0 {
		t.Fatalf("apply --commit: %s\n%s", errOut, out)
	}
	if got, want := git(t, project, "rev-parse", "HEAD^{tree}"), git(t, project, "rev-parse", "sub^{tree}"); got != want {
		t.Errorf("--commit and --branch made different trees:\n%s", git(t, project, "show", "--stat", "HEAD"))
	}
}

// TestApplyBranchLeavesOutEscapingLinks: a link that leads out of the
// project, directly or through another link, is not put on a branch.
func TestApplyBranchLeavesOutEscapingLinks(t *testing.T) {
	gitEnv(t)
	home := t.TempDir()
	sb, project, _ := promoteSandbox(t, home, map[string]string{"a.txt": "a\n"}, func(dir string) {
		must(t, os.Symlink("../../etc/passwd", filepath.Join(dir, "evil")))
		must(t, os.Symlink(".", filepath.Join(dir, "d1")))
		must(t, os.Symlink("d1/d1/../..", filepath.Join(dir, "up")))
		must(t, os.Symlink("a.txt", filepath.Join(dir, "fine")))
	}, true)
	code, out, errOut := airlockCLI(t, home, "apply", sb.ID, "--all", "--branch", "links")
	if code != 0 {
		t.Fatalf("apply --branch: exit %d: %s\n%s", code, errOut, out)
	}
	files := git(t, project, "ls-tree", "-r", "--name-only", "links")
	for _, p := range []string{"evil", "up"} {
		if slices.Contains(strings.Split(files, "\n"), p) {
			t.Errorf("the branch holds %s, a link out of the project", p)
		}
		if !strings.Contains(out, "symbolic link "+p+" left out") {
			t.Errorf("apply --branch does not say %s was left out:\n%s", p, out)
		}
	}
	for _, p := range []string{"d1", "fine"} {
		if !slices.Contains(strings.Split(files, "\n"), p) {
			t.Errorf("the branch lacks %s:\n%s", p, files)
		}
	}
	// Nor into an export, which git am would make a commit of.
	code, patch, errOut := airlockCLI(t, home, "export", sb.ID, "--all", "--format", "mbox")
	if code != 0 || strings.Contains(patch, "b/evil") || strings.Contains(patch, "b/up") || !strings.Contains(patch, "b/fine") {
		t.Errorf("export: exit %d, %s\n%s", code, errOut, patch)
	}
	if !strings.Contains(errOut, "left out evil: symbolic link that points outside the project") {
		t.Errorf("export does not name the link it left out: %q", errOut)
	}
}

// TestApplyBranchNotesUncommittedBaseline: when a file the agent changed
// differed from the baseline's commit at snapshot time, the branch says
// it takes those changes along.
func TestApplyBranchNotesUncommittedBaseline(t *testing.T) {
	gitEnv(t)
	home := t.TempDir()
	sb, project, _ := promoteSandbox(t, home, promoteOld, promoteGuest(t), true)
	// The commit the baseline was "taken at" lacks the user's edit of login.go.
	must(t, os.WriteFile(filepath.Join(project, "login.go"), []byte("package login\n"), 0o644))
	git(t, project, "commit", "-q", "-am", "older login.go")
	head := git(t, project, "rev-parse", "HEAD")
	if _, err := sb.Update(func(m *sandbox.Meta) { m.BaselineCommit = head }); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := airlockCLI(t, home, "apply", sb.ID, "login.go", "--branch", "u", "--json")
	var v struct{ Commit promote.CommitResult }
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("apply --branch --json: exit %d: %s\n%s", code, errOut, out)
	}
	if len(v.Commit.Notes) != 1 || !strings.Contains(v.Commit.Notes[0], "login.go had changes not committed") {
		t.Errorf("notes %q", v.Commit.Notes)
	}
	if code, _, errOut := airlockCLI(t, home, "apply", sb.ID, "--all", "-m", "x"); code != ExitError || !strings.Contains(errOut, "--commit") {
		t.Errorf("-m without --commit: exit %d, %q", code, errOut)
	}
}

// TestApplyCommitWithYourEdits: a file the user edited since (merged)
// is committed whole and the commit says so; the deletion of a file git
// does not track commits nothing for it and does not fail.
func TestApplyCommitWithYourEdits(t *testing.T) {
	gitEnv(t)
	home := t.TempDir()
	old := map[string]string{"login.go": promoteOld["login.go"], "scratch.txt": "untracked\n"}
	sb, project, _ := promoteSandbox(t, home, old, func(dir string) {
		lines := strings.SplitAfter(old["login.go"], "\n")
		lines[28] = "// rate limited\n"
		writeFiles(t, dir, map[string]string{"login.go": strings.Join(lines, "")})
		must(t, os.Remove(filepath.Join(dir, "scratch.txt")))
	}, true)
	git(t, project, "rm", "-q", "--cached", "scratch.txt")
	git(t, project, "commit", "-q", "-m", "untrack scratch.txt")
	must(t, os.WriteFile(filepath.Join(project, "login.go"), []byte(strings.Replace(old["login.go"], "package login", "package login // mine", 1)), 0o644))
	code, out, errOut := airlockCLI(t, home, "apply", sb.ID, "--all", "--commit")
	if code != 0 {
		t.Fatalf("apply --commit: exit %d: %s\n%s", code, errOut, out)
	}
	if !strings.Contains(out, "merged    login.go") || !strings.Contains(out, "login.go had changes of yours not committed") {
		t.Errorf("apply --commit does not say the merged file takes the user's edits:\n%s", out)
	}
	diff := git(t, project, "show", "--format=", "HEAD")
	if !strings.Contains(diff, "+package login // mine") || !strings.Contains(diff, "+// rate limited") || strings.Contains(diff, "scratch.txt") {
		t.Errorf("the commit:\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(project, "scratch.txt")); err == nil {
		t.Error("scratch.txt was not deleted")
	}
	if st := git(t, project, "status", "--porcelain"); st != "" {
		t.Errorf("git status after the commit: %q", st)
	}
}

// withoutNotes is a patch without "index" lines and "#" comment lines.
func withoutNotes(patch string) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(patch), "\n") {
		if !strings.HasPrefix(l, "index ") && !strings.HasPrefix(l, "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// requireReceiptTrailer fails unless the trailers tr hold Airlock-Receipt
// with the hash of a line of the sandbox's audit log, which verifies.
func requireReceiptTrailer(t *testing.T, sb *sandbox.Sandbox, tr string) {
	t.Helper()
	_, after, ok := strings.Cut(tr, "Airlock-Receipt: ")
	head, _, _ := strings.Cut(after, "\n")
	res, err := sb.VerifyAudit()
	if !ok || err != nil {
		t.Fatalf("no Airlock-Receipt trailer (%v):\n%s", err, tr)
	}
	for seq := res.Seq; seq > 0; seq-- {
		if h, _ := res.HashAt(seq); h == strings.TrimSpace(head) {
			return
		}
	}
	t.Errorf("Airlock-Receipt: %s is no line of the sandbox's audit log", head)
}
