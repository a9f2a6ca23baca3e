package agent

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// process is a child the agent started. done is closed once it has exited
// and status is set.
type process struct {
	pid    int
	done   chan struct{}
	status syscall.WaitStatus
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signalGroup sends sig to the process group the process leads (every
// process the agent starts is a session and group leader).
func (p *process) signalGroup(sig syscall.Signal) error {
	return syscall.Kill(-p.pid, sig)
}

// startProcess starts a child through the reaper, or directly when the
// agent has none.
func (a *Agent) startProcess(name string, argv []string, attr *os.ProcAttr) (*process, error) {
	if a.cfg.Ready != nil {
		<-a.cfg.Ready
	}
	if a.cfg.AfterFirstCommand != nil {
		defer a.firstCommand.Do(func() { go a.cfg.AfterFirstCommand() })
	}
	if a.cfg.Reaper != nil {
		return a.cfg.Reaper.start(name, argv, attr)
	}
	p, err := os.StartProcess(name, argv, attr)
	if err != nil {
		return nil, err
	}
	pr := &process{pid: p.Pid, done: make(chan struct{})}
	go func() {
		defer close(pr.done)
		st, err := p.Wait()
		if err != nil {
			// Wait fails only if the process is not our child; report it
			// as a generic failure rather than success.
			pr.status = syscall.WaitStatus(255 << 8)
			return
		}
		pr.status = st.Sys().(syscall.WaitStatus)
	}()
	return pr, nil
}

// Reaper does all the waiting for the children of a process that is PID 1
// or a subreaper: orphans are reparented to it, and someone must collect
// them or they stay zombies forever.
//
// A reaper that calls wait4(-1) would steal the exit status of a process
// someone else is waiting for (os/exec's Wait). So, while a Reaper runs, it
// must be the only one waiting: every child whose status matters is started
// with Start, which registers it, and the Reaper hands its status to that
// waiter; statuses of unregistered children (orphans) are dropped. Nothing
// in the process may use os/exec's Wait or os.Process.Wait.
//
// The zero value is ready to use; Run must be running for statuses to be
// delivered.
type Reaper struct {
	// Logger receives a debug line per reaped orphan; nil discards.
	Logger *slog.Logger

	mu    sync.Mutex
	procs map[int]*process // registered, not yet reaped
}

// reapInterval is a safety net: SIGCHLD drives the reaper, the ticker
// catches anything a coalesced signal could hide and keeps a timer alive
// in PID 1 so the runtime never sees every goroutine blocked.
const reapInterval = 30 * time.Second

// Run reaps children until ctx ends: on every SIGCHLD, once at start (for
// children that exited before it was called), and every 30 seconds. It
// returns nil when ctx ends.
func (r *Reaper) Run(ctx context.Context) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	t := time.NewTicker(reapInterval)
	defer t.Stop()
	for {
		r.reap()
		select {
		case <-ctx.Done():
			return nil
		case <-sigs:
		case <-t.C:
		}
	}
}

// reap collects every child that has exited. It reports whether the
// process has no children left.
func (r *Reaper) reap() (none bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 { // ECHILD: no children; 0: none exited
			return err == syscall.ECHILD
		}
		r.mu.Lock()
		p := r.procs[pid]
		delete(r.procs, pid)
		r.mu.Unlock()
		if p == nil {
			if r.Logger != nil {
				r.Logger.Debug("reaped orphan", "pid", pid, "status", int(ws))
			}
			continue
		}
		p.status = ws
		close(p.done)
	}
}

// waitAll reaps children until none is left or ctx ends.
func (r *Reaper) waitAll(ctx context.Context) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	for !r.reap() {
		select {
		case <-ctx.Done():
			return
		case <-sigs:
		}
	}
}

// Start starts a process like os.StartProcess and registers it, so Run
// delivers its exit status. It returns the pid and a function that waits
// for the process to exit and returns its wait status.
func (r *Reaper) Start(name string, argv []string, attr *os.ProcAttr) (pid int, wait func() syscall.WaitStatus, err error) {
	p, err := r.start(name, argv, attr)
	if err != nil {
		return 0, nil, err
	}
	return p.pid, func() syscall.WaitStatus {
		<-p.done
		return p.status
	}, nil
}

func (r *Reaper) start(name string, argv []string, attr *os.ProcAttr) (*process, error) {
	// Holding mu across the fork makes registration atomic with it: the
	// reaper may collect the child the moment it exits, but it cannot look
	// it up before it is registered.
	r.mu.Lock()
	defer r.mu.Unlock()
	p, err := os.StartProcess(name, argv, attr)
	if err != nil {
		return nil, err
	}
	pr := &process{pid: p.Pid, done: make(chan struct{})}
	if r.procs == nil {
		r.procs = make(map[int]*process)
	}
	r.procs[p.Pid] = pr
	// The reaper waits; drop the handle (and its pidfd) without waiting.
	_ = p.Release()
	return pr, nil
}
