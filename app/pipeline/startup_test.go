package pipeline

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
	"github.com/airlock-dev/airlock/sync/transfer"
)

// startMachine is the fake machine with its /etc/hosts kept in memory
// and every command it ran recorded.
type startMachine struct {
	localMachine
	hosts bytes.Buffer
	mu    sync.Mutex // Run is called from the goroutine a start command runs on
	ran   []client.Command
}

func (m *startMachine) Exec(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error {
	if strings.Contains(script, "/etc/hosts") {
		if script != "cat >> /etc/hosts" {
			return errors.New("not the append the test expects: " + script)
		}
		_, err := io.Copy(&m.hosts, stdin)
		return err
	}
	return m.localMachine.Exec(ctx, script, stdin, stdout, stderr)
}

func (m *startMachine) Run(ctx context.Context, c client.Command) error {
	m.mu.Lock()
	m.ran = append(m.ran, c)
	m.mu.Unlock()
	return m.localMachine.Run(ctx, c)
}

// startTransfer is localTransfer on a startMachine.
type startTransfer struct{}

func (startTransfer) local(m Machine) Machine { return &m.(*startMachine).localMachine }

func (t startTransfer) Push(ctx context.Context, m Machine, dest string, base *manifest.Manifest, store *objects.Store, progress func(done, total int)) (transfer.Known, error) {
	return localTransfer{}.Push(ctx, t.local(m), dest, base, store, progress)
}

func (t startTransfer) Manifest(ctx context.Context, m Machine, dir string, k transfer.Known, l manifest.Limits, excludes []string) (transfer.Known, error) {
	return localTransfer{}.Manifest(ctx, t.local(m), dir, k, l, excludes)
}

func (t startTransfer) Pull(ctx context.Context, m Machine, dir string, changes []manifest.Change, store *objects.Store, l manifest.Limits, progress func(done, total int)) error {
	return localTransfer{}.Pull(ctx, t.local(m), dir, changes, store, l, progress)
}

func runStart(t *testing.T, s *sandbox.Store, project string, spec RunSpec) (*RunResult, *startMachine, string, error) {
	t.Helper()
	m := &startMachine{localMachine: localMachine{root: t.TempDir()}}
	var out bytes.Buffer
	spec.Project, spec.Image, spec.Arch, spec.Sync = project, "minimal", "amd64", sandbox.SyncCopy
	spec.Command = []string{"sh", "-c", "cat started.txt > seen.txt"}
	spec.Env = map[string]string{"PROJECT_ENV": "from-env"}
	res, err := runOnce(context.Background(), s, RunOptions{RunSpec: spec, Hooks: Hooks{
		Boot:     func(context.Context, Attach) (Machine, error) { return m, nil },
		Transfer: startTransfer{},
		Stdout:   &out, Stderr: &out,
	}})
	return res, m, out.String(), err
}

// TestStartCommands: the environment's start commands run before the
// command, in order, in /workspace with its environment and in the
// agent's jail, their output live and in the transcript and audited; a
// failing one stops the run, naming itself and its exit status, before
// the command runs.
func TestStartCommands(t *testing.T) {
	s := newStore(t)
	project := newProject(t)
	start := []sandbox.StartStep{
		{Origin: "postStartCommand", Shell: `echo "start $PROJECT_ENV" > started.txt; echo start-said-so`},
		{Origin: "postAttachCommand", Name: "b", Argv: []string{"sh", "-c", "echo attach >> started.txt"}},
	}
	res, m, out, err := runStart(t, s, project, RunSpec{Start: start})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.ran) != 3 {
		t.Fatalf("ran %d commands, want the two start commands and the command", len(m.ran))
	}
	for i, c := range m.ran {
		if c.Dir != sandbox.Workspace || !slices.Equal(c.Jail, JailWrite) || c.Env["PROJECT_ENV"] != "from-env" {
			t.Errorf("command %d: dir %q, jail %v, env %v: want /workspace, the agent's jail and the command's environment", i, c.Dir, c.Jail, c.Env)
		}
	}
	cs, err := res.Sandbox.Changeset(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f := cs.File("seen.txt"); f == nil || !strings.Contains(string(f.NewContent()), "start from-env\nattach\n") {
		t.Errorf("the command did not see what the start commands did, in order: %+v", f)
	}
	tr, _ := res.Sandbox.Transcript()
	for _, want := range []string{"airlock: postStartCommand: echo", "start-said-so", "airlock: postAttachCommand.b: sh -c echo attach"} {
		if !strings.Contains(string(tr), want) {
			t.Errorf("%q is not in the transcript:\n%s", want, tr)
		}
	}
	if !strings.Contains(out, "start-said-so") {
		t.Errorf("the start command's output is not live: %q", out)
	}
	events, _ := res.Sandbox.ReadAudit()
	n := 0
	for _, ev := range events {
		if ev.Event == sandbox.EventStart {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d start events, want 2", n)
	}
	if got := res.Meta.Start; len(got) != 2 || got[1].Label() != "postAttachCommand.b" {
		t.Errorf("sandbox.json keeps %+v, not the start commands a reply round runs again", got)
	}

	// A failing start command stops the run before the command.
	res, m, _, err = runStart(t, s, project, RunSpec{Start: []sandbox.StartStep{
		{Origin: "postStartCommand", Shell: "echo broken >&2; exit 7"},
		{Origin: "postAttachCommand", Shell: "touch never"},
	}})
	var se *StartError
	if !errors.As(err, &se) || se.ExitCode != 7 || se.Step.Origin != "postStartCommand" ||
		!strings.Contains(err.Error(), "postStartCommand (echo broken >&2; exit 7) exited with status 7") {
		t.Fatalf("a failing start command: %v", err)
	}
	if len(m.ran) != 1 {
		t.Errorf("ran %d commands after a failing start command, want none", len(m.ran)-1)
	}
	if res.Meta.Status != sandbox.StatusFailed || res.ExitCode != 7 {
		t.Errorf("status %s, exit %d", res.Meta.Status, res.ExitCode)
	}
	if tr, _ := res.Sandbox.Transcript(); !strings.Contains(string(tr), "broken") {
		t.Errorf("the failing command's output is not in the transcript: %q", tr)
	}
}

// TestStartCommandLeftRunning: a start command that has not ended within
// the grace (a dev server) goes on beside the command, which runs after
// it, and the audit says it was left running.
func TestStartCommandLeftRunning(t *testing.T) {
	s := newStore(t)
	project := newProject(t)
	res, m, out, err := runStart(t, s, project, RunSpec{StartGrace: 2 * time.Second, Start: []sandbox.StartStep{
		{Origin: "postAttachCommand", Shell: "echo server-up > started.txt; exec sleep 5"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.ran) != 2 {
		t.Fatalf("ran %d commands, want the start command and the command", len(m.ran))
	}
	if !strings.Contains(out, "postAttachCommand has not ended after 2s: it goes on beside the command") {
		t.Errorf("the run does not say the start command goes on: %q", out)
	}
	cs, err := res.Sandbox.Changeset(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f := cs.File("seen.txt"); f == nil || string(f.NewContent()) != "server-up\n" {
		t.Errorf("the command did not run beside the start command: %+v", f)
	}
	events, _ := res.Sandbox.ReadAudit()
	running := false
	for _, ev := range events {
		d, _ := ev.Data.(map[string]any)
		running = running || (ev.Event == sandbox.EventStart && d["running"] == true)
	}
	if !running || res.ExitCode != 0 {
		t.Errorf("the audit does not say the start command was left running (exit %d): %+v", res.ExitCode, events)
	}
}

// TestWriteHosts: the entries are appended to /etc/hosts as lines of
// one address and one name, the loopback names put into NO_PROXY; an
// entry that is not one (a sandbox.json edited, a bug) stops the run
// before anything is written.
func TestWriteHosts(t *testing.T) {
	s := newStore(t)
	project := newProject(t)
	hosts := []sandbox.HostEntry{{Name: "db", IP: "127.0.0.1"}, {Name: "far", IP: "10.0.0.5"}, {Name: "v6", IP: "::1"}}
	r := &runner{o: RunOptions{RunSpec: RunSpec{Hosts: hosts}}, netEnv: map[string]string{"NO_PROXY": "localhost,127.0.0.1", "no_proxy": "localhost,127.0.0.1"}}
	sb, err := s.Create(sandbox.Meta{Project: project})
	if err != nil {
		t.Fatal(err)
	}
	r.sb = sb
	m := &startMachine{localMachine: localMachine{root: t.TempDir()}}
	if err := r.writeHosts(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if got, want := m.hosts.String(), "\n# airlock: the environment's runArgs --add-host\n127.0.0.1 db\n10.0.0.5 far\n::1 v6\n"; got != want {
		t.Errorf("/etc/hosts got %q, want %q", got, want)
	}
	if got := r.netEnv["NO_PROXY"]; got != "localhost,127.0.0.1,db,v6" || r.netEnv["no_proxy"] != got {
		t.Errorf("NO_PROXY %q", got)
	}
	for _, bad := range []sandbox.HostEntry{
		{Name: "evil\n1.2.3.4 x", IP: "127.0.0.1"}, {Name: "x", IP: "1.2.3.4\n5.6.7.8 github.com"},
		{Name: "two names", IP: "1.2.3.4"}, {Name: "x", IP: "127.000.0.1"},
	} {
		m := &startMachine{localMachine: localMachine{root: t.TempDir()}}
		r.o.Hosts = []sandbox.HostEntry{{Name: "ok", IP: "10.0.0.1"}, bad}
		if err := r.writeHosts(context.Background(), m); err == nil || m.hosts.Len() != 0 {
			t.Errorf("%+v: err %v, wrote %q", bad, err, m.hosts.String())
		}
	}
	// In a run, before the command.
	res, m, _, err := runStart(t, s, project, RunSpec{Hosts: hosts[:1], Start: []sandbox.StartStep{{Origin: "postStartCommand", Shell: "echo > started.txt"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.hosts.String(), "127.0.0.1 db\n") || len(res.Meta.Hosts) != 1 {
		t.Errorf("/etc/hosts %q, sandbox.json %+v", m.hosts.String(), res.Meta.Hosts)
	}
}
