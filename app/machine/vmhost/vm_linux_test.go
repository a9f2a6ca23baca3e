package vmhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/guest"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/qemu"
)

// superviseEnv makes a re-executed test binary a supervisor of the run
// directory it names, as `airlock vmhost DIR` is: the same Supervise, on
// the QEMU backend.
const superviseEnv = "AIRLOCK_VMHOST_TEST_SUPERVISE"

func TestMain(m *testing.M) {
	if dir := os.Getenv(superviseEnv); dir != "" {
		os.Exit(superviseMain(dir))
	}
	os.Exit(m.Run())
}

func superviseMain(dir string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// Confined as `airlock vmhost` is (app/cli's newSupervisorBackend).
	hv := qemu.New(qemu.Config{CacheDir: filepath.Join(os.TempDir(), "airlock-vmhost-test-qemu"), ConfineProcess: true})
	if err := Supervise(ctx, dir, hv, 0, log); err != nil {
		log.Error("supervise", "err", err)
		return 1
	}
	return 0
}

func hypervisor() vm.Backend {
	return qemu.New(qemu.Config{CacheDir: filepath.Join(os.TempDir(), "airlock-vmhost-test-qemu")})
}

// testBackend starts supervisors as re-executions of this test binary.
func testBackend() *Backend {
	return &Backend{
		Hypervisor: hypervisor(),
		Command: func(dir string) *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), superviseEnv+"="+dir)
			return cmd
		},
	}
}

// testSpec is a minimal guest with its run directory under t.
func testSpec(t *testing.T) vm.Spec {
	t.Helper()
	testenv.SkipIfShort(t)
	img := testenv.Image(t, vm.Arch(runtime.GOARCH))
	dir := t.TempDir()
	return vm.Spec{
		Name: "airlock-vmhost-test", Arch: vm.Arch(runtime.GOARCH), Kernel: img.Kernel, Initrd: img.Initrd, Cmdline: img.Cmdline,
		Link: vm.Link{Port: guest.VsockPort}, StateDir: dir,
	}
}

// start starts spec through a real supervisor process; the VM is killed at
// the end of t if it still runs.
func start(t *testing.T, spec vm.Spec) vm.Machine {
	t.Helper()
	t0 := time.Now()
	m, err := testBackend().Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("supervisor ready in %s (link %s)", time.Since(t0).Round(time.Millisecond), m.LinkKind())
	t.Cleanup(func() {
		if c, ok := SupervisorOf(m); ok {
			c.Kill(context.Background())
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(spec.StateDir, LogFile))
			t.Logf("supervisor log:\n%s", log)
		}
	})
	return m
}

// runIn runs script in the guest and returns its output.
func runIn(t *testing.T, c *client.Client, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := c.Run(ctx, client.Command{Script: script, Stdout: &out, Stderr: &errOut}); err != nil {
		t.Fatalf("run %q: %v (%s)", script, err, errOut.String())
	}
	return strings.TrimSpace(out.String())
}

func connect(t *testing.T, dial client.DialFunc, cfg client.Config) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	c, err := client.Connect(ctx, dial, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("guest agent answered after %s (resume %v)", time.Since(t0).Round(time.Millisecond), cfg.Resume)
	return c
}

// TestSupervisorQEMU starts a VM through a real supervisor process, drops
// the client, reconnects as a restarted client would, pauses and resumes
// it, and stops it through the control socket.
func TestSupervisorQEMU(t *testing.T) {
	spec := testSpec(t)
	m := start(t, spec)
	id, err := client.NewIdentity(spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	c1 := connect(t, m.DialLink, client.Config{Identity: id})
	if got := runIn(t, c1, "echo one"); got != "one" {
		t.Errorf("first client ran echo one: %q", got)
	}
	hostKey := c1.Welcome().HostKey
	// The client goes away: its SSH connection, its machine handle.
	c1.Close()
	pid := mustState(t, m).PID

	// A new client finds the VM from its run directory alone.
	m2, err := Attach(t.Context(), spec.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := SupervisorOf(m2)
	st := mustState(t, m2)
	if st.PID != pid || st.State != vm.StateRunning {
		t.Fatalf("after reconnecting: %+v, want supervisor %d running", st, pid)
	}
	c2 := connect(t, m2.DialLink, client.Config{Identity: id, Resume: true})
	if c2.Welcome().HostKey != hostKey {
		t.Errorf("the guest's host key changed across clients")
	}
	// Two connections at once over the one link.
	c3 := connect(t, m2.DialLink, client.Config{Identity: id, Resume: true})
	if got := runIn(t, c2, "echo two"); got != "two" {
		t.Errorf("second client ran echo two: %q", got)
	}
	if got := runIn(t, c3, "echo three"); got != "three" {
		t.Errorf("third client ran echo three: %q", got)
	}
	c3.Close()

	// Pause and resume (QEMU: QMP stop and cont).
	if err := sc.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := mustState(t, m2); st.State != vm.StatePaused {
		t.Errorf("after pause: %s", st.State)
	}
	if err := sc.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := runIn(t, c2, "echo four"); got != "four" {
		t.Errorf("after resume: %q", got)
	}
	// Save (QEMU: migrate to a file): the machine runs on, the link too.
	state := filepath.Join(spec.StateDir, "state")
	if err := sc.Save(t.Context(), state); err != nil {
		t.Errorf("save: %v", err)
	} else if _, err := os.Stat(state); err != nil {
		t.Errorf("after save: %v", err)
	}
	if st := mustState(t, m2); st.State != vm.StateRunning || !slices.Contains(st.Can, OpSave) {
		t.Errorf("after save: %s, can %v; want running, can save", st.State, st.Can)
	}
	if got := runIn(t, c2, "echo five"); got != "five" {
		t.Errorf("after save: %q", got)
	}

	// The supervisor and its QEMU are confined to the run directory, the
	// image and the disks: a save sent past Client.Save, outside the run
	// directory, is refused by the kernel and writes nothing.
	st = mustState(t, m2)
	t.Logf("supervisor: %s", st.Confined)
	if !strings.HasPrefix(st.Confined, "landlock") {
		if os.Getenv("CI") != "" || !strings.Contains(st.Confined, "not available") {
			t.Errorf("supervisor confined = %q, want landlock", st.Confined)
		}
	} else {
		outside := filepath.Join(t.TempDir(), "state")
		if _, err := sc.do(t.Context(), Request{Op: OpSave, Path: outside}); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("a save outside the run directory: %v, want permission denied", err)
		}
		if entries, _ := os.ReadDir(filepath.Dir(outside)); len(entries) != 0 {
			t.Errorf("a confined supervisor wrote outside its run directory: %v", entries)
		}
		if got := runIn(t, c2, "echo six"); got != "six" {
			t.Errorf("after the refused save: %q", got)
		}
	}

	// Stop through the control socket: the guest powers off cleanly, the
	// supervisor removes its sockets and exits.
	exited := watchExit(t, pid)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err = sc.Stop(ctx, 30*time.Second)
	if err != nil || st.State != vm.StateStopped {
		t.Fatalf("Stop = %+v, %v", st, err)
	}
	if err := m.Wait(); err != nil {
		t.Errorf("the first handle's Wait after a clean stop: %v", err)
	}
	if err := m2.Wait(); err != nil {
		t.Errorf("Wait after a clean stop: %v", err)
	}
	p := PathsOf(spec.StateDir)
	for _, s := range []string{p.Control, p.Guest} {
		if _, err := os.Lstat(s); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after stop: %v", s, err)
		}
	}
	exited()
	c2.Close()
}

// TestSupervisorPowerOff: the guest powering itself off ends the supervisor.
func TestSupervisorPowerOff(t *testing.T) {
	spec := testSpec(t)
	m := start(t, spec)
	id, err := client.NewIdentity(spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	c := connect(t, m.DialLink, client.Config{Identity: id})
	exited := watchExit(t, mustState(t, m).PID)
	if err := c.PowerOff(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := m.Wait(); err != nil {
		t.Errorf("Wait after the guest powered off: %v", err)
	}
	exited()
	if _, err := Dial(t.Context(), spec.StateDir); !errors.Is(err, ErrNoSupervisor) {
		t.Errorf("Dial after power-off: %v", err)
	}
}

func mustState(t *testing.T, m vm.Machine) Status {
	t.Helper()
	c, ok := SupervisorOf(m)
	if !ok {
		t.Fatal("not a supervised machine")
	}
	st, err := c.State(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// watchExit returns a function that fails t unless process pid has exited
// (or exits within 30 s).
func watchExit(t *testing.T, pid int) func() {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return func() {}
	}
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	return func() {
		t.Helper()
		defer unix.Close(fd)
		// A pidfd becomes readable when its process exits.
		// A signal to the test process (the Go runtime's preemption, a
		// child's SIGCHLD) interrupts the poll: poll again for the rest.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		deadline := time.Now().Add(30 * time.Second)
		for {
			n, err := unix.Poll(fds, int(max(time.Until(deadline), 0).Milliseconds()))
			if errors.Is(err, unix.EINTR) && time.Now().Before(deadline) {
				continue
			}
			if err != nil || n != 1 {
				t.Errorf("process %d did not exit (poll: %d, %v)", pid, n, err)
			}
			return
		}
	}
}

// children lists the child processes of pid.
func children(t *testing.T, pid int) []int {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(s)
			out = append(out, n)
		}
	}
	return out
}

// TestSupervisorKilled: a supervisor killed with SIGKILL takes its QEMU
// with it, and the next client cleans up the sockets it left.
func TestSupervisorKilled(t *testing.T) {
	spec := testSpec(t)
	m := start(t, spec)
	pid := mustState(t, m).PID
	kids := children(t, pid)
	if len(kids) == 0 {
		t.Fatalf("supervisor %d has no QEMU child", pid)
	}
	// The supervisor itself too: QEMU's parent-death signal can come
	// when the thread that started it exits, before the last of the
	// supervisor's threads (and its listening sockets) are gone.
	exited := []func(){watchExit(t, pid)}
	for _, k := range kids {
		exited = append(exited, watchExit(t, k))
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, f := range exited {
		f()
	}
	if err := m.Wait(); err == nil || !strings.Contains(err.Error(), "died") {
		t.Errorf("Wait after the supervisor was killed: %v, want one that says it died", err)
	}
	p := PathsOf(spec.StateDir)
	if _, err := os.Lstat(p.Control); err != nil {
		t.Fatalf("a SIGKILLed supervisor should leave its socket behind: %v", err)
	}
	if _, err := Dial(t.Context(), spec.StateDir); !errors.Is(err, ErrNoSupervisor) {
		t.Errorf("Dial of a killed supervisor: %v, want ErrNoSupervisor", err)
	}
	for _, s := range []string{p.Control, p.Guest} {
		if _, err := os.Lstat(s); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale %s not removed: %v", s, err)
		}
	}
	// A new supervisor can start in the same run directory.
	m2 := start(t, spec)
	if _, err := m2.(*machine).c.Kill(t.Context()); err != nil {
		t.Error(err)
	}
}

// TestStartLatency logs how much going through a supervisor process adds
// to starting a machine (to QMP answering; the guest boot is the same).
func TestStartLatency(t *testing.T) {
	spec := testSpec(t)
	const n = 3
	var direct, supervised time.Duration
	for range n {
		t0 := time.Now()
		m, err := hypervisor().Start(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		direct += time.Since(t0)
		killNow(m)
		m.Wait()

		t0 = time.Now()
		sm, err := testBackend().Start(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		supervised += time.Since(t0)
		sm.(*machine).c.Kill(context.Background())
		sm.Wait()
	}
	t.Logf("start to running, mean of %d: direct %s, through a supervisor %s (+%s)", n,
		(direct / n).Round(time.Millisecond), (supervised / n).Round(time.Millisecond), ((supervised - direct) / n).Round(time.Millisecond))
}

// TestSupervisorRestoreQEMU saves a supervised machine with a guest agent,
// stops it and has a new supervisor restore it from the saved state, then
// resumes the guest agent at once. Over a serial link the restored guest
// still holds the saved machine's yamux session; the session magic the
// host opens its new session with makes the agent start a fresh one, so
// it answers without waiting to see the host hang up.
func TestSupervisorRestoreQEMU(t *testing.T) {
	spec := testSpec(t)
	// The agent logs its link sessions on the console, shown on failure.
	spec.Cmdline += " " + guest.DebugArg
	m := start(t, spec)
	id, err := client.NewIdentity(spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	c1 := connect(t, m.DialLink, client.Config{Identity: id})
	if got := runIn(t, c1, "echo one | tee /tmp/saved"); got != "one" {
		t.Errorf("before save: %q", got)
	}
	hostKey := c1.Welcome().HostKey
	c1.Close()
	sc, _ := SupervisorOf(m)
	state := filepath.Join(t.TempDir(), "state")
	if err := sc.Save(t.Context(), state); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := sc.Stop(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	m.Wait()

	// A new supervisor, in this process, restores the machine.
	sctx, stop := context.WithCancel(context.Background())
	ready := make(chan struct{})
	served := make(chan error, 1)
	t0 := time.Now()
	go func() {
		served <- Serve(sctx, Config{Dir: spec.StateDir, Backend: hypervisor(), Spec: spec, RestoreFrom: state,
			Ready: func(Status) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-served:
		t.Fatalf("restore: %v", err)
	}
	t.Logf("restored supervisor ready in %s", time.Since(t0).Round(time.Millisecond))
	m2, err := Attach(t.Context(), spec.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	if st := mustState(t, m2); st.State != vm.StateRunning {
		t.Errorf("restored: %s, want running", st.State)
	}
	// The restored guest answers a resume at once, with the same host key
	// and the state it was saved with.
	cctx, ccancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer ccancel()
	t1 := time.Now()
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(hostKey))
	if err != nil {
		t.Fatal(err)
	}
	c2, err := client.Connect(cctx, m2.DialLink, client.Config{Identity: id, Resume: true, HostKey: key})
	if err != nil {
		// What the restored guest's kernel and agent said, and the
		// restored supervisor's view of the machine.
		t.Fatalf("resume the restored guest: %v\nstate: %+v\nconsole:\n%s", err, m2.State(),
			strings.Join(vm.TailConsole(m2.ConsoleLog(), 40), "\n"))
	}
	t.Logf("restored guest answered after %s", time.Since(t1).Round(time.Millisecond))
	if got := runIn(t, c2, "cat /tmp/saved"); got != "one" {
		t.Errorf("after restore: %q", got)
	}
	if err := c2.PowerOff(t.Context()); err != nil {
		t.Errorf("power off: %v", err)
	}
	c2.Close()
	stop()
	if err := <-served; err != nil {
		t.Errorf("Serve after stopping the restored machine: %v", err)
	}
	if err := m2.Wait(); err != nil {
		t.Errorf("restored machine's Wait after a clean stop: %v", err)
	}
}
