package vmhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/disk"
)

// ErrNoSupervisor: no supervisor serves the run directory (none was
// started, its machine is gone, or it died; Dial removes what a dead one
// left behind).
var ErrNoSupervisor = errors.New("no VM supervisor is running")

// Client talks to the supervisor of one run directory. It holds no
// connection: each request dials the control socket, so a Client survives
// nothing and needs no Close.
type Client struct {
	paths Paths
}

// Dial returns a client of the supervisor of run directory dir once it
// answers. When it does not, Dial returns an error wrapping
// ErrNoSupervisor, after removing the sockets a supervisor that died left
// behind.
func Dial(ctx context.Context, dir string) (*Client, error) {
	c := &Client{paths: PathsOf(dir)}
	if _, err := c.State(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Dir is the supervisor's run directory.
func (c *Client) Dir() string { return c.paths.Dir }

// State asks for the machine's status.
func (c *Client) State(ctx context.Context) (Status, error) {
	return c.do(ctx, Request{Op: OpState})
}

// Stop asks the guest to power off, forcing the machine off after timeout
// (zero: the supervisor's default) or when ctx ends, and returns once the
// machine is gone and the supervisor's sockets removed. A supervisor that
// is already gone is not an error.
func (c *Client) Stop(ctx context.Context, timeout time.Duration) (Status, error) {
	st, err := c.do(ctx, Request{Op: OpStop, TimeoutMS: timeout.Milliseconds()})
	if ctx.Err() != nil {
		return c.Kill(context.WithoutCancel(ctx))
	}
	if errors.Is(err, ErrNoSupervisor) {
		return Status{State: vm.StateStopped}, nil
	}
	return st, err
}

// Kill forces the machine off at once and returns once it is gone. A
// supervisor that is already gone is not an error.
func (c *Client) Kill(ctx context.Context) (Status, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := c.do(ctx, Request{Op: OpKill})
	if errors.Is(err, ErrNoSupervisor) {
		return Status{State: vm.StateStopped}, nil
	}
	return st, err
}

// Pause stops the machine's vCPUs; an error wraps vm.ErrNotSupported when
// its backend cannot.
func (c *Client) Pause(ctx context.Context) error {
	_, err := c.do(ctx, Request{Op: OpPause})
	return err
}

// Resume runs a paused machine again.
func (c *Client) Resume(ctx context.Context) error {
	_, err := c.do(ctx, Request{Op: OpResume})
	return err
}

// Save saves the machine's state to path (a path the supervisor can
// write); an error wraps vm.ErrNotSupported when its backend cannot.
//
// The supervisor writes only in its run directory (on Linux it is
// confined to it, with its hypervisor): the machine is saved there, and
// what the backend wrote (the state and the files it keeps beside it)
// is moved to path.
func (c *Client) Save(ctx context.Context, path string) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("save: %s already exists", path)
	}
	if _, err := os.Stat(filepath.Dir(path)); err != nil {
		return fmt.Errorf("save: %w", err)
	}
	dir, err := os.MkdirTemp(c.paths.Dir, "saving-")
	if err != nil {
		return fmt.Errorf("save: %w", err)
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, savedName)
	if _, err := c.do(ctx, Request{Op: OpSave, Path: tmp}); err != nil {
		return err
	}
	return moveSaved(ctx, dir, path)
}

// savedName is the name a machine is saved under in its run directory.
const savedName = "state"

// moveSaved moves the files of a machine saved as dir/savedName to path,
// each keeping its suffix; the state itself last, so that a state at
// path always has its companions.
func moveSaved(ctx context.Context, dir, path string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("save: %w", err)
	}
	var moved []string
	move := func(name string) error {
		dst := path + strings.TrimPrefix(name, savedName)
		src := filepath.Join(dir, name)
		err := os.Rename(src, dst)
		if errors.Is(err, syscall.EXDEV) {
			// Another file system: a sparse copy.
			if _, err = disk.Keep(ctx, src, dst); err == nil {
				err = os.Remove(src)
			}
		}
		if err != nil {
			for _, m := range moved {
				os.Remove(m)
			}
			return fmt.Errorf("save: move the saved machine to %s: %w", dst, err)
		}
		moved = append(moved, dst)
		return nil
	}
	for _, e := range entries {
		if n := e.Name(); n != savedName && strings.HasPrefix(n, savedName) && e.Type().IsRegular() {
			if err := move(n); err != nil {
				return err
			}
		}
	}
	return move(savedName)
}

// Wait blocks until the machine is gone, or ctx ends, and returns why it
// ended: nil after a clean power-off. A supervisor that dies first is an
// error.
func (c *Client) Wait(ctx context.Context) error {
	wait, err := c.startWait(ctx)
	if err != nil {
		return err
	}
	return wait()
}

// startWait sends a wait request and reads its first answer (the
// supervisor has taken the request); the returned function reads the
// second, once the machine is gone.
func (c *Client) startWait(ctx context.Context) (func() error, error) {
	read, err := c.send(ctx, Request{Op: OpWait})
	if err != nil {
		return nil, err
	}
	if _, err := read(false); err != nil {
		read(true)
		return nil, err
	}
	return func() error {
		st, err := read(true)
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return fmt.Errorf("the VM supervisor of %s died (its log: %s)", c.paths.Dir, filepath.Join(c.paths.Dir, LogFile))
			}
			return err
		}
		if st.Exit != "" {
			return errors.New(st.Exit)
		}
		return nil
	}, nil
}

// DialLink opens a new connection to the guest agent: each one is its own
// link stream, whatever the machine's link kind.
func (c *Client) DialLink(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.paths.Guest)
	if err != nil {
		return nil, fmt.Errorf("dial guest link: %w", c.noSupervisor(err))
	}
	return conn, nil
}

// do sends one request and reads its response.
func (c *Client) do(ctx context.Context, req Request) (Status, error) {
	read, err := c.send(ctx, req)
	if err != nil {
		return Status{}, err
	}
	return read(true)
}

// send dials the control socket and sends req; the returned function
// reads a response (bounded by ctx too), and closes the connection when
// last is set.
func (c *Client) send(ctx context.Context, req Request) (read func(last bool) (Status, error), err error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.paths.Control)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", req.Op, c.noSupervisor(err))
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		stop()
		conn.Close()
		return nil, fmt.Errorf("%s: %w", req.Op, err)
	}
	dec := json.NewDecoder(conn)
	return func(last bool) (Status, error) {
		if last {
			defer conn.Close()
			defer stop()
		}
		var resp Response
		if err := dec.Decode(&resp); err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return Status{}, fmt.Errorf("%s: %w", req.Op, err)
		}
		if resp.Error != "" {
			return Status{}, &RemoteError{Msg: resp.Error, Code: resp.Code}
		}
		if resp.Status == nil {
			return Status{}, fmt.Errorf("%s: the supervisor answered without a status", req.Op)
		}
		return *resp.Status, nil
	}, nil
}

// noSupervisor turns a failed connect into ErrNoSupervisor, removing the
// sockets of a supervisor that died (connection refused).
func (c *Client) noSupervisor(err error) error {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		os.Remove(c.paths.Control)
		os.Remove(c.paths.Guest)
		return fmt.Errorf("%w in %s (removed the sockets it left)", ErrNoSupervisor, c.paths.Dir)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w in %s", ErrNoSupervisor, c.paths.Dir)
	}
	return err
}

// RemoteError is an error the supervisor reported. errors.Is matches
// vm.ErrNotSupported and vm.ErrNotRunning by its code.
type RemoteError struct {
	Msg  string
	Code string
}

func (e *RemoteError) Error() string { return e.Msg }

func (e *RemoteError) Unwrap() error {
	switch e.Code {
	case codeNotSupported:
		return vm.ErrNotSupported
	case codeNotRunning:
		return vm.ErrNotRunning
	}
	return nil
}
