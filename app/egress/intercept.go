package egress

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// intercept terminates the guest's TLS with a certificate from the
// sandbox's CA and hands the connection to the inner server, which
// forwards each request over real, verified TLS.
func (p *Proxy) intercept(w http.ResponseWriter, t target, rec Record) {
	rec.Mode = ModeIntercept
	if p.cfg.CA == nil {
		d := Decision{Rule: "no CA", Reason: fmt.Sprintf("%s must be inspected (it has a secret or a method limit) but this proxy has no CA to terminate its TLS", t)}
		p.deny(w, rec, d, t)
		return
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		rec.Error = "hijack: " + err.Error()
		p.record(rec)
		return
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Close()
		return
	}
	tc := tls.Server(conn, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			// The certificate is for the CONNECT target, whatever the
			// client's SNI says: a client that wanted another name fails
			// its own verification.
			return p.cfg.CA.Leaf(t.host)
		},
	})
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if err := tc.Handshake(); err != nil {
		rec.Allowed, rec.Error, rec.Duration = true, "TLS handshake with the guest: "+err.Error(), time.Since(rec.Time)
		p.record(rec)
		conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	if !p.inner.push(&interceptedConn{Conn: tc, target: t}) {
		tc.Close()
	}
}

// serveIntercepted handles one request inside an intercepted CONNECT.
func (p *Proxy) serveIntercepted(w http.ResponseWriter, r *http.Request) {
	p.handlers.Add(1)
	defer p.handlers.Done()
	t, ok := r.Context().Value(targetKey{}).(target)
	if !ok {
		http.Error(w, "no target", http.StatusInternalServerError)
		return
	}
	p.forward(w, r, t, time.Now())
}

// interceptedConn is a guest connection after the proxy's TLS handshake,
// with the CONNECT target it was for.
type interceptedConn struct {
	net.Conn
	target target
}

// connListener is a net.Listener fed by push: the inner HTTP server
// accepts intercepted connections from it.
type connListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnListener() *connListener {
	return &connListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

// push hands c to Accept; it reports false when the listener is closed.
func (l *connListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return connAddr{} }

type connAddr struct{}

func (connAddr) Network() string { return "egress" }
func (connAddr) String() string  { return "intercepted" }
