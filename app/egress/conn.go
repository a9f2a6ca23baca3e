package egress

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"
)

// deadlineListener makes every accepted connection support deadlines.
// net/http needs them to take a connection over for CONNECT (Hijack
// interrupts its background read with a read deadline), and the
// connections the guest forwards over SSH are channels, which have none:
// such a connection is relayed through a socket pair.
type deadlineListener struct {
	net.Listener
	p *Proxy // tracks the relayed connections, closed when Serve ends
}

func (l deadlineListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if !l.p.acquire() {
			l.p.refuseConn(c)
			continue
		}
		conn, err := l.withDeadlines(c)
		if err != nil {
			l.p.release()
			return nil, err
		}
		return &countedConn{Conn: conn, release: l.p.release}, nil
	}
}

func (l deadlineListener) withDeadlines(c net.Conn) (net.Conn, error) {
	if supportsDeadlines(c) {
		return c, nil
	}
	ours, theirs, err := socketPair()
	if err != nil {
		c.Close()
		return nil, err
	}
	if !l.p.track(c) {
		c.Close()
		ours.Close()
		theirs.Close()
		return nil, net.ErrClosed
	}
	go func() {
		defer l.p.untrack(c)
		relay(c, theirs)
	}()
	return ours, nil
}

// countedConn is a guest connection that counts against MaxConns until
// it is closed (by the server, a tunnel's relay, or the TLS of an
// intercepted host).
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// CloseWrite passes the end of the proxy's stream on, as relay does.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// acquire counts one more guest connection, unless MaxConns are open.
func (p *Proxy) acquire() bool {
	if p.conns.Add(1) > int64(p.cfg.MaxConns) {
		p.conns.Add(-1)
		return false
	}
	return true
}

func (p *Proxy) release() { p.conns.Add(-1) }

// refuseGrace is how long a connection over the cap has to take its 503.
const refuseGrace = 2 * time.Second

// refuseConn answers a connection over MaxConns with a 503 that says why,
// without reading its request, and records it. Each answer lasts at most
// refuseGrace and costs a goroutine and a small buffer; at most
// 4×MaxConns are under way, beyond them a connection is closed at once.
func (p *Proxy) refuseConn(c net.Conn) {
	reason := fmt.Sprintf("this sandbox already has %d connections open through Airlock's egress proxy, the most it allows at once", p.cfg.MaxConns)
	p.record(Record{Time: time.Now(), Mode: ModeHTTP, Status: http.StatusServiceUnavailable, Rule: "connection cap", Reason: reason})
	if p.refusing.Add(1) > 4*int64(p.cfg.MaxConns) {
		p.refusing.Add(-1)
		c.Close()
		return
	}
	body := fmt.Sprintf("Airlock refused this connection: %s.\n\n"+
		"Close connections that are no longer needed (kept-alive connections close after %s idle, and a request whose body stops arriving for %s is ended) and try again. "+
		"If the sandbox needs more at once, the limit is MaxConns of Airlock's egress proxy configuration (egress.Config; default %d).\n",
		reason, p.cfg.IdleTimeout, p.cfg.BodyTimeout, DefaultMaxConns)
	resp := fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\nX-Airlock-Denied: connection cap\r\n\r\n%s", len(body), body)
	if !p.track(c) {
		p.refusing.Add(-1)
		c.Close()
		return
	}
	p.handlers.Add(1)
	go func() {
		defer p.handlers.Done()
		defer p.refusing.Add(-1)
		defer p.untrack(c)
		// Closing ends a Write or Read the guest holds up (an SSH channel
		// has no deadlines).
		timer := time.AfterFunc(refuseGrace, func() { c.Close() })
		defer timer.Stop()
		defer c.Close()
		if _, err := io.WriteString(c, resp); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		// Read what the guest sent until it closes (or the grace ends):
		// closing a socket with unread data resets it, and the guest
		// would lose the answer.
		_, _ = io.Copy(io.Discard, c)
	}()
}

// supportsDeadlines reports whether c takes a read deadline (set to zero,
// which changes nothing).
func supportsDeadlines(c net.Conn) bool {
	return c.SetReadDeadline(time.Time{}) == nil
}

// socketPair returns the two ends of a connected unix stream socket pair.
func socketPair() (net.Conn, net.Conn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socket pair: %w", err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "egress-socketpair")
		c, err := net.FileConn(f) // dups fd
		f.Close()
		if err != nil {
			if i == 1 {
				conns[0].Close()
			} else {
				syscall.Close(fds[1])
			}
			return nil, nil, fmt.Errorf("socket pair: %w", err)
		}
		conns[i] = c
	}
	return conns[0], conns[1], nil
}
