package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkg/sftp"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
	"github.com/airlock-dev/airlock/sync/transfer"
)

// localMachine is a fake Machine: "the guest" is a directory on the host,
// its /workspace and /tmp/airlock-script rewritten into it.
type localMachine struct {
	root     string
	shutdown bool
	// workspace, if set, is the host directory standing for /workspace
	// (a virtiofs share); else root/workspace.
	workspace string
}

func (l *localMachine) rewrite(s string) string {
	s = strings.ReplaceAll(s, scriptPath, filepath.Join(l.root, "script"))
	ws := l.workspace
	if ws == "" {
		ws = filepath.Join(l.root, "workspace")
	}
	return strings.ReplaceAll(s, sandbox.Workspace, ws)
}

func (l *localMachine) SFTP(...sftp.ClientOption) (*sftp.Client, error) {
	return nil, errors.New("no sftp in the fake")
}

func (l *localMachine) Exec(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error {
	return l.Run(ctx, client.Command{Script: script, Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

func (l *localMachine) Run(ctx context.Context, c client.Command) error {
	var cmd *exec.Cmd
	if c.Script != "" {
		cmd = exec.CommandContext(ctx, "sh", "-c", l.rewrite(c.Script))
	} else {
		args := make([]string, len(c.Args))
		for i, a := range c.Args {
			args[i] = l.rewrite(a)
		}
		cmd = exec.CommandContext(ctx, args[0], args[1:]...)
	}
	if c.Dir != "" {
		cmd.Dir = l.rewrite(c.Dir)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	if len(c.Env) > 0 {
		cmd.Env = os.Environ()
		for k, v := range c.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	err := cmd.Run()
	if ctx.Err() != nil {
		return ctx.Err() // as client.Run: the command was killed
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return &client.ExitError{Status: ee.ExitCode()}
	}
	return err
}

func (l *localMachine) Shutdown(context.Context) error { l.shutdown = true; return nil }

// localTransfer copies between the content store and the fake's
// directory.
type localTransfer struct{}

func (t localTransfer) Push(ctx context.Context, m Machine, dest string, base *manifest.Manifest, store *objects.Store, progress func(done, total int)) (transfer.Known, error) {
	return transfer.Known{}, t.push(ctx, m, dest, base, store, progress)
}

func (localTransfer) push(ctx context.Context, m Machine, dest string, base *manifest.Manifest, store *objects.Store, progress func(done, total int)) error {
	dir := m.(*localMachine).rewrite(dest)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, e := range base.Entries {
		p := filepath.Join(dir, e.Path)
		switch e.Type {
		case manifest.Dir:
			if err := os.Mkdir(p, e.Mode); err != nil {
				return err
			}
		case manifest.Symlink:
			if err := os.Symlink(e.Target, p); err != nil {
				return err
			}
		case manifest.File:
			data, err := sandbox.ReadObject(store, e.SHA256)
			if err != nil {
				return err
			}
			if err := os.WriteFile(p, data, e.Mode); err != nil {
				return err
			}
		}
		progress(i+1, len(base.Entries))
	}
	return nil
}

func (localTransfer) Manifest(ctx context.Context, m Machine, dir string, _ transfer.Known, _ manifest.Limits, excludes []string) (transfer.Known, error) {
	gm, _, err := manifest.Walk(ctx, m.(*localMachine).rewrite(dir), manifest.WalkOptions{Excludes: excludes})
	return transfer.Known{Manifest: gm}, err
}

func (localTransfer) Pull(ctx context.Context, m Machine, dir string, changes []manifest.Change, store *objects.Store, _ manifest.Limits, progress func(done, total int)) error {
	root := m.(*localMachine).rewrite(dir)
	for i, c := range changes {
		if _, _, err := store.PutFile(filepath.Join(root, c.Path)); err != nil {
			return err
		}
		progress(i+1, len(changes))
	}
	return nil
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const agentScript = `set -e
echo "agent: working"
echo "second line" >> a.txt
printf 'one\ntwo\nTHREE\n' > b.txt
echo new > c.txt
rm gone.txt
mkdir -p .airlock
echo "I changed a, b and c, and removed gone.txt." > .airlock/summary.md
echo "agent: done" >&2
test ! -e .env
exit "${1:-0}"
`

func runFake(t *testing.T, s *sandbox.Store, project string, args ...string) (*RunResult, *localMachine, []Progress, error) {
	t.Helper()
	m := &localMachine{root: t.TempDir()}
	var events []Progress
	var out bytes.Buffer
	res, err := runOnce(context.Background(), s, RunOptions{
		RunSpec: RunSpec{
			Project:    project,
			Script:     []byte(agentScript),
			ScriptName: "agent.sh",
			Command:    args,
			Image:      "minimal",
			Arch:       "amd64",
			Sync:       sandbox.SyncCopy,
		},
		Hooks: Hooks{
			Boot:     func(context.Context, Attach) (Machine, error) { return m, nil },
			Transfer: localTransfer{},
			Stdout:   &out,
			Stderr:   &out,
			Progress: func(p Progress) { events = append(events, p) },
		},
	})
	return res, m, events, err
}

func newProject(t *testing.T) string {
	project := t.TempDir()
	writeTree(t, project, map[string]string{
		"a.txt":    "first line\n",
		"b.txt":    "one\ntwo\nthree\n",
		"gone.txt": "bye\n",
		".env":     "TOKEN=secret\n",
	})
	return project
}

func TestRunPipeline(t *testing.T) {
	s := newStore(t)
	project := newProject(t)
	res, m, events, err := runFake(t, s, project, "3")
	if err != nil {
		t.Fatal(err)
	}
	if !m.shutdown {
		t.Error("the machine was not shut down")
	}
	if res.ExitCode != 3 || res.Meta.ExitCode == nil || *res.Meta.ExitCode != 3 {
		t.Errorf("exit code %d (meta %v), want 3: a failing command still has its changes collected", res.ExitCode, res.Meta.ExitCode)
	}
	if res.Meta.Status != sandbox.StatusReady {
		t.Errorf("status %q", res.Meta.Status)
	}
	want := sandbox.ChangeStats{Files: 4, Added: 1, Modified: 2, Deleted: 1, LinesAdded: 3, LinesRemoved: 2,
		Overview: "changed a.txt, b.txt, c.txt, gone.txt"}
	if res.Meta.Changes == nil || *res.Meta.Changes != want {
		t.Errorf("changes %+v, want %+v", res.Meta.Changes, want)
	}
	if !strings.Contains(res.Summary, "removed gone.txt") {
		t.Errorf("summary %q", res.Summary)
	}
	if got, _ := res.Sandbox.Summary(); got != res.Summary {
		t.Errorf("stored summary %q", got)
	}
	// The secret was reported, not pushed (the script checks it is absent).
	if len(res.Report.Excluded) != 1 || res.Report.Excluded[0].Path != ".env" || res.Report.Excluded[0].Reason != manifest.ReasonSecret {
		t.Errorf("excluded %+v", res.Report.Excluded)
	}
	// and named in sandbox.json, for the app.
	if !slices.Equal(res.Meta.Secrets, []string{".env"}) {
		t.Errorf("secrets recorded %q, want .env", res.Meta.Secrets)
	}
	// The transcript has stdout and stderr.
	tr, _ := os.ReadFile(res.Sandbox.Path(sandbox.TranscriptFile))
	if !bytes.Contains(tr, []byte("agent: working")) || !bytes.Contains(tr, []byte("agent: done")) {
		t.Errorf("transcript %q", tr)
	}
	// The changeset has no .airlock/ and works without the machine.
	cs, err := res.Sandbox.Changeset(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range cs.Files {
		paths = append(paths, string(f.Status)+" "+f.Path)
	}
	if got := strings.Join(paths, ", "); got != "modified a.txt, modified b.txt, added c.txt, deleted gone.txt" {
		t.Errorf("changeset: %s", got)
	}
	// The run's counts, from the collect's own diff, are the stored
	// manifests'.
	if stats := sandbox.StatsOf(cs); res.Meta.Changes == nil || stats != *res.Meta.Changes {
		t.Errorf("the run counted %+v, the stored manifests give %+v", res.Meta.Changes, stats)
	}
	// Progress: created, snapshot, excluded, boot, push, run, collect, stop, ready.
	seen := map[Step]bool{}
	for _, e := range events {
		seen[e.Step] = true
	}
	for _, st := range []Step{StepCreated, StepSnapshot, StepExcluded, StepBoot, StepPush, StepRun, StepCollect, StepStop, StepReady} {
		if !seen[st] {
			t.Errorf("no %s progress event", st)
		}
	}
	// The audit tells the story in order.
	evs, err := res.Sandbox.ReadAudit()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, string(e.Event))
	}
	if got := strings.Join(kinds, " "); got != "created excluded snapshot limits booted pushed command exit collected" {
		t.Errorf("audit events: %s", got)
	}
	if !strings.Contains(mustString(evs[1].Data), `"reason":"secret"`) {
		t.Errorf("excluded event %v", evs[1].Data)
	}
}

func mustString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestRunBootFails(t *testing.T) {
	s := newStore(t)
	res, err := runOnce(context.Background(), s, RunOptions{
		RunSpec: RunSpec{
			Project: newProject(t),
			Command: []string{"true"},
			Sync:    sandbox.SyncCopy,
		},
		Hooks: Hooks{
			Boot: func(context.Context, Attach) (Machine, error) { return nil, errors.New("no hypervisor") },
		},
	})
	if err == nil || !strings.Contains(err.Error(), "no hypervisor") {
		t.Fatalf("err %v", err)
	}
	if res == nil || res.Meta.Status != sandbox.StatusFailed || !strings.Contains(res.Meta.Error, "no hypervisor") {
		t.Fatalf("result %+v", res)
	}
	if res.Sandbox.Live() {
		t.Error("a failed run left the sandbox live")
	}
	evs, _ := res.Sandbox.ReadAudit()
	if last := evs[len(evs)-1]; last.Event != sandbox.EventFailed {
		t.Errorf("last audit event %s", last.Event)
	}
	if _, err := res.Sandbox.Changeset(context.Background()); !errors.Is(err, sandbox.ErrNotReady) {
		t.Errorf("changeset of a failed sandbox: %v, want ErrNotReady", err)
	}
}

// A run stopped through its context is recorded as stopped, and its
// prompt is kept.
func TestRunStopped(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	res, err := runOnce(ctx, s, RunOptions{
		RunSpec: RunSpec{
			Project: newProject(t),
			Command: []string{"true"},
			Prompt:  "fix it",
			Sync:    sandbox.SyncCopy,
		},
		Hooks: Hooks{
			Boot: func(context.Context, Attach) (Machine, error) {
				cancel()
				return nil, context.Canceled
			},
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if m := res.Meta; m.Status != sandbox.StatusFailed || !m.Stopped || m.StatusText() != "stopped" || m.Prompt != "fix it" {
		t.Errorf("meta status %q stopped %v prompt %q", m.Status, m.Stopped, m.Prompt)
	}
}

func TestSelection(t *testing.T) {
	s := newStore(t)
	res, _, _, err := runFake(t, s, newProject(t))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := res.Sandbox.Changeset(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		paths   []string
		hunks   []string
		want    string // JSON of the decisions
		wantErr string
	}{
		{name: "files", paths: []string{"a.txt", "./gone.txt"}, want: `{"files":{"a.txt":{"verdict":"approve"},"gone.txt":{"verdict":"approve"}}}`},
		{name: "hunks", hunks: []string{"b.txt:1"}, want: `{"files":{"b.txt":{"hunks":{"0":{"verdict":"approve"}}}}}`},
		{name: "unknown path", paths: []string{"nope.txt"}, wantErr: "nope.txt is not in the changes"},
		{name: "hunk out of range", hunks: []string{"b.txt:2"}, wantErr: "has 1 hunks, not 2"},
		{name: "hunks of an added file", hunks: []string{"c.txt:1"}, wantErr: "taken or left whole"},
		{name: "bad spec", hunks: []string{"b.txt"}, wantErr: "want PATH:N"},
		{name: "hunk zero", hunks: []string{"b.txt:0"}, wantErr: "start at 1"},
		{name: "nothing", wantErr: "nothing selected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel := sandbox.Selection{Paths: tt.paths}
			var err error
			for _, h := range tt.hunks {
				if err = sel.ParseHunks(h); err != nil {
					break
				}
			}
			var d review.Decisions
			if err == nil {
				d, err = sel.Decisions(cs)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := mustString(d); got != tt.want {
				t.Errorf("decisions %s, want %s", got, tt.want)
			}
		})
	}
}

func TestApplyUndoRecover(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	project := newProject(t)
	res, _, _, err := runFake(t, s, project)
	if err != nil {
		t.Fatal(err)
	}
	sb := res.Sandbox
	cs, _ := sb.Changeset(ctx)
	d, err := sandbox.Selection{Paths: []string{"a.txt", "c.txt", "gone.txt"}}.Decisions(cs)
	if err != nil {
		t.Fatal(err)
	}
	ar, err := sb.Apply(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(ar.Applied) != 3 || len(ar.Conflicts) != 0 {
		t.Fatalf("apply: %+v", ar.Result)
	}
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(project, p))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	if read("a.txt") != "first line\nsecond line\n" || read("c.txt") != "new\n" || read("b.txt") != "one\ntwo\nthree\n" {
		t.Errorf("project after apply: a=%q b=%q c=%q", read("a.txt"), read("b.txt"), read("c.txt"))
	}
	if _, err := os.Stat(filepath.Join(project, "gone.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gone.txt still there: %v", err)
	}
	if m, _ := sb.Meta(); m.Status != sandbox.StatusApplied {
		t.Errorf("status after apply %q", m.Status)
	}
	// The audit has the hashes before and after.
	evs, _ := sb.ReadAudit()
	last := mustString(evs[len(evs)-1].Data)
	if evs[len(evs)-1].Event != sandbox.EventApplied || !strings.Contains(last, `"before_sha256"`) || !strings.Contains(last, `"after_sha256"`) {
		t.Errorf("applied event: %s", last)
	}

	// An apply cut short is finished by the next command: fake one by
	// marking the journal pending again.
	jdir := ar.JournalDir
	jf := filepath.Join(jdir, "journal.json")
	raw, _ := os.ReadFile(jf)
	os.WriteFile(jf, bytes.Replace(raw, []byte(`"state": "applied"`), []byte(`"state": "pending"`), 1), 0o600)
	if j, _ := review.ReadJournal(jdir); j.State != review.Pending {
		t.Fatalf("could not fake an interrupted apply: %s", raw)
	}
	rec, err := sb.Recover(ctx)
	if err != nil || len(rec) != 1 {
		t.Fatalf("Recover = %v, %v", rec, err)
	}
	if j, _ := review.ReadJournal(jdir); j.State != review.Applied {
		t.Errorf("journal after recover: %s", j.State)
	}

	// Undo restores every byte.
	if _, err := sb.Undo(ctx); err != nil {
		t.Fatal(err)
	}
	if read("a.txt") != "first line\n" || read("gone.txt") != "bye\n" || read(".env") != "TOKEN=secret\n" {
		t.Errorf("project after undo: a=%q gone=%q", read("a.txt"), read("gone.txt"))
	}
	if _, err := os.Stat(filepath.Join(project, "c.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("c.txt still there after undo: %v", err)
	}
	if m, _ := sb.Meta(); m.Status != sandbox.StatusReady {
		t.Errorf("status after undo %q", m.Status)
	}
	if _, err := sb.Undo(ctx); !errors.Is(err, sandbox.ErrNothingToUndo) {
		t.Errorf("second undo: %v", err)
	}

	// A file the user changed meanwhile: a clean merge, or a conflict
	// that leaves it untouched.
	os.WriteFile(filepath.Join(project, "a.txt"), []byte("zeroth line\nfirst line\n"), 0o644)
	os.WriteFile(filepath.Join(project, "b.txt"), []byte("one\ntwo\nthree!\n"), 0o644)
	ar, err = sb.Apply(ctx, review.ApproveAll(cs))
	if err != nil {
		t.Fatal(err)
	}
	if len(ar.Merged) != 1 || ar.Merged[0].Path != "a.txt" || len(ar.Conflicts) != 1 || ar.Conflicts[0].Path != "b.txt" {
		t.Errorf("apply over user edits: %+v", ar.Result)
	}
	if read("a.txt") != "zeroth line\nfirst line\nsecond line\n" || read("b.txt") != "one\ntwo\nthree!\n" {
		t.Errorf("after merge: a=%q b=%q", read("a.txt"), read("b.txt"))
	}
}

func TestRunTimeout(t *testing.T) {
	s := newStore(t)
	m := &localMachine{root: t.TempDir()}
	res, err := runOnce(context.Background(), s, RunOptions{
		RunSpec: RunSpec{
			Project: newProject(t),
			Command: []string{"sh", "-c", "echo more >> a.txt; exec sleep 30"},
			Timeout: 300 * time.Millisecond,
			Sync:    sandbox.SyncCopy,
		},
		Hooks: Hooks{
			Boot:     func(context.Context, Attach) (Machine, error) { return m, nil },
			Transfer: localTransfer{},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != sandbox.TimeoutExitCode || res.Meta.Status != sandbox.StatusReady || res.Meta.Changes.Modified != 1 {
		t.Errorf("after a timeout: exit %d, status %s, changes %+v; want %d, ready, the change made before it", res.ExitCode, res.Meta.Status, res.Meta.Changes, sandbox.TimeoutExitCode)
	}
	tr, _ := res.Sandbox.Transcript()
	if !bytes.Contains(tr, []byte("was killed")) {
		t.Errorf("transcript does not say the command was killed: %q", tr)
	}
}

// hungMachine is a guest that ignores the end of a command's context: its
// Run returns only once the host kills the machine.
type hungMachine struct {
	*localMachine
	killed chan struct{}
	once   sync.Once
}

func (h *hungMachine) Run(ctx context.Context, c client.Command) error {
	<-h.killed
	return errors.New("connection lost")
}

func (h *hungMachine) Kill() { h.once.Do(func() { close(h.killed) }) }

func TestRunHardTimeoutStopsTheVM(t *testing.T) {
	s := newStore(t)
	m := &hungMachine{localMachine: &localMachine{root: t.TempDir()}, killed: make(chan struct{})}
	res, err := runOnce(context.Background(), s, RunOptions{
		RunSpec: RunSpec{
			Project:   newProject(t),
			Command:   []string{"sleep", "30"},
			Timeout:   100 * time.Millisecond,
			KillGrace: 100 * time.Millisecond,
			Sync:      sandbox.SyncCopy,
		},
		Hooks: Hooks{
			Boot:     func(context.Context, Attach) (Machine, error) { return m, nil },
			Transfer: hungTransfer{m},
		},
	})
	if err == nil || !strings.Contains(err.Error(), "the host stopped the VM") {
		t.Fatalf("run of a hung guest: %v; want the host to have stopped the VM", err)
	}
	select {
	case <-m.killed:
	default:
		t.Error("the machine was not killed")
	}
	evs, _ := res.Sandbox.ReadAudit()
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, string(e.Event))
	}
	if got := strings.Join(kinds, " "); !strings.Contains(got, "command stopped exit failed") {
		t.Errorf("audit events: %s; want command, stopped, exit, failed", got)
	}
}

// hungTransfer fails to collect from a killed machine.
type hungTransfer struct{ m *hungMachine }

func (h hungTransfer) Push(ctx context.Context, m Machine, dest string, base *manifest.Manifest, store *objects.Store, progress func(done, total int)) (transfer.Known, error) {
	return localTransfer{}.Push(ctx, h.m.localMachine, dest, base, store, progress)
}

func (h hungTransfer) Manifest(context.Context, Machine, string, transfer.Known, manifest.Limits, []string) (transfer.Known, error) {
	return transfer.Known{}, errors.New("machine is not running")
}

func (h hungTransfer) Pull(context.Context, Machine, string, []manifest.Change, *objects.Store, manifest.Limits, func(done, total int)) error {
	return errors.New("machine is not running")
}

func newStore(t *testing.T) *sandbox.Store {
	t.Helper()
	s, err := sandbox.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOneLiveWriterForBoth: a command whose stdout and stderr go to one
// writer (the app's terminal, a buffer) writes to it from both streams'
// copiers at once; the pipeline locks it (the race detector checks).
func TestOneLiveWriterForBoth(t *testing.T) {
	var buf bytes.Buffer
	out, errw := liveWriters(&buf, &buf)
	if out != errw {
		t.Fatal("one writer given for both streams was not shared locked")
	}
	var wg sync.WaitGroup
	for _, w := range []io.Writer{out, errw} {
		wg.Go(func() {
			for range 1000 {
				_, _ = w.Write([]byte("line\n"))
			}
		})
	}
	wg.Wait()
	if buf.Len() != 2*1000*5 {
		t.Errorf("%d bytes written, want %d", buf.Len(), 2*1000*5)
	}
	var a, b bytes.Buffer
	if o, e := liveWriters(&a, &b); o != io.Writer(&a) || e != io.Writer(&b) {
		t.Error("two writers were wrapped")
	}
}

// The jail's count of denials is the guest's word: only names of a
// syscall's shape and sane counts are taken.
func TestParseDenials(t *testing.T) {
	got, err := parseDenials([]byte(`{"socket":2,"syscall 999":1}` + "\n"))
	if err != nil || got["socket"] != 2 || got["syscall 999"] != 1 {
		t.Errorf("parseDenials = %v, %v", got, err)
	}
	for _, bad := range []string{`{"\u001b[2J":1}`, `{"socket":0}`, `{"socket":-1}`, `{"socket":2000000000}`, `[1]`, `{"a b":1}`, `nope`} {
		if _, err := parseDenials([]byte(bad)); err == nil {
			t.Errorf("parseDenials(%s): no error", bad)
		}
	}
	many := "{"
	for i := range maxDenialNames + 1 {
		if i > 0 {
			many += ","
		}
		many += fmt.Sprintf(`"s%d":1`, i)
	}
	if _, err := parseDenials([]byte(many + "}")); err == nil {
		t.Error("parseDenials of 65 names: no error")
	}
}
