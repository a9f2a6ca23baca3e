package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/mdlayher/vsock"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/guest"
)

// ListenVsock listens on the vsock port, if the machine has a working
// AF_VSOCK (the virtio vsock transport loaded and a context ID assigned).
func ListenVsock(port uint32) (net.Listener, error) {
	cid, err := vsock.ContextID()
	if err != nil {
		return nil, fmt.Errorf("vsock: no local context ID: %w", err)
	}
	// With the vsock core but no transport loaded, the kernel answers
	// VMADDR_CID_ANY; guests get CIDs from 3 up.
	if cid < 3 || cid == unix.VMADDR_CID_ANY {
		return nil, fmt.Errorf("vsock: no transport (local context ID %#x)", cid)
	}
	l, err := vsock.Listen(port, nil)
	if err != nil {
		return nil, fmt.Errorf("vsock: listen on %d:%d: %w", cid, port, err)
	}
	return l, nil
}

// serialWait bounds how long FindSerialPort waits for the port to appear
// (its module may still be probing the device); serialRetry is how often
// it looks.
const (
	serialWait  = 10 * time.Second
	serialRetry = 10 * time.Millisecond
)

// ErrNoSerialPort is returned by FindSerialPort when the machine has no
// virtio-serial port of that name.
var ErrNoSerialPort = errors.New("no virtio-serial port of that name")

// FindSerialPort returns the device (/dev/vportNpM) of the virtio-serial
// port whose name (/sys/class/virtio-ports/*/name) is name. It waits a few
// seconds for the port and its device node to appear, then returns
// ErrNoSerialPort.
func FindSerialPort(ctx context.Context, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, serialWait)
	defer cancel()
	t := time.NewTicker(serialRetry)
	defer t.Stop()
	for {
		if dev := lookupSerialPort("/sys/class/virtio-ports", name); dev != "" {
			if _, err := os.Stat(dev); err == nil {
				return dev, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("find serial port %q: %w", name, ErrNoSerialPort)
		case <-t.C:
		}
	}
}

func lookupSerialPort(sysDir, name string) string {
	names, _ := filepath.Glob(filepath.Join(sysDir, "*", "name"))
	for _, p := range names {
		b, err := os.ReadFile(p)
		if err == nil && strings.TrimSpace(string(b)) == name {
			return filepath.Join("/dev", filepath.Base(filepath.Dir(p)))
		}
	}
	return ""
}

// hostPollInterval is how often ServeSerial checks whether the host side
// of the port has connected.
const hostPollInterval = 20 * time.Millisecond

// ServeSerial serves the virtio-serial port dev until ctx ends. The port
// is one stream carrying a yamux session whose streams are the link
// connections: the agent waits for the host to connect, serves the
// session until the host disconnects, and waits again.
//
// The port stays open the whole time. Closing it between connections
// would lose data: the guest kernel discards what arrives while the port
// is closed, and QEMU may stop reading the host's socket until it sees
// more ring activity.
func (a *Agent) ServeSerial(ctx context.Context, dev string) error {
	f, err := os.OpenFile(dev, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return fmt.Errorf("serve serial link: %w", err)
	}
	defer f.Close()
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	in := newSessionReader(f)
	for {
		if err := waitHostConnected(ctx, f); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("serve serial link: %w", err)
		}
		// Every session starts with guest.SessionMagic; what precedes it
		// is the tail of a session that is gone.
		if err := in.Start(); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			a.log.Debug("serial link: no session", "err", err)
			in.Drop()
			continue
		}
		a.log.Debug("serial link session", "dev", dev)
		// The port is one stream with no connection boundaries, so it
		// carries a yamux session (guest.SerialPortName's contract): each
		// link connection is a stream of it, any number at once, and a
		// connection's end can never swallow the next one's bytes.
		pc := newPortConn(dev, f, in)
		if _, err := pc.Write([]byte(guest.SessionMagic)); err != nil {
			pc.Close()
			in.Drop()
			continue
		}
		sess, err := yamux.Server(pc, muxConfig())
		if err != nil {
			pc.Close()
			return fmt.Errorf("serve serial link: %w", err)
		}
		if err := a.Serve(ctx, sess); err != nil && !errors.Is(err, io.EOF) {
			a.log.Debug("serial link session ended", "err", err)
		}
		sess.Close()
		pc.Close()
		if in.reset {
			// The host started a new session (its machine was restored
			// or rolled back): the next one is already waiting.
			a.log.Debug("serial link: new session", "dev", dev)
			continue
		}
		in.Drop()
		a.log.Debug("serial link host hung up", "dev", dev)
	}
}

// portConn is one link connection over a port file that outlives it.
// Close ends the connection without closing the file: it interrupts and
// waits out any Read or Write in progress, so none can touch the next
// connection's bytes, and clears the deadlines.
type portConn struct {
	*fileConn
	in       io.Reader  // the port's reader for this session
	rmu, wmu sync.Mutex // held across each Read and Write
	closed   atomic.Bool
}

func newPortConn(name string, f *os.File, in io.Reader) *portConn {
	return &portConn{fileConn: &fileConn{r: f, w: f, addr: fileAddr(name)}, in: in}
}

func (c *portConn) Read(b []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	return c.in.Read(b)
}

func (c *portConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	return c.w.Write(b)
}

func (c *portConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	past := time.Unix(1, 0)
	_ = c.r.SetDeadline(past)
	c.rmu.Lock()
	c.wmu.Lock()
	_ = c.r.SetDeadline(time.Time{})
	c.wmu.Unlock()
	c.rmu.Unlock()
	return nil
}

func (c *portConn) SetDeadline(t time.Time) error {
	if c.closed.Load() {
		return net.ErrClosed
	}
	return c.fileConn.SetDeadline(t)
}

func (c *portConn) SetReadDeadline(t time.Time) error {
	if c.closed.Load() {
		return net.ErrClosed
	}
	return c.fileConn.SetReadDeadline(t)
}

func (c *portConn) SetWriteDeadline(t time.Time) error {
	if c.closed.Load() {
		return net.ErrClosed
	}
	return c.fileConn.SetWriteDeadline(t)
}

// waitHostConnected returns once the host side of the virtio-serial port f
// is open.
func waitHostConnected(ctx context.Context, f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	for {
		var revents int16
		var pollErr error
		if err := rc.Control(func(fd uintptr) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			_, pollErr = unix.Poll(fds, 0)
			revents = fds[0].Revents
		}); err != nil {
			return err
		}
		if pollErr != nil && !errors.Is(pollErr, unix.EINTR) {
			return fmt.Errorf("poll: %w", pollErr)
		}
		if pollErr == nil && revents&unix.POLLHUP == 0 {
			return nil
		}
		// virtio-console reports POLLHUP for as long as the host side is
		// closed, and it has no event for "host connected" that the
		// runtime's poller could wait on (the port's hang-up state is
		// level, not edge): so this one wait is a short sleep loop.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(hostPollInterval):
		}
	}
}

// muxConfig is the yamux configuration of the guest's end of a serial link.
func muxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	// The link is local: the VM's own life is the liveness signal, and a
	// guest busy under TCG must not be declared dead for a late ping.
	c.EnableKeepAlive = false
	c.ConnectionWriteTimeout = 30 * time.Second
	c.MaxStreamWindowSize = 4 << 20
	c.LogOutput = io.Discard
	return c
}
