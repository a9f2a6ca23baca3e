package vmhost

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/vm"
)

// Backend is a vm.Backend that starts each machine under its own
// supervisor process and returns a handle that talks to it. The machine
// belongs to the supervisor: it keeps running when the process that
// started it dies, and a later Attach (or Dial) reaches it again.
type Backend struct {
	// Hypervisor is this OS's backend. It names and validates here; the
	// supervisor runs its own copy.
	Hypervisor vm.Backend
	// Command returns the supervisor command for run directory dir,
	// usually os.Executable() with the hidden vmhost subcommand. Spawn
	// adds its stdio, session and ready pipe.
	Command func(dir string) *exec.Cmd
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

var (
	_ vm.Backend   = (*Backend)(nil)
	_ vm.Restorer  = (*Backend)(nil)
	_ vm.Describer = (*Backend)(nil)
)

func (b *Backend) Name() string { return b.Hypervisor.Name() }

func (b *Backend) Validate(ctx context.Context, spec vm.Spec) error {
	return b.Hypervisor.Validate(ctx, spec)
}

// Start writes spec into its StateDir (the run directory), spawns the
// supervisor there and returns once the machine runs. As vm.Backend
// promises, the machine is forced off when ctx ends; a process that dies
// without ending ctx leaves it running.
func (b *Backend) Start(ctx context.Context, spec vm.Spec) (vm.Machine, error) {
	return b.spawn(ctx, spec, "")
}

// Restore is Start for a machine restored from the state saved at path
// (vm.Restorer): the supervisor starts from it instead of booting.
func (b *Backend) Restore(ctx context.Context, spec vm.Spec, path string) (vm.Machine, error) {
	if _, ok := b.Hypervisor.(vm.Restorer); !ok {
		return nil, fmt.Errorf("restore %s VM: the backend cannot restore saved state: %w", b.Name(), vm.ErrNotSupported)
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return b.spawn(ctx, spec, path)
}

// Describe is the hypervisor's (vm.Describer), when it has one.
func (b *Backend) Describe(ctx context.Context, arch vm.Arch) (vm.HostReport, error) {
	d, ok := b.Hypervisor.(vm.Describer)
	if !ok {
		return vm.HostReport{}, fmt.Errorf("describe %s: %w", b.Name(), vm.ErrNotSupported)
	}
	return d.Describe(ctx, arch)
}

func (b *Backend) spawn(ctx context.Context, spec vm.Spec, restore string) (vm.Machine, error) {
	if b.Command == nil {
		return nil, errors.New("start supervisor: no command")
	}
	dir := spec.StateDir
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, SpecFile), data, 0o600); err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	if restore != "" {
		err = atomicfile.WriteFile(filepath.Join(dir, RestoreFile), []byte(restore), 0o600)
	} else if err = os.Remove(filepath.Join(dir, RestoreFile)); errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	c, st, err := Spawn(ctx, dir, b.Command(dir))
	if err != nil {
		return nil, err
	}
	// The wait request must not end with ctx: Wait reports the machine's end.
	m, err := newMachine(context.WithoutCancel(ctx), c, st)
	if err != nil {
		_, _ = c.Kill(context.WithoutCancel(ctx))
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() {
		_, _ = c.Kill(context.Background())
	})
	m.detach = func() { stop() }
	go func() {
		<-m.done
		stop()
	}()
	return m, nil
}

// Attach returns a handle on the machine of an already running supervisor.
// Unlike Start's, the machine does not end with ctx, which bounds only the
// attach.
func Attach(ctx context.Context, dir string) (vm.Machine, error) {
	c, err := Dial(ctx, dir)
	if err != nil {
		return nil, err
	}
	st, err := c.State(ctx)
	if err != nil {
		return nil, err
	}
	return newMachine(context.WithoutCancel(ctx), c, st)
}

// Spawn runs cmd as the supervisor of run directory dir (which holds its
// vmhost.json): detached in its own session, its output appended to
// dir/vmhost.log, and returns once the supervisor reports its machine
// running. When ctx ends first the supervisor is killed.
//
// A goroutine reaps the supervisor when it exits while this process lives.
func Spawn(ctx context.Context, dir string, cmd *exec.Cmd) (*Client, Status, error) {
	logPath := filepath.Join(dir, LogFile)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, Status{}, fmt.Errorf("start supervisor: %w", err)
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, Status{}, fmt.Errorf("start supervisor: %w", err)
	}
	defer r.Close()
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = append(cmd.ExtraFiles, w)
	cmd.Env = append(cmd.Environ(), fmt.Sprintf("%s=%d", ReadyFDEnv, 2+len(cmd.ExtraFiles)))
	// Its own session: no terminal signal reaches it, and it outlives us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return nil, Status{}, fmt.Errorf("start supervisor: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()

	stop := context.AfterFunc(ctx, func() { r.SetReadDeadline(time.Now()) })
	defer stop()
	line, rerr := bufio.NewReader(r).ReadBytes('\n')
	var st Status
	if rerr == nil {
		rerr = json.Unmarshal(line, &st)
	}
	if rerr != nil {
		if ctx.Err() != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			return nil, Status{}, fmt.Errorf("start supervisor: %w", ctx.Err())
		}
		// The supervisor closed the pipe without a word: it exited.
		<-exited
		return nil, Status{}, fmt.Errorf("the VM supervisor exited before its machine ran: %s", lastLine(logPath))
	}
	return &Client{paths: PathsOf(dir)}, st, nil
}

// lastLine is the last non-empty line of the file at path, or a pointer to
// the file when it has none.
func lastLine(path string) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return l + " (" + path + ")"
	}
	return "see " + path
}

// machine is a vm.Machine whose VM runs in a supervisor.
type machine struct {
	c    *Client
	st   Status // as of Start or Attach
	done chan struct{}
	err  error // Wait's result, once done is closed
	// detach, when set, unties the machine from the context it was
	// started with.
	detach func()
}

var (
	_ vm.Machine  = (*machine)(nil)
	_ vm.Emulator = (*machine)(nil)
)

// newMachine returns a handle on c's machine. It holds a wait request
// open, read by one goroutine, until the machine is gone.
func newMachine(ctx context.Context, c *Client, st Status) (*machine, error) {
	wait, err := c.startWait(ctx)
	if err != nil {
		return nil, err
	}
	m := &machine{c: c, st: st, done: make(chan struct{})}
	go func() {
		m.err = wait()
		close(m.done)
	}()
	return m, nil
}

func (m *machine) DialLink(ctx context.Context) (net.Conn, error) {
	select {
	case <-m.done:
		return nil, fmt.Errorf("dial guest link: %w", vm.ErrNotRunning)
	default:
	}
	return m.c.DialLink(ctx)
}

// Stop asks the guest to power off; when ctx ends first the machine is
// forced off. It returns once the machine is gone.
func (m *machine) Stop(ctx context.Context) error {
	select {
	case <-m.done:
		return nil
	default:
	}
	var err error
	if ctx.Err() != nil {
		_, err = m.c.Kill(context.WithoutCancel(ctx))
	} else {
		_, err = m.c.Stop(ctx, 0)
	}
	if err != nil {
		return err
	}
	<-m.done
	return nil
}

func (m *machine) Wait() error {
	<-m.done
	return m.err
}

// State asks the supervisor; a supervisor that is gone means stopped.
func (m *machine) State() vm.State {
	select {
	case <-m.done:
		return vm.StateStopped
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := m.c.State(ctx)
	if err != nil {
		return vm.StateStopped
	}
	return st.State
}

func (m *machine) LinkKind() vm.LinkKind { return m.st.Link }

func (m *machine) ConsoleLog() string { return m.st.Console }

// Emulated says whether the supervised machine's CPU is emulated.
func (m *machine) Emulated() bool { return m.st.Emulated }

// Detach unties m, started by a Backend, from the context it was started
// with: the machine then outlives that context, under its supervisor and
// its idle TTL, like one whose starter died. It reports whether m was
// such a machine.
func Detach(m vm.Machine) bool {
	sm, ok := m.(*machine)
	if !ok {
		return false
	}
	if sm.detach != nil {
		sm.detach()
	}
	return true
}

// SupervisorOf returns the client of the supervisor that runs m, when a
// Backend or Attach made it.
func SupervisorOf(m vm.Machine) (*Client, bool) {
	sm, ok := m.(*machine)
	if !ok {
		return nil, false
	}
	return sm.c, true
}
