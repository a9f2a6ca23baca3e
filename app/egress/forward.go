package egress

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// forward decides and forwards one HTTP request (plain, or intercepted
// TLS): method limits, placeholders, the secret's substitution.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, t target, start time.Time) {
	pol := p.policy.Load()
	rec := Record{Time: start, Mode: ModeHTTP, Host: t.host, Port: t.port, Method: r.Method, Path: r.URL.Path}
	if t.connect {
		rec.Mode = ModeIntercept
	}
	d := pol.Decide(Request{Host: t.host, Port: t.port, Method: r.Method, Path: r.URL.Path, Connect: t.connect})
	rec.Rule = d.Rule
	if !d.Allowed {
		p.deny(w, rec, d, t)
		return
	}
	// Placeholders may leave only for their own host, over TLS, in any
	// part of the request: the target and headers are searched now, the
	// body as it streams (placeholderScanner).
	var own *Secret
	var cred *Credential
	if t.connect {
		own = pol.secretFor(t.host, t.port)
		cred = pol.credentialFor(t.host, t.port)
	}
	if s := pol.leak(own, r); s != nil {
		p.deny(w, rec, placeholderDecision(s, t), t)
		return
	}
	if !p.guardSwitch(w, r, t, &rec, pol, own) {
		return
	}
	if d.Stage != nil {
		p.hold(w, r, t, rec, d.Stage, own)
		return
	}
	// The secret's value is taken now, once per request: a Source may
	// have refreshed it since the last one.
	var value string
	if own != nil && carries(r.Header, own) {
		v, err := own.value(r.Context())
		if err != nil {
			p.noSecret(w, rec, own, t, err, start)
			return
		}
		value = v
	}
	body, scan, timeout := p.watchBody(w, r, pol, own)
	cw := &countingWriter{ResponseWriter: w}
	scheme := "http"
	if t.connect {
		scheme = "https"
	}
	// wrote is set once the request's headers (with the secret) were
	// written towards the upstream: until then no credential left.
	var wrote atomic.Bool
	r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }}))
	var proxyErr error
	inj := &injection{own: own, value: value}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &url.URL{Scheme: scheme, Host: t.String(), Path: pr.In.URL.Path, RawPath: pr.In.URL.RawPath, RawQuery: pr.In.URL.RawQuery}
			pr.Out.Host = hostHeader(t)
			if inj.put(pr.Out.Header) {
				rec.Secret = own.Name
			}
			cred.addTo(pr.Out.Header, &rec)
		},
		ModifyResponse: inj.scrub,
		Transport:      p.transport,
		// The default FlushInterval already flushes at once for
		// server-sent events and responses of unknown length.
		BufferPool: p.buffers,
		ErrorLog:   log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			proxyErr = err
			if scan != nil && scan.Found() != nil {
				return // denied below
			}
			if _, ok := guardDecision(err); ok {
				return // denied below
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusBadGateway)
			if timeout != nil && timeout.timedOut.Load() {
				fmt.Fprintf(w, "Airlock's egress proxy ended this request: %s.\n", timeout.reason())
				return
			}
			fmt.Fprintf(w, "Airlock's egress proxy could not reach %s: %v\n", t, err)
		},
	}
	rp.ServeHTTP(cw, r)
	rec.BytesUp, rec.BytesDown, rec.Duration = body.n.Load()+cw.up.Load(), cw.n+cw.down.Load(), time.Since(start)
	rec.SecretEchoed = inj.echoed()
	if rec.Secret != "" && !wrote.Load() {
		rec.SecretNotSent = true
	}
	if scan != nil && scan.Found() != nil {
		// The placeholder itself never left; the upstream saw at most
		// the start of a body it never got the end of.
		d := placeholderDecision(scan.Found(), t)
		if cw.status == 0 {
			p.deny(w, rec, d, t)
			return
		}
		rec.Allowed, rec.Status, rec.Rule, rec.Reason = false, cw.status, d.Rule, d.Reason
		p.record(rec)
		return
	}
	if d, ok := guardDecision(proxyErr); ok {
		p.deny(w, rec, d, t)
		return
	}
	rec.Allowed, rec.Status = true, cw.status
	switch {
	case timeout != nil && timeout.timedOut.Load():
		rec.Error = timeout.reason()
	case proxyErr != nil:
		rec.Error = proxyErr.Error()
	}
	p.record(rec)
}

// watchBody wraps the request's body, if it has one, to count it, end
// an upload that stalls and find foreign placeholders as it streams.
func (p *Proxy) watchBody(w http.ResponseWriter, r *http.Request, pol *Policy, own *Secret) (*countingReader, *placeholderScanner, *bodyTimeout) {
	body := &countingReader{r: r.Body}
	if r.Body == nil || r.Body == http.NoBody {
		return body, nil, nil
	}
	timeout := &bodyTimeout{r: r.Body, rc: http.NewResponseController(w), d: p.cfg.BodyTimeout}
	var in io.ReadCloser = timeout
	scan := newPlaceholderScanner(in, pol.foreign(own))
	if scan != nil {
		in = scan
	}
	body.r = in
	r.Body = body
	return body, scan, timeout
}

// guardSwitch keeps a request from carrying anything past what the
// proxy checks on its host. A connection switched to another protocol (a
// WebSocket) carries raw bytes both ways, past every method limit, stage
// and scan: it is refused (false, answered) unless the host has none of
// those, or a rule for it names UPGRADE. h2c is dropped instead (the
// client carries on in HTTP/1.1), and so are the headers that ask a
// server to take a request as another method. An allowed switch is noted
// in rec.
func (p *Proxy) guardSwitch(w http.ResponseWriter, r *http.Request, t target, rec *Record, pol *Policy, own *Secret) bool {
	guard := pol.guard(Request{Host: t.host, Port: t.port, Method: r.Method, Path: r.URL.Path, Connect: t.connect}, own)
	if up := upgradeOf(r.Header); up != "" {
		switch {
		case strings.EqualFold(up, "h2c") && guard != "":
			stripUpgrade(r.Header)
		case guard != "":
			p.deny(w, *rec, Decision{Rule: "upgrade " + up, Reason: fmt.Sprintf(
				"%s %s%s asks to switch the connection to %q, which would carry bytes past what Airlock checks on %s (%s); a rule naming UPGRADE allows it: \"%s (%s,UPGRADE)\"",
				r.Method, t, r.URL.Path, up, t, guard, t.host, r.Method)}, t)
			return false
		default:
			rec.Upgrade = up
		}
	}
	if guard != "" {
		for _, h := range methodOverrides {
			r.Header.Del(h)
		}
	}
	return true
}

// noSecret answers a request whose secret's value could not be had
// (err): it is not sent, and recorded so.
func (p *Proxy) noSecret(w http.ResponseWriter, rec Record, own *Secret, t target, err error, start time.Time) {
	rec.Allowed, rec.Secret, rec.SecretNotSent = true, own.Name, true
	rec.Status, rec.Error, rec.Duration = http.StatusBadGateway, err.Error(), time.Since(start)
	p.record(rec)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusBadGateway)
	fmt.Fprintf(w, "Airlock's egress proxy did not send this request to %s: %v\n", t, err)
}

// placeholderDecision denies a request that carries the placeholder of s
// to t.
func placeholderDecision(s *Secret, t target) Decision {
	return Decision{Rule: "placeholder " + s.Name,
		Reason: fmt.Sprintf("the request carries the placeholder of the secret %s, which Airlock sends to %s only (over HTTPS), never to %s", s.Name, s.Host, t)}
}

// hostHeader is the Host header for t: the host, with the port unless it
// is the scheme's default.
func hostHeader(t target) string {
	if t.connect && t.port == DefaultTLSPort || !t.connect && t.port == DefaultHTTPPort {
		if strings.Contains(t.host, ":") {
			return "[" + t.host + "]"
		}
		return t.host
	}
	return t.String()
}

// countingReader counts a request body as it is read (by the transport,
// which may still be reading when the handler records).
type countingReader struct {
	r io.ReadCloser
	n atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }

// countingWriter counts the response body and keeps its status; once
// hijacked for a switched protocol, it counts the bytes both ways.
type countingWriter struct {
	http.ResponseWriter
	status   int
	n        int64
	up, down atomic.Int64 // after a hijack
}

// Hijack hands over the guest's connection for a switched protocol
// (httputil.ReverseProxy after a 101), counting what crosses it.
func (c *countingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(c.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if c.status == 0 {
		c.status = http.StatusSwitchingProtocols
	}
	return &countingConn{Conn: conn, up: &c.up, down: &c.down}, brw, nil
}

// countingConn counts the bytes read from (up) and written to (down) a
// guest's connection.
type countingConn struct {
	net.Conn
	up, down *atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.up.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.down.Add(int64(n))
	return n, err
}

// upgradeOf is the protocol a request asks to switch to, as
// httputil.ReverseProxy reads it (Connection naming upgrade), or any
// Upgrade header at all: "" when it asks for none.
func upgradeOf(h http.Header) string {
	up := strings.TrimSpace(h.Get("Upgrade"))
	if up == "" && httpguts.HeaderValuesContainsToken(h["Connection"], "upgrade") {
		up = "(unnamed)"
	}
	return up
}

// stripUpgrade makes a request that asked to switch protocols an ordinary
// one.
func stripUpgrade(h http.Header) {
	h.Del("Upgrade")
	h.Del("HTTP2-Settings")
	h.Del("Connection")
}

// methodOverrides are the headers frameworks read as the request's real
// method (a GET a server takes as a DELETE): dropped on a host with a
// method limit or a stage.
var methodOverrides = []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"}

func (c *countingWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// bufferPool lends the copy buffers of forwarded bodies: larger than
// ReverseProxy's own 32 KiB, for fewer writes per megabyte.
type bufferPool struct{ p sync.Pool }

const copyBuffer = 256 << 10

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, copyBuffer)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
