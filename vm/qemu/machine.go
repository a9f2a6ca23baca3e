package qemu

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mdlayher/vsock"
	"golang.org/x/sync/errgroup"

	"github.com/airlock-dev/airlock/internal/confine"
	"github.com/airlock-dev/airlock/vm"
)

// reasonNoQMP is the kill reason when QEMU runs but QMP makes no sense.
const reasonNoQMP = "QMP did not answer"

// machine is one QEMU child process.
type machine struct {
	name     string
	link     vm.LinkKind
	cid      uint32
	port     uint32
	qmpPath  string
	linkPath string // serial links only
	console  string
	con      *console // carries the guest console into the console log
	log      *slog.Logger
	cmd      *exec.Cmd
	out      *tailBuffer  // QEMU's stdout and stderr, last bytes
	fsds     []*virtiofsd // one per Spec.Shares, killed once QEMU is gone
	spec     vm.Spec      // what it was started with (defaults applied)
	host     Host
	args     []string // QEMU's command line, without -incoming
	// ram is the memfd holding the guest RAM (Memory.Shared), shared with
	// QEMU: Save copies it out. Closed once QEMU is gone.
	ram *os.File
	// incoming: QEMU waits for a saved state (Restore); the machine stays
	// Starting until the state is loaded and the guest runs.
	incoming bool

	ready chan struct{} // closed once QMP answered
	done  chan struct{} // closed once QEMU is gone and err is set
	err   error         // Wait's result

	mu         sync.Mutex
	state      vm.State
	qmp        *qmp
	exited     bool   // cmd.Wait returned: the pid may be reused
	killReason string // why we killed QEMU, if we did
	startErr   error  // why QMP never answered
	linkOpen   bool   // a serial DialLink connection is open
	// shutdownReason is the reason of QMP's SHUTDOWN event: guest-shutdown
	// for a power-off, guest-reset for a reboot that -no-reboot turned
	// into an exit (with panic=-1, a kernel panic), …
	shutdownReason string
	// confined says how this process and QEMU are confined, "" when
	// they were not asked to be (Config.ConfineProcess).
	confined string
}

var (
	_ vm.Machine     = (*machine)(nil)
	_ vm.Pauser      = (*machine)(nil)
	_ vm.Snapshotter = (*machine)(nil)
	_ vm.Emulator    = (*machine)(nil)
	_ net.Conn       = (*linkConn)(nil)
)

// start runs QEMU for spec on host and returns once QMP has answered.
// With incoming, QEMU waits for a saved state (-incoming defer) instead of
// booting. With rules, this process confines itself to them just before
// QEMU starts, so QEMU is confined too (Config.ConfineProcess).
func (b *Backend) start(ctx context.Context, prog string, spec vm.Spec, host Host, incoming bool, rules *confine.Rules) (*machine, error) {
	args, err := Args(spec, host)
	if err != nil {
		return nil, err
	}
	qargs := args[1:]
	if incoming {
		qargs = append(append([]string(nil), qargs...), incomingArgs...)
	}
	link, _ := ResolveLink(spec, host)
	m := &machine{
		name: spec.Name, link: link, cid: host.CID, port: spec.Link.Port,
		qmpPath: QMPSocket(spec), console: ConsoleLog(spec),
		log:   b.log.With("machine", spec.Name),
		out:   &tailBuffer{max: 16 << 10},
		ready: make(chan struct{}), done: make(chan struct{}),
		state: vm.StateStarting,
		spec:  spec, host: host, args: args, incoming: incoming,
	}

	// Bind the sockets ourselves and hand QEMU the listening fds: they
	// exist before QEMU runs, so nobody waits for QEMU to create them.
	var files []*os.File
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	files, sockets, err := m.listen(spec)
	if err != nil {
		return nil, err
	}
	con, conW, err := openConsole(m.console, m.log)
	if err != nil {
		removeAll(sockets)
		return nil, err
	}
	files = append(files, conW)
	started := false
	defer func() {
		if !started {
			con.abort()
		}
	}()
	if host.Memory.Shared {
		ram, err := newRAM(int64(cmp.Or(spec.MemoryMiB, vm.DefaultMemoryMiB)) << 20)
		if err != nil {
			removeAll(sockets)
			return nil, err
		}
		defer func() {
			if !started {
				ram.Close()
			}
		}()
		// fd ramFD; not in files, which are closed once QEMU has them.
		m.ram = ram
	}

	shareSockets, err := b.startShares(m, spec)
	if err != nil {
		removeAll(sockets)
		return nil, err
	}
	sockets = append(sockets, shareSockets...)

	cmd := exec.Command(prog, qargs...)
	cmd.ExtraFiles = files // fd 3 = qmpFD, fd 4 = linkFD, fd 5 = consoleFD
	if m.ram != nil {
		cmd.ExtraFiles = append(slices.Clone(files), m.ram) // fd 6 = ramFD
	}
	cmd.Stdout, cmd.Stderr = m.out, m.out
	cmd.Dir = spec.StateDir
	cmd.SysProcAttr = sysProcAttr()
	m.cmd = cmd
	// After virtiofsd (its own namespace sandbox needs mount, which
	// Landlock forbids) and before QEMU.
	if err := m.confine(rules); err != nil {
		m.killHelpers()
		removeAll(sockets)
		return nil, err
	}
	m.log.Debug("exec qemu", "args", strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		m.killHelpers()
		removeAll(sockets)
		return nil, fmt.Errorf("run %s: %w", prog, err)
	}
	// QEMU holds the listeners and the console pipe now; close ours so
	// that its exit closes them (and ends the console's copy).
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
	files = nil
	started, m.con = true, con
	go con.copy()

	go m.supervise(ctx, sockets)
	select {
	case <-m.ready:
		return m, nil
	case <-m.done:
		if m.err == nil { // powered off before we even connected
			return m, nil
		}
		return nil, m.err
	}
}

// listen binds the QMP socket and, for a serial link, the link's: QEMU's
// fds qmpFD and linkFD (nil for no link socket: QEMU gets it closed),
// and their paths.
func (m *machine) listen(spec vm.Spec) ([]*os.File, []string, error) {
	f, err := listenUnix(m.qmpPath)
	if err != nil {
		return nil, nil, err
	}
	if m.link != vm.LinkSerial {
		return []*os.File{f, nil}, []string{m.qmpPath}, nil
	}
	m.linkPath = LinkSocket(spec)
	lf, err := listenUnix(m.linkPath)
	if err != nil {
		f.Close()
		os.Remove(m.qmpPath)
		return nil, nil, err
	}
	return []*os.File{f, lf}, []string{m.qmpPath, m.linkPath}, nil
}

// startShares starts one virtiofsd per share of spec for m, each on a
// socket bound here before QEMU connects to it, and returns the sockets.
// On an error it stops those it started and removes their sockets.
func (b *Backend) startShares(m *machine, spec vm.Spec) ([]string, error) {
	if len(spec.Shares) == 0 {
		return nil, nil
	}
	fsProg, err := b.virtiofsdProgram()
	if err != nil {
		return nil, err
	}
	var sockets []string
	for i := range spec.Shares {
		d, err := startVirtiofsd(fsProg, spec, i)
		if err != nil {
			m.killHelpers()
			removeAll(sockets)
			return nil, err
		}
		m.fsds = append(m.fsds, d)
		sockets = append(sockets, ShareSocket(spec, i))
	}
	return sockets, nil
}

func removeAll(paths []string) {
	for _, p := range paths {
		os.Remove(p)
	}
}

// killHelpers kills every virtiofsd of the machine and waits for them.
func (m *machine) killHelpers() {
	for _, d := range m.fsds {
		d.kill()
	}
}

// listenUnix binds a listening unix socket at path, replacing a stale
// socket left by an earlier run, and returns it as a file for QEMU.
func listenUnix(path string) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("listen on %s: a file that is not a socket is in the way", path)
		}
		os.Remove(path)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false) // the socket outlives our copy of it
	defer l.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	f, err := l.File()
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return f, nil
}

// supervise runs the machine's goroutine family (context watcher, QMP)
// around waiting for QEMU, then records why it ended.
func (m *machine) supervise(ctx context.Context, sockets []string) {
	qctx, cancel := context.WithCancel(ctx)
	var g errgroup.Group
	exited := make(chan struct{})
	g.Go(func() error {
		select {
		case <-ctx.Done():
			m.kill("the context it was started with ended")
		case <-exited:
		}
		return nil
	})
	for _, d := range m.fsds {
		// A share whose daemon is gone hangs the guest's file operations:
		// end the machine instead, saying why.
		g.Go(func() error {
			select {
			case <-d.done:
				// After the guest powered off, QEMU closing the
				// socket is what ended virtiofsd.
				if m.State() < vm.StateStopping {
					m.kill(d.why())
				}
			case <-exited:
			}
			return nil
		})
	}
	g.Go(func() error {
		q, err := dialQMP(qctx, m.qmpPath, m.log)
		if err != nil {
			m.mu.Lock()
			m.startErr = err
			m.mu.Unlock()
			// QEMU closing the socket means it is exiting (a bad option,
			// a failed device): let it, and report its own words. Any
			// other failure leaves a QEMU we cannot control.
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) && qctx.Err() == nil {
				m.kill(reasonNoQMP)
			}
			return nil
		}
		q.events = m.event
		m.mu.Lock()
		m.qmp = q
		if m.state == vm.StateStarting && !m.incoming {
			m.state = vm.StateRunning
		}
		m.mu.Unlock()
		close(m.ready)
		q.readLoop()
		return nil
	})

	err := m.cmd.Wait()
	m.mu.Lock()
	m.exited = true
	q := m.qmp
	m.mu.Unlock()
	close(exited)
	cancel()
	m.killHelpers()
	if m.ram != nil {
		m.ram.Close()
	}
	// QEMU is gone, so QMP reads end at EOF once the last events (SHUTDOWN
	// and its reason) are read. The deadline covers a helper process that
	// inherited the socket and keeps it open.
	if q != nil {
		q.conn.SetReadDeadline(time.Now().Add(time.Second))
	}
	g.Wait()
	for _, s := range sockets {
		os.Remove(s)
	}
	// The console log is whole (its tail written) before anyone is told
	// the machine is gone and reads its last lines.
	m.con.finish()

	m.mu.Lock()
	defer m.mu.Unlock()
	m.state = vm.StateStopped
	m.qmp = nil
	if err == nil && m.killReason == "" && m.shutdownReason == "guest-reset" {
		m.err = fmt.Errorf("qemu %s: the guest reset itself (a kernel panic with panic=-1, a triple fault or a reboot) and -no-reboot ended the machine%s",
			m.name, formatConsole(m.console))
	}
	if err != nil {
		what := "exited"
		if m.killReason != "" {
			what = "was killed because " + m.killReason
		}
		if m.killReason == reasonNoQMP {
			what += " (" + m.startErr.Error() + ")"
		}
		m.err = fmt.Errorf("qemu %s %s: %w%s", m.name, what, err, formatTail(m.out.lines(10)))
	}
	m.log.Info("qemu gone", "err", m.err)
	close(m.done)
}

func formatTail(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return "\nlast qemu output:\n  | " + strings.Join(lines, "\n  | ")
}

func formatConsole(path string) string {
	s := "\nfull console log: " + path
	if lines := vm.TailConsole(path, 10); len(lines) > 0 {
		s = "\nlast console lines:\n  | " + strings.Join(lines, "\n  | ") + s
	}
	return s
}

// event follows QMP events.
func (m *machine) event(name string, data json.RawMessage) {
	switch name {
	case "SHUTDOWN", "POWERDOWN":
		var d struct {
			Reason string `json:"reason"`
		}
		json.Unmarshal(data, &d)
		m.mu.Lock()
		if m.state < vm.StateStopping {
			m.state = vm.StateStopping
		}
		if name == "SHUTDOWN" {
			m.shutdownReason = d.Reason
		}
		m.mu.Unlock()
	case "BLOCK_IO_ERROR":
		// QEMU's default for a drive's write errors (werror=enospc)
		// pauses the guest when the host's disk is full, so a run would
		// wait on it for ever: end the machine, saying why.
		var d struct {
			Device    string `json:"device"`
			NodeName  string `json:"node-name"`
			Operation string `json:"operation"`
			Action    string `json:"action"`
			NoSpace   bool   `json:"nospace"`
			Reason    string `json:"reason"`
		}
		json.Unmarshal(data, &d)
		if d.Action != "stop" {
			return
		}
		disk := cmp.Or(d.Device, d.NodeName)
		why := fmt.Sprintf("a %s of its disk %s failed on the host (%s), which paused it", d.Operation, disk, d.Reason)
		if d.NoSpace {
			why = fmt.Sprintf("the host's disk is full (a write to its disk %s found no space); free some space and run again", disk)
		}
		m.kill(why)
	}
}

// kill forces QEMU off, once, remembering why.
func (m *machine) kill(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.exited {
		return
	}
	if m.killReason == "" {
		m.killReason = reason
	}
	if m.state < vm.StateStopping {
		m.state = vm.StateStopping
	}
	if err := killProcess(m.cmd.Process); err != nil {
		m.log.Warn("kill qemu", "err", err)
	}
}

// Stop asks the guest to power off (ACPI power button, QMP
// system_powerdown) and waits; when ctx ends first it kills QEMU. It
// returns nil once QEMU is gone; Wait says how it went.
func (m *machine) Stop(ctx context.Context) error {
	select {
	case <-m.done:
		return nil
	default:
	}
	m.mu.Lock()
	if m.state < vm.StateStopping {
		m.state = vm.StateStopping
	}
	q := m.qmp
	m.mu.Unlock()
	if q != nil {
		if err := q.execute(ctx, "system_powerdown"); err != nil {
			m.log.Debug("graceful stop", "err", err)
		}
	}
	select {
	case <-m.done:
	case <-ctx.Done():
		m.kill("Stop's context ended before the guest powered off")
		<-m.done
	}
	return nil
}

// Pause stops the guest's vCPUs (QMP stop); memory and devices are kept.
func (m *machine) Pause(ctx context.Context) error {
	return m.setRunning(ctx, "stop", vm.StateRunning, vm.StatePaused)
}

// Resume runs a paused guest again (QMP cont).
func (m *machine) Resume(ctx context.Context) error {
	return m.setRunning(ctx, "cont", vm.StatePaused, vm.StateRunning)
}

// setRunning runs the QMP command that takes the machine from state from
// to state to.
func (m *machine) setRunning(ctx context.Context, command string, from, to vm.State) error {
	m.mu.Lock()
	q, st := m.qmp, m.state
	m.mu.Unlock()
	if st == vm.StateStopped || st == vm.StateStopping || q == nil {
		return fmt.Errorf("qemu %s: %s: %w", m.name, command, vm.ErrNotRunning)
	}
	if st == to {
		return nil
	}
	if st != from {
		return fmt.Errorf("qemu %s: %s: the machine is %s, not %s", m.name, command, st, from)
	}
	if err := q.execute(ctx, command); err != nil {
		return fmt.Errorf("qemu %s: %w", m.name, err)
	}
	m.mu.Lock()
	if m.state == from {
		m.state = to
	}
	m.mu.Unlock()
	return nil
}

// Wait returns nil after a clean guest power-off, else why QEMU ended.
func (m *machine) Wait() error {
	<-m.done
	return m.err
}

func (m *machine) State() vm.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state
}

func (m *machine) LinkKind() vm.LinkKind { return m.link }

// Emulated says whether the guest runs under TCG.
func (m *machine) Emulated() bool { return m.host.Accel == TCG }

func (m *machine) ConsoleLog() string { return m.console }

// DialLink connects to the guest link: a new vsock connection, or the one
// serial stream (vm.ErrLinkBusy while it is open).
func (m *machine) DialLink(ctx context.Context) (net.Conn, error) {
	m.mu.Lock()
	if m.state == vm.StateStopped {
		m.mu.Unlock()
		return nil, fmt.Errorf("dial guest link: %w", vm.ErrNotRunning)
	}
	if m.link == vm.LinkVsock {
		m.mu.Unlock()
		c, err := vsock.DialContext(ctx, m.cid, m.port, nil)
		if err != nil {
			return nil, fmt.Errorf("dial guest link: %w", err)
		}
		return c, nil
	}
	if m.linkOpen {
		m.mu.Unlock()
		return nil, fmt.Errorf("dial guest link: %w", vm.ErrLinkBusy)
	}
	m.linkOpen = true
	m.mu.Unlock()

	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", m.linkPath)
	if err != nil {
		m.releaseLink()
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w (%w)", err, vm.ErrNotRunning)
		}
		return nil, fmt.Errorf("dial guest link: %w", err)
	}
	return &linkConn{Conn: c, release: m.releaseLink}, nil
}

func (m *machine) releaseLink() {
	m.mu.Lock()
	m.linkOpen = false
	m.mu.Unlock()
}

// linkConn is the serial link; closing it frees the link for the next
// DialLink.
type linkConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *linkConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// lines is the last n non-empty lines written.
func (t *tailBuffer) lines(n int) []string {
	t.mu.Lock()
	s := string(t.buf)
	t.mu.Unlock()
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// confine confines this process, and so the QEMU it starts next, to
// rules (nil: not asked to).
func (m *machine) confine(rules *confine.Rules) error {
	if rules == nil {
		return nil
	}
	res, err := confine.Process(*rules)
	switch {
	case errors.Is(err, confine.ErrUnavailable):
		m.confined = "not confined: " + err.Error()
		m.log.Warn("qemu runs unconfined", "why", err)
	case err != nil:
		return fmt.Errorf("confine the supervisor and qemu: %w", err)
	default:
		m.confined = fmt.Sprintf("landlock ABI %d: the run directory, the image, the disks", res.ABI)
		m.log.Info("confined", "how", m.confined)
	}
	return nil
}

// Confined says how the process running this machine and its QEMU are
// confined (Config.ConfineProcess), "" when they were not asked to be.
func (m *machine) Confined() string { return m.confined }
