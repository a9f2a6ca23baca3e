package vmhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/airlock-dev/airlock/app/machine/idle"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/vm"
)

// DefaultStopTimeout is how long a stop gives the guest to power off before
// the machine is forced off, when the request names no timeout.
const DefaultStopTimeout = 10 * time.Second

// requestTimeout bounds how long a client may take to send its request.
const requestTimeout = 10 * time.Second

// Config says what a supervisor serves.
type Config struct {
	// Dir is the run directory: the sockets are bound there (or in a short
	// per-user directory when its path is too long, see PathsOf).
	Dir string
	// Backend starts the machine; Spec is what it starts.
	Backend vm.Backend
	Spec    vm.Spec
	// RestoreFrom, when set, starts the machine from the state saved
	// there (by a save) instead of booting it, through the backend's
	// vm.Restorer. Both hypervisors restore into a new VM, never over a
	// running one: restoring is how a supervisor starts, not something a
	// running one does.
	RestoreFrom string
	// StopTimeout is the graceful part of a stop that names no timeout,
	// and of the stop when Serve's context ends; zero means
	// DefaultStopTimeout.
	StopTimeout time.Duration
	// IdleTTL, when positive, stops the machine once no client has had a
	// connection open (control or guest socket) for that long: the
	// airlock that started a VM keeps its wait request open while it
	// lives, so this ends VMs whose client died. Zero: never.
	IdleTTL time.Duration
	// IdleClock is the idle timer's clock; nil means the system's.
	IdleClock idle.Clock
	// Ready, if set, is called once the machine has started and both
	// sockets accept connections.
	Ready func(Status)
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// server is one Serve call's state.
type server struct {
	cfg     Config
	log     *slog.Logger
	m       vm.Machine
	dial    client.DialFunc
	started time.Time
	gone    chan struct{} // closed once the machine is gone and the sockets removed

	mu    sync.Mutex
	conns map[net.Conn]bool // open connections, to unblock at the end
	idle  *idle.Timer       // nil without an IdleTTL
	exit  error             // the machine's Wait result, once gone
}

// Serve starts the machine of cfg and serves its control and guest sockets
// until the machine is gone: after a stop or kill request, the guest's own
// power-off, or a crash. When ctx ends the machine is stopped (gracefully,
// forced after StopTimeout). Serve removes its sockets before it returns
// the machine's Wait result: nil after a clean power-off.
//
// A socket left by a supervisor that died is replaced; a live supervisor
// in the same directory is an error.
func Serve(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Backend == nil {
		return errors.New("serve: no backend")
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	p := PathsOf(cfg.Dir)
	if err := ensureShortDir(p); err != nil {
		return err
	}
	control, err := listen(p.Control)
	if err != nil {
		return err
	}
	defer control.Close()
	link, err := listen(p.Guest)
	if err != nil {
		return err
	}
	defer link.Close()

	// The machine lives as long as Serve: ctx ending stops it gracefully
	// below instead of killing it.
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	m, err := startMachine(mctx, cfg)
	if err != nil {
		return err
	}
	s := &server{cfg: cfg, log: log, m: m, dial: m.DialLink, started: time.Now(), gone: make(chan struct{}), conns: map[net.Conn]bool{}}
	// A serial link is one stream: the supervisor owns the one yamux
	// session over it and gives each guest-socket connection a stream.
	if m.LinkKind() == vm.LinkSerial {
		mux := client.NewMux(m.DialLink)
		defer mux.Close()
		s.dial = mux.Dial
	}

	var g errgroup.Group
	exited := make(chan struct{})
	g.Go(func() error {
		select {
		case <-ctx.Done():
			log.Info("stopping the machine", "why", context.Cause(ctx))
			s.stop(context.WithoutCancel(ctx), cfg.StopTimeout)
		case <-exited:
		}
		return nil
	})
	if cfg.IdleTTL > 0 {
		s.idle = idle.New(cfg.IdleTTL, cfg.IdleClock, func() {
			log.Info("stopping the machine: no client for the idle TTL", "ttl", cfg.IdleTTL)
			s.stop(context.WithoutCancel(ctx), cfg.StopTimeout)
		})
		s.idle.Start()
		defer s.idle.Stop()
	}
	g.Go(func() error { return s.acceptLoop(control, &g, s.handleControl) })
	g.Go(func() error { return s.acceptLoop(link, &g, s.handleGuest) })
	log.Info("machine started", "name", cfg.Spec.Name, "link", m.LinkKind())
	if cfg.Ready != nil {
		cfg.Ready(s.status())
	}

	werr := m.Wait()
	close(exited)
	log.Info("machine gone", "err", werr)
	// Closing the listeners removes the sockets; then waiters are told.
	control.Close()
	link.Close()
	s.mu.Lock()
	s.exit = werr
	// Guest connections end with the machine; control requests are
	// answered (a client that sends none times out on its own).
	for c, guestConn := range s.conns {
		if guestConn {
			c.Close()
		}
	}
	close(s.gone)
	s.mu.Unlock()
	g.Wait()
	return werr
}

// listen binds a unix socket at path, replacing one left by a supervisor
// that died; closing the listener removes the socket.
func listen(path string) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("listen on %s: a file that is not a socket is in the way", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen on %s: another supervisor is running there", path)
		}
		os.Remove(path)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return l, nil
}

// acceptLoop serves each connection of l with handle until l is closed.
func (s *server) acceptLoop(l *net.UnixListener, g *errgroup.Group, handle func(net.Conn)) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			s.log.Warn("accept", "err", err)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return nil
		}
		g.Go(func() error {
			handle(c)
			return nil
		})
	}
}

// track registers c (closed at the end when guestConn); it returns false
// when the machine is already gone.
func (s *server) track(c net.Conn, guestConn bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.gone:
		return false
	default:
	}
	s.conns[c] = guestConn
	return true
}

func (s *server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// handleGuest joins a guest-socket connection to a new link stream.
func (s *server) handleGuest(c net.Conn) {
	defer c.Close()
	if !s.track(c, true) {
		return
	}
	defer s.untrack(c)
	defer s.busy()()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.gone:
			cancel()
		case <-ctx.Done():
		}
	}()
	l, err := s.dial(ctx)
	if err != nil {
		s.log.Warn("dial guest link", "err", err)
		return
	}
	if !s.track(l, true) {
		l.Close()
		return
	}
	defer s.untrack(l)
	splice(c, l)
}

// busy holds the idle timer while a client connection is open; call the
// function it returns when the connection ends.
func (s *server) busy() (end func()) {
	if s.idle == nil {
		return func() {}
	}
	end, _ = s.idle.Busy()
	return end
}

// splice copies between a and b until either side ends, then closes both:
// SSH, the one protocol on the link, never half-closes.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	go func() { io.Copy(a, b); done <- struct{}{} }()
	go func() { io.Copy(b, a); done <- struct{}{} }()
	<-done
	a.Close()
	b.Close()
	<-done
}

// handleControl answers one request.
func (s *server) handleControl(c net.Conn) {
	defer c.Close()
	if !s.track(c, false) {
		return
	}
	defer s.untrack(c)
	defer s.busy()()
	c.SetReadDeadline(time.Now().Add(requestTimeout))
	var req Request
	if err := json.NewDecoder(c).Decode(&req); err != nil {
		s.log.Debug("read control request", "err", err)
		return
	}
	c.SetReadDeadline(time.Time{})
	s.log.Debug("control", "op", req.Op)
	if req.Op == OpWait {
		// At once, so that the client knows its wait is taken.
		if err := json.NewEncoder(c).Encode(Response{Status: ptr(s.status())}); err != nil {
			return
		}
	}
	st, err := s.do(req)
	resp := Response{Status: &st}
	if err != nil {
		resp = Response{Error: err.Error(), Code: codeOf(err)}
	}
	if err := json.NewEncoder(c).Encode(resp); err != nil {
		s.log.Debug("write control response", "err", err)
	}
}

func ptr[T any](v T) *T { return &v }

func codeOf(err error) string {
	switch {
	case errors.Is(err, vm.ErrNotSupported):
		return codeNotSupported
	case errors.Is(err, vm.ErrNotRunning):
		return codeNotRunning
	}
	return ""
}

// do carries out one request. Requests that end the machine answer once
// it is gone and the sockets are removed.
func (s *server) do(req Request) (Status, error) {
	// An operation on the machine is bounded by the machine's life and a
	// minute; a stop by its own timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch req.Op {
	case OpState:
		return s.status(), nil
	case OpWait:
		<-s.gone
		return s.status(), nil
	case OpStop:
		timeout := s.cfg.StopTimeout
		if req.TimeoutMS > 0 {
			timeout = time.Duration(req.TimeoutMS) * time.Millisecond
		}
		s.stop(ctx, timeout)
		<-s.gone
		return s.status(), nil
	case OpKill:
		killNow(s.m)
		<-s.gone
		return s.status(), nil
	case OpPause, OpResume:
		p, ok := s.m.(vm.Pauser)
		if !ok {
			return Status{}, fmt.Errorf("%s: the %s backend cannot pause a machine: %w", req.Op, s.cfg.Backend.Name(), vm.ErrNotSupported)
		}
		var err error
		if req.Op == OpPause {
			err = p.Pause(ctx)
		} else {
			err = p.Resume(ctx)
		}
		if err != nil {
			return Status{}, fmt.Errorf("%s: %w", req.Op, err)
		}
		return s.status(), nil
	case OpSave:
		sn, ok := s.m.(vm.Snapshotter)
		if !ok {
			return Status{}, fmt.Errorf("save: the %s backend cannot save a machine's state: %w", s.cfg.Backend.Name(), vm.ErrNotSupported)
		}
		if err := sn.Save(ctx, req.Path); err != nil {
			return Status{}, fmt.Errorf("save: %w", err)
		}
		return s.status(), nil
	}
	return Status{}, fmt.Errorf("unknown operation %q: %w", req.Op, vm.ErrNotSupported)
}

// stop asks the guest to power off, forcing the machine off after
// timeout. A paused machine is resumed first: a stopped vCPU cannot see
// the power button.
func (s *server) stop(ctx context.Context, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if p, ok := s.m.(vm.Pauser); ok && s.m.State() == vm.StatePaused {
		if err := p.Resume(ctx); err != nil {
			s.log.Warn("resume before stop", "err", err)
		}
	}
	if err := s.m.Stop(ctx); err != nil {
		s.log.Warn("stop", "err", err)
	}
}

func (s *server) status() Status {
	st := Status{
		Name: s.cfg.Spec.Name, Backend: s.cfg.Backend.Name(), State: s.m.State(), Link: s.m.LinkKind(),
		Console: s.m.ConsoleLog(), PID: os.Getpid(), Started: s.started,
	}
	if _, ok := s.m.(vm.Pauser); ok {
		st.Can = append(st.Can, OpPause, OpResume)
	}
	if _, ok := s.m.(vm.Snapshotter); ok {
		st.Can = append(st.Can, OpSave)
	}
	if c, ok := s.m.(interface{ Confined() string }); ok {
		st.Confined = c.Confined()
	}
	if e, ok := s.m.(vm.Emulator); ok {
		st.Emulated = e.Emulated()
	}
	select {
	case <-s.gone:
		s.mu.Lock()
		if s.exit != nil {
			st.Exit = s.exit.Error()
		}
		s.mu.Unlock()
	default:
	}
	return st
}

// killNow stops m with an already-ended context: forced, immediate.
func killNow(m vm.Machine) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = m.Stop(ctx)
}

// Supervise is the body of `airlock vmhost DIR`: it reads the spec in
// DIR/vmhost.json, serves it on backend until the machine is gone, and
// tells the process that spawned it (through the descriptor named by
// $AIRLOCK_VMHOST_READY_FD) once the machine runs.
func Supervise(ctx context.Context, dir string, backend vm.Backend, idleTTL time.Duration, log *slog.Logger) error {
	data, err := os.ReadFile(filepath.Join(dir, SpecFile))
	if err != nil {
		return fmt.Errorf("read machine spec: %w", err)
	}
	var spec vm.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("read machine spec: %w", err)
	}
	var restore string
	if b, err := os.ReadFile(filepath.Join(dir, RestoreFile)); err == nil {
		restore = string(b)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read the state to restore: %w", err)
	}
	var ready *os.File
	if fd := os.Getenv(ReadyFDEnv); fd != "" {
		n, err := strconv.Atoi(fd)
		if err != nil {
			return fmt.Errorf("$%s=%q: not a file descriptor", ReadyFDEnv, fd)
		}
		ready = os.NewFile(uintptr(n), "ready")
		defer ready.Close()
		// Children (QEMU, virtiofsd) must not keep the pipe open.
		syscall.CloseOnExec(n)
	}
	return Serve(ctx, Config{
		Dir: dir, Backend: backend, Spec: spec, RestoreFrom: restore, IdleTTL: idleTTL, Logger: log,
		Ready: func(st Status) {
			if ready == nil {
				return
			}
			b, _ := json.Marshal(st)
			if _, err := ready.Write(append(b, '\n')); err != nil {
				log.Warn("tell the parent the machine is ready", "err", err)
			}
			ready.Close()
		},
	})
}

// startMachine boots cfg.Spec, or restores it from cfg.RestoreFrom.
func startMachine(ctx context.Context, cfg Config) (vm.Machine, error) {
	if cfg.RestoreFrom == "" {
		m, err := cfg.Backend.Start(ctx, cfg.Spec)
		if err != nil {
			return nil, fmt.Errorf("start %s VM: %w", cfg.Backend.Name(), err)
		}
		return m, nil
	}
	r, ok := cfg.Backend.(vm.Restorer)
	if !ok {
		return nil, fmt.Errorf("restore %s VM from %s: the backend cannot restore saved state: %w", cfg.Backend.Name(), cfg.RestoreFrom, vm.ErrNotSupported)
	}
	m, err := r.Restore(ctx, cfg.Spec, cfg.RestoreFrom)
	if err != nil {
		return nil, fmt.Errorf("restore %s VM from %s: %w", cfg.Backend.Name(), cfg.RestoreFrom, err)
	}
	return m, nil
}
