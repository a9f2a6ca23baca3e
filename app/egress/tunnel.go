package egress

import (
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// connect handles CONNECT: denied, intercepted (a host with a secret, or
// one allowed only for some methods) or relayed as bytes.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request, start time.Time) {
	host, port, err := splitTarget(r.Host, DefaultTLSPort)
	if err != nil {
		http.Error(w, "Airlock's egress proxy: "+err.Error()+"\n", http.StatusBadRequest)
		return
	}
	t := target{host: host, port: port, connect: true}
	rec := Record{Time: start, Mode: ModeTunnel, Host: host, Port: port, Method: http.MethodConnect}
	pol := p.policy.Load()
	d := pol.Decide(Request{Host: host, Port: port, Method: http.MethodConnect, Connect: true, Inspect: p.cfg.CA != nil})
	rec.Rule = d.Rule
	if !d.Allowed {
		p.deny(w, rec, d, t)
		return
	}
	if d.Intercept {
		p.intercept(w, t, rec)
		return
	}
	up, err := p.dialUpstream(r.Context(), "tcp", t.String())
	if err != nil {
		p.unreachable(w, rec, t, err)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		rec.Allowed, rec.Error = true, "hijack: "+err.Error()
		p.record(rec)
		return
	}
	if !p.track(conn) || !p.track(up) {
		conn.Close()
		up.Close()
		return
	}
	defer p.untrack(conn)
	defer p.untrack(up)
	rec.Allowed, rec.Status = true, http.StatusOK
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Close()
		up.Close()
		return
	}
	// Bytes the client sent after its CONNECT (a pipelined TLS hello).
	var early int64
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			conn.Close()
			up.Close()
			return
		}
		early = int64(n)
	}
	upN, downN := relay(conn, up)
	rec.BytesUp, rec.BytesDown, rec.Duration = upN+early, downN, time.Since(start)
	p.record(rec)
}

// relay copies both ways until both directions end, passing each end of
// stream on, and closes both connections. It returns the bytes copied
// from a to b and from b to a.
func relay(a, b net.Conn) (ab, ba int64) {
	var wg sync.WaitGroup
	wg.Go(func() {
		ab, _ = io.Copy(b, a)
		closeWrite(b)
	})
	ba, _ = io.Copy(a, b)
	closeWrite(a)
	wg.Wait()
	a.Close()
	b.Close()
	return ab, ba
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	c.Close()
}
