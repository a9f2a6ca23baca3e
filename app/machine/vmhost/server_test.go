package vmhost

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/machine/idle"
	"github.com/airlock-dev/airlock/vm"
)

func TestSocketPath(t *testing.T) {
	short := "/tmp/airlock-501"
	long := "/Users/someone/Library/Application Support/Airlock/run/" + strings.Repeat("x", 40)
	for _, tc := range []struct {
		dir, goos string
		inDir     bool
	}{
		{"/home/u/.local/share/airlock/run/3f2a19bc", "linux", true},
		{"/home/u/.local/share/airlock/run/3f2a19bc", "darwin", true},
		{long, "darwin", false},      // 96 + "/control.sock" > 103
		{long, "linux", false},       // > 107
		{long[:93], "linux", true},   // 93+13 bytes: fits Linux's 107
		{long[:93], "darwin", false}, // not macOS's 103
	} {
		p := socketPath(tc.dir, ControlSocket, tc.goos, short)
		if got := filepath.Dir(p) == tc.dir; got != tc.inDir {
			t.Errorf("socketPath(%d-byte dir, %s) = %s: in the run dir %v, want %v", len(tc.dir), tc.goos, p, got, tc.inDir)
		}
		if len(p) > maxSocketPath(tc.goos) {
			t.Errorf("socketPath(%d-byte dir, %s) = %s: %d bytes, over the limit", len(tc.dir), tc.goos, p, len(p))
		}
		if !tc.inDir && p != socketPath(tc.dir+"/", ControlSocket, tc.goos, short) {
			t.Errorf("the short path depends on how the run dir is spelled")
		}
	}
	a := socketPath(long, ControlSocket, "darwin", short)
	b := socketPath(long+"y", ControlSocket, "darwin", short)
	if a == b {
		t.Errorf("two run dirs share the short socket path %s", a)
	}
}

// fakeMachine is a vm.Machine with an echo server as its guest.
type fakeMachine struct {
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	st   vm.State
	err  error
}

func newFake() *fakeMachine { return &fakeMachine{done: make(chan struct{}), st: vm.StateRunning} }

func (f *fakeMachine) DialLink(ctx context.Context) (net.Conn, error) {
	if f.State() == vm.StateStopped {
		return nil, vm.ErrNotRunning
	}
	a, b := net.Pipe()
	go func() {
		io.Copy(b, b)
		b.Close()
	}()
	return a, nil
}

// powerOff ends the machine with err, as a guest power-off or crash would.
func (f *fakeMachine) powerOff(err error) {
	f.once.Do(func() {
		f.mu.Lock()
		f.st, f.err = vm.StateStopped, err
		f.mu.Unlock()
		close(f.done)
	})
}

func (f *fakeMachine) Stop(ctx context.Context) error {
	if ctx.Err() != nil {
		f.powerOff(errors.New("killed"))
	}
	f.powerOff(nil)
	return nil
}

func (f *fakeMachine) Wait() error {
	<-f.done
	return f.err
}

func (f *fakeMachine) State() vm.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st
}

func (f *fakeMachine) LinkKind() vm.LinkKind { return vm.LinkVsock }
func (f *fakeMachine) ConsoleLog() string    { return "/dev/null" }

// pausingMachine adds vm.Pauser.
type pausingMachine struct{ *fakeMachine }

func (p pausingMachine) Pause(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.st = vm.StatePaused
	return nil
}

func (p pausingMachine) Resume(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.st = vm.StateRunning
	return nil
}

type fakeBackend struct{ m vm.Machine }

func (b fakeBackend) Name() string                                       { return "fake" }
func (b fakeBackend) Validate(context.Context, vm.Spec) error            { return nil }
func (b fakeBackend) Start(context.Context, vm.Spec) (vm.Machine, error) { return b.m, nil }

// serve runs Serve for m in a new run directory and returns once it is
// ready; the returned channel yields Serve's result.
func serve(t *testing.T, ctx context.Context, m vm.Machine) (string, <-chan error) {
	t.Helper()
	dir := t.TempDir()
	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- Serve(ctx, Config{Dir: dir, Backend: fakeBackend{m}, Spec: vm.Spec{Name: "fake"}, Ready: func(Status) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("Serve: %v", err)
	}
	return dir, errc
}

func TestControlProtocol(t *testing.T) {
	ctx := t.Context()
	f := newFake()
	dir, errc := serve(t, ctx, f)
	c, err := Dial(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.State(ctx)
	if err != nil || st.State != vm.StateRunning || st.Name != "fake" || st.Backend != "fake" || st.PID != os.Getpid() || len(st.Can) != 0 {
		t.Fatalf("State = %+v, %v", st, err)
	}
	for _, op := range []func(context.Context) error{c.Pause, c.Resume,
		func(ctx context.Context) error { return c.Save(ctx, "/x") }} {
		if err := op(ctx); !errors.Is(err, vm.ErrNotSupported) || !strings.Contains(err.Error(), "fake backend cannot") {
			t.Errorf("an op the machine lacks: %v, want a vm.ErrNotSupported that says so", err)
		}
	}
	if _, err := c.do(ctx, Request{Op: "dance"}); !errors.Is(err, vm.ErrNotSupported) {
		t.Errorf("unknown op: %v", err)
	}

	// Two guest connections at once, each its own stream.
	var conns []net.Conn
	for i := range 2 {
		conn, err := c.DialLink(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		msg := []byte{'a' + byte(i)}
		if _, err := conn.Write(msg); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	for i, conn := range conns {
		b := make([]byte, 1)
		if _, err := io.ReadFull(conn, b); err != nil || b[0] != 'a'+byte(i) {
			t.Errorf("guest connection %d read %q, %v", i, b, err)
		}
	}

	wait, err := c.startWait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err = c.Stop(ctx, time.Second)
	if err != nil || st.State != vm.StateStopped {
		t.Fatalf("Stop = %+v, %v", st, err)
	}
	// Stop answers once the sockets are gone.
	p := PathsOf(dir)
	for _, s := range []string{p.Control, p.Guest} {
		if _, err := os.Lstat(s); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after Stop: %v", s, err)
		}
	}
	if err := wait(); err != nil {
		t.Errorf("Wait after a clean stop: %v", err)
	}
	if err := <-errc; err != nil {
		t.Errorf("Serve: %v", err)
	}
	// The open guest connections were closed.
	for _, conn := range conns {
		if _, err := conn.Read(make([]byte, 1)); err == nil {
			t.Errorf("a guest connection outlived the machine")
		}
	}
	if _, err := Dial(ctx, dir); !errors.Is(err, ErrNoSupervisor) {
		t.Errorf("Dial after the supervisor ended: %v, want ErrNoSupervisor", err)
	}
}

func TestPauseResume(t *testing.T) {
	ctx := t.Context()
	f := pausingMachine{newFake()}
	dir, errc := serve(t, ctx, f)
	c, err := Dial(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.State(ctx); st.State != vm.StatePaused || len(st.Can) != 2 {
		t.Errorf("after pause: %+v", st)
	}
	// A stop resumes a paused machine first.
	if _, err := c.Stop(ctx, 0); err != nil {
		t.Fatal(err)
	}
	<-errc
}

func TestMachineCrashIsReported(t *testing.T) {
	ctx := t.Context()
	f := newFake()
	dir, errc := serve(t, ctx, f)
	m, err := Attach(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	f.powerOff(errors.New("qemu exited: signal: segmentation fault"))
	if err := m.Wait(); err == nil || !strings.Contains(err.Error(), "segmentation fault") {
		t.Errorf("Wait = %v, want the machine's own error", err)
	}
	if err := <-errc; err == nil {
		t.Errorf("Serve returned nil for a crashed machine")
	}
	if m.State() != vm.StateStopped {
		t.Errorf("state after the crash: %s", m.State())
	}
}

func TestContextEndStopsTheMachine(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	f := newFake()
	_, errc := serve(t, ctx, f)
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Serve after its context ended: %v, want a graceful stop", err)
	}
}

func TestStaleSocketsAreRemoved(t *testing.T) {
	dir := t.TempDir()
	p := PathsOf(dir)
	for _, s := range []string{p.Control, p.Guest} {
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: s, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		l.SetUnlinkOnClose(false)
		l.Close() // as a SIGKILLed supervisor leaves it
	}
	_, err := Dial(t.Context(), dir)
	if !errors.Is(err, ErrNoSupervisor) {
		t.Fatalf("Dial of a dead supervisor: %v", err)
	}
	for _, s := range []string{p.Control, p.Guest} {
		if _, err := os.Lstat(s); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale %s not removed: %v", s, err)
		}
	}
	// A second supervisor in a live one's directory is refused.
	ctx := t.Context()
	f := newFake()
	dir2, errc := serve(t, ctx, f)
	if err := Serve(ctx, Config{Dir: dir2, Backend: fakeBackend{newFake()}}); err == nil || !strings.Contains(err.Error(), "another supervisor") {
		t.Errorf("second Serve in a live directory: %v", err)
	}
	f.powerOff(nil)
	<-errc
}

// manualClock is an idle.Clock whose timers fire only when the test says;
// armed tells of each timer set.
type manualClock struct {
	mu    sync.Mutex
	f     func()
	live  bool
	armed chan struct{}
}

type manualTimer struct {
	c *manualClock
}

func (c *manualClock) AfterFunc(_ time.Duration, f func()) idle.Stopper {
	c.mu.Lock()
	c.f, c.live = f, true
	c.mu.Unlock()
	c.armed <- struct{}{}
	return manualTimer{c}
}

func (t manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.c.live
	t.c.live = false
	return was
}

// fire runs the armed timer's function, if one is armed.
func (c *manualClock) fire() bool {
	c.mu.Lock()
	f, live := c.f, c.live
	c.live = false
	c.mu.Unlock()
	if live {
		f()
	}
	return live
}

// A supervisor with an idle TTL keeps its machine while a client is
// connected, and stops it once the TTL passes with none (the airlock that
// started it died).
func TestIdleTTLStopsAnAbandonedMachine(t *testing.T) {
	clock := &manualClock{armed: make(chan struct{}, 8)}
	f := newFake()
	dir := t.TempDir()
	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- Serve(t.Context(), Config{Dir: dir, Backend: fakeBackend{f}, Spec: vm.Spec{Name: "fake"},
			IdleTTL: time.Hour, IdleClock: clock, Ready: func(Status) { close(ready) }})
	}()
	<-ready
	<-clock.armed // no client yet: the timer runs

	c, err := Dial(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := c.DialLink(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The connection is served once it echoes.
	conn.Write([]byte("x"))
	io.ReadFull(conn, make([]byte, 1))
	if clock.fire() {
		t.Fatal("the idle timer was armed while a client was connected")
	}
	if f.State() != vm.StateRunning {
		t.Fatalf("machine %s while a client is connected", f.State())
	}

	conn.Close()
	// The last client is gone: the timer is armed again. (Signals from
	// earlier, shorter connections may come first: fire the one that is
	// live.)
	for range clock.armed {
		if clock.fire() {
			break
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("Serve after the idle TTL: %v, want a graceful stop", err)
	}
	if f.State() != vm.StateStopped {
		t.Fatalf("machine %s after the idle TTL, want stopped", f.State())
	}
}

type emulatedMachine struct{ *fakeMachine }

func (emulatedMachine) Emulated() bool { return true }

// A client learns from the supervisor whether the guest's CPU is
// emulated: it picks the link's ciphers by it.
func TestStatusSaysEmulated(t *testing.T) {
	for _, tt := range []struct {
		name string
		m    vm.Machine
		want bool
	}{{"emulated", emulatedMachine{newFake()}, true}, {"not", newFake(), false}} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			dir, errc := serve(t, ctx, tt.m)
			c, err := Dial(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			st, err := c.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			m, err := newMachine(ctx, c, st)
			if err != nil {
				t.Fatal(err)
			}
			if st.Emulated != tt.want || m.Emulated() != tt.want {
				t.Errorf("status says emulated %v, machine %v; want %v", st.Emulated, m.Emulated(), tt.want)
			}
			if _, err := c.Stop(ctx, 0); err != nil {
				t.Fatal(err)
			}
			<-errc
		})
	}
}
