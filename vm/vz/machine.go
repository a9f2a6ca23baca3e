//go:build darwin && cgo

package vz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/Code-Hex/vz/v3"

	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/vz/vzconfig"
)

// Timeouts of the machine's life.
const (
	// startTimeout bounds the wait for vz to report the VM running after
	// Start returned.
	startTimeout = 10 * time.Second
	// dialBackoffMax caps the delay between vsock connection attempts
	// while the guest agent is not listening yet.
	dialBackoffMax = 5 * time.Second
	dialBackoffMin = 100 * time.Millisecond
	// connectTimeout bounds one vsock connection attempt: the framework's
	// documentation allows Connect to do nothing at all while nothing
	// listens on the port.
	connectTimeout = 3 * time.Second
)

// machine is one Virtualization.framework VM in this process.
type machine struct {
	name    string
	spec    vzconfig.Config
	console string
	log     *slog.Logger
	backend *Backend

	// vm, built and socket are kept referenced for the machine's life:
	// the framework's objects die with their Go finalizers.
	vm     *vz.VirtualMachine
	built  *built
	socket *vz.VirtioSocketDevice

	done chan struct{} // closed once the VM is gone and err is set
	err  error         // Wait's result

	mu         sync.Mutex
	state      vm.State
	changed    chan struct{} // closed and replaced on every vz state change
	booted     bool          // the VM left the Stopped state it was created in
	killReason string        // why we forced the VM off, if we did
}

var (
	_ vm.Machine = (*machine)(nil)
	_ vm.Pauser  = (*machine)(nil)
)

func newMachine(name string, c vzconfig.Config, b *built, v *vz.VirtualMachine, log *slog.Logger, backend *Backend) *machine {
	return &machine{
		name: name, spec: c, console: c.ConsoleLog, log: log, backend: backend,
		vm: v, built: b,
		done:    make(chan struct{}),
		state:   vm.StateStarting,
		changed: make(chan struct{}),
	}
}

// start starts the goroutines that follow the VM, runs boot (what brings
// the VM up: Start, or a restore; what names it in errors) and waits until
// vz reports it running.
func (m *machine) start(ctx context.Context, what string, boot func() error) error {
	devs := m.vm.SocketDevices()
	if len(devs) != 1 {
		return fmt.Errorf("vz %s: the VM has %d vsock devices, want 1", m.name, len(devs))
	}
	m.socket = devs[0]

	// The one reader of StateChangedNotify: the channel is shared, and a
	// second reader would steal events. Everything else waits on m.changed.
	go m.follow(m.vm.StateChangedNotify())
	go func() {
		select {
		case <-ctx.Done():
			m.forceStop("the context it was started with ended")
		case <-m.done:
		}
	}()

	if err := boot(); err != nil {
		err = fmt.Errorf("vz %s: %s: %w%s", m.name, what, err, formatConsole(m.console))
		m.finish(err)
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	err := m.waitState(wctx, func(s vm.State) bool { return s != vm.StateStarting })
	if err != nil {
		m.forceStop("it did not reach the running state within " + startTimeout.String())
		<-m.done
		return fmt.Errorf("vz %s: %s: %w", m.name, what, err)
	}
	if s := m.State(); s == vm.StateStopped {
		if werr := m.Wait(); werr != nil {
			return werr
		}
	}
	return nil
}

// follow reads the VM's state changes until it is gone.
func (m *machine) follow(ch <-chan vz.VirtualMachineState) {
	for {
		select {
		case s := <-ch:
			if m.observe(s) {
				return
			}
		case <-m.done:
			return
		}
	}
}

// observe records the vz state s and reports whether the VM is gone.
func (m *machine) observe(s vz.VirtualMachineState) bool {
	m.log.Debug("vz state", "state", s.String())
	m.mu.Lock()
	m.notifyLocked()
	var next vm.State
	switch s {
	case vz.VirtualMachineStateStarting, vz.VirtualMachineStateRestoring:
		next = vm.StateStarting
	case vz.VirtualMachineStateRunning, vz.VirtualMachineStatePausing:
		next = vm.StateRunning
	case vz.VirtualMachineStatePaused, vz.VirtualMachineStateResuming, vz.VirtualMachineStateSaving:
		next = vm.StatePaused
	case vz.VirtualMachineStateStopping:
		next = vm.StateStopping
	case vz.VirtualMachineStateStopped, vz.VirtualMachineStateError:
		if !m.booted && s == vz.VirtualMachineStateStopped {
			m.mu.Unlock()
			return false // the state it was created in
		}
		reason := m.killReason
		m.mu.Unlock()
		var err error
		switch {
		case s == vz.VirtualMachineStateError:
			err = fmt.Errorf("vz %s: the virtual machine failed (Virtualization.framework reports the error state)%s", m.name, formatConsole(m.console))
		case reason != "":
			err = fmt.Errorf("vz %s was stopped because %s", m.name, reason)
		}
		m.finish(err)
		return true
	default:
		m.mu.Unlock()
		return false
	}
	m.booted = true
	// A stop in progress stays "stopping" until the VM is gone.
	if m.state != vm.StateStopping {
		m.setStateLocked(next)
	}
	m.mu.Unlock()
	return false
}

// setStateLocked changes the state and wakes every waiter. m.mu is held.
func (m *machine) setStateLocked(s vm.State) {
	if m.state != s {
		m.state = s
		m.notifyLocked()
	}
}

// notifyLocked wakes every waiter. m.mu is held.
func (m *machine) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// finish records that the VM is gone, once.
func (m *machine) finish(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.done:
		return
	default:
	}
	m.err = err
	m.setStateLocked(vm.StateStopped)
	m.log.Info("vz machine gone", "err", err)
	close(m.done)
}

// waitState waits until ok(state) holds or ctx ends.
func (m *machine) waitState(ctx context.Context, ok func(vm.State) bool) error {
	for {
		m.mu.Lock()
		s, ch := m.state, m.changed
		m.mu.Unlock()
		if ok(s) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("still %s: %w", s, ctx.Err())
		}
	}
}

// forceStop powers the VM off (vz Stop, destructive), remembering why.
// In a state that cannot be stopped (starting, pausing, …) it waits for
// the next state change and tries again.
func (m *machine) forceStop(reason string) {
	m.mu.Lock()
	if m.killReason == "" {
		m.killReason = reason
	}
	if m.state < vm.StateStopping {
		m.setStateLocked(vm.StateStopping)
	}
	m.mu.Unlock()
	for {
		m.mu.Lock()
		changed := m.changed
		m.mu.Unlock()
		select {
		case <-m.done:
			return
		default:
		}
		if m.vm.CanStop() {
			if err := m.vm.Stop(); err != nil {
				// The framework refused: the VM may still run, and
				// nothing more can be done about it from here.
				m.finish(fmt.Errorf("vz %s: force stop (because %s): %w", m.name, reason, err))
			}
			return
		}
		if m.vm.State() == vz.VirtualMachineStateStopped {
			m.finish(fmt.Errorf("vz %s was stopped because %s", m.name, reason))
			return
		}
		m.log.Warn("vz cannot stop the machine yet; waiting for its next state", "state", m.vm.State().String())
		select {
		case <-changed:
		case <-m.done:
			return
		}
	}
}

// Stop asks the guest to power off (RequestStop, the power button) and
// waits; when ctx ends first, or the guest cannot be asked, it forces the
// VM off. It returns nil once the VM is gone; Wait says how it went.
func (m *machine) Stop(ctx context.Context) error {
	select {
	case <-m.done:
		return nil
	default:
	}
	m.mu.Lock()
	if m.state < vm.StateStopping {
		m.setStateLocked(vm.StateStopping)
	}
	m.mu.Unlock()
	asked := false
	if m.vm.CanRequestStop() {
		ok, err := m.vm.RequestStop()
		if err != nil {
			m.log.Debug("graceful stop", "err", err)
		}
		asked = ok && err == nil
	}
	if !asked {
		m.forceStop("the guest could not be asked to power off")
		<-m.done
		return nil
	}
	select {
	case <-m.done:
	case <-ctx.Done():
		m.forceStop("Stop's context ended before the guest powered off")
		<-m.done
	}
	return nil
}

// Wait returns nil after a clean guest power-off, else why the VM ended.
func (m *machine) Wait() error {
	<-m.done
	return m.err
}

func (m *machine) State() vm.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state
}

// LinkKind is always vsock: every vz VM has its one vsock device.
func (m *machine) LinkKind() vm.LinkKind { return vm.LinkVsock }

func (m *machine) ConsoleLog() string { return m.console }

// DialLink opens a new vsock connection to the guest agent. Until the agent
// listens, vz reports ECONNRESET: it retries with backoff until ctx ends or
// the machine stops.
func (m *machine) DialLink(ctx context.Context) (net.Conn, error) {
	delay := dialBackoffMin
	for attempt := 1; ; attempt++ {
		if m.State() == vm.StateStopped {
			return nil, fmt.Errorf("dial guest link: %w", vm.ErrNotRunning)
		}
		c, err := m.connect(ctx)
		if err == nil {
			return c, nil
		}
		if !retryable(err) {
			return nil, fmt.Errorf("dial guest link (vsock port %d): %w", m.spec.VsockPort, err)
		}
		m.log.Debug("guest link not ready", "attempt", attempt, "err", err)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("dial guest link (vsock port %d, %d attempts, the guest agent is not listening yet): %w (last: %w)",
				m.spec.VsockPort, attempt, ctx.Err(), err)
		case <-m.done:
			t.Stop()
			return nil, fmt.Errorf("dial guest link: %w", vm.ErrNotRunning)
		}
		delay = min(2*delay, dialBackoffMax)
	}
}

// errConnectTimeout: one connection attempt got no answer in time.
var errConnectTimeout = errors.New("vsock connect got no answer within " + connectTimeout.String())

// connect makes one vsock connection attempt, abandoning it (and closing
// a late connection) after connectTimeout or when ctx ends: vz's Connect
// cannot be cancelled.
func (m *machine) connect(ctx context.Context) (net.Conn, error) {
	t := time.NewTimer(connectTimeout)
	defer t.Stop()
	type result struct {
		c   *vz.VirtioSocketConnection
		err error
	}
	ch := make(chan result, 1)
	var err error
	go func() {
		c, err := m.socket.Connect(m.spec.VsockPort)
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err // not r.c: a typed nil in a net.Conn is not nil
		}
		return r.c, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = errConnectTimeout
	}
	go func() {
		if r := <-ch; r.err == nil {
			r.c.Close()
		}
	}()
	return nil, err
}

// retryable reports whether a vsock connect failed because nothing listens
// on the guest port yet (the guest is still booting).
func retryable(err error) bool {
	if errors.Is(err, errConnectTimeout) {
		return true
	}
	var ns *vz.NSError
	if errors.As(err, &ns) {
		return ns.Code == int(syscall.ECONNRESET) || ns.Code == int(syscall.ECONNREFUSED)
	}
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}

// Pause stops the vCPUs, keeping memory.
func (m *machine) Pause(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	if !m.vm.CanPause() {
		return fmt.Errorf("pause vz %s: not possible while %s: %w", m.name, m.State(), vm.ErrNotRunning)
	}
	if err := m.vm.Pause(); err != nil {
		return fmt.Errorf("pause vz %s: %w", m.name, err)
	}
	return nil
}

// Resume runs a paused machine again.
func (m *machine) Resume(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if !m.vm.CanResume() {
		return fmt.Errorf("resume vz %s: not possible while %s: %w", m.name, m.State(), vm.ErrNotRunning)
	}
	if err := m.vm.Resume(); err != nil {
		return fmt.Errorf("resume vz %s: %w", m.name, err)
	}
	return nil
}

func formatConsole(path string) string {
	s := "\nfull console log: " + path
	if lines := vm.TailConsole(path, 10); len(lines) > 0 {
		s = "\nlast console lines:\n  | " + strings.Join(lines, "\n  | ") + s
	}
	return s
}
