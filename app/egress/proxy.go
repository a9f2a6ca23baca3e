package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Modes of a Record.
const (
	ModeHTTP      = "http"      // a plain HTTP request through the proxy
	ModeTunnel    = "tunnel"    // a CONNECT tunnel relayed as bytes
	ModeIntercept = "intercept" // a request inside a CONNECT whose TLS the proxy terminated
)

// Record is one request through the proxy, allowed or denied: what the
// audit log keeps and the CLI shows.
type Record struct {
	Time time.Time `json:"time"`
	Mode string    `json:"mode"`
	Host string    `json:"host"`
	Port int       `json:"port"`
	// Method is the HTTP method, CONNECT for a tunnel.
	Method string `json:"method"`
	// Path is the URL path of a plain or intercepted request (never the
	// query, which may carry tokens); empty for a tunnel.
	Path string `json:"path,omitempty"`
	// Status is the HTTP status the guest got (0 when the connection
	// broke before one).
	Status int `json:"status,omitempty"`
	// BytesUp and BytesDown count body bytes (stream bytes for a tunnel).
	BytesUp   int64         `json:"bytes_up"`
	BytesDown int64         `json:"bytes_down"`
	Duration  time.Duration `json:"duration_ns"`
	// Allowed is the decision; Rule the rule (or reason) that made it.
	Allowed bool   `json:"allowed"`
	Rule    string `json:"rule"`
	Reason  string `json:"reason,omitempty"`
	// Secret names the secret substituted into the request, if any.
	Secret string `json:"secret,omitempty"`
	Error  string `json:"error,omitempty"`
}

// String is the record as one line for people.
func (r Record) String() string {
	target := net.JoinHostPort(r.Host, strconv.Itoa(r.Port))
	verdict := "allowed"
	if !r.Allowed {
		verdict = "DENIED"
	}
	s := fmt.Sprintf("%s %s %s%s", verdict, r.Method, target, r.Path)
	if r.Status != 0 {
		s += fmt.Sprintf(" → %d", r.Status)
	}
	if r.Allowed {
		s += fmt.Sprintf(" (%s up, %s down, %s; %s)", size(r.BytesUp), size(r.BytesDown), r.Duration.Round(time.Millisecond), r.Rule)
	} else {
		s += ": " + r.Reason
	}
	if r.Secret != "" {
		s += " [" + r.Secret + " substituted]"
	}
	if r.Error != "" {
		s += " error: " + r.Error
	}
	return s
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Config configures a Proxy. The zero value reaches upstreams by the
// host's DNS and routes, verifies TLS against the system roots and
// records nothing.
type Config struct {
	// Dial connects to an upstream; nil is a net.Dialer (names resolved
	// on the host, never in the guest).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// RootCAs verifies upstream certificates of intercepted hosts; nil
	// means the system roots.
	RootCAs *x509.CertPool
	// CA mints the certificates of hosts with a secret. A policy with
	// secrets needs one: without it such hosts are refused.
	CA *CA
	// Record receives every request, allowed or denied. It is called
	// from the request's goroutine.
	Record func(Record)
	// AllowHint is the command, with %s for HOST[:PORT], that the 403
	// body suggests to allow a host; empty means
	// "airlock run --allow %s ...".
	AllowHint string
	// MaxBodyScan caps how much of a request body is searched for
	// placeholders of secrets; zero means 1 MiB.
	MaxBodyScan int
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

const defaultBodyScan = 1 << 20

// Proxy is the host's egress proxy for one sandbox. Create it with New,
// run it with Serve; the policy may be swapped with SetPolicy at any time.
type Proxy struct {
	cfg       Config
	log       *slog.Logger
	policy    atomic.Pointer[Policy]
	transport *http.Transport
	inner     *connListener // TLS-terminated connections for the inner server
	buffers   httputil.BufferPool

	mu     sync.Mutex
	tunnel map[net.Conn]struct{} // hijacked connections, closed when Serve ends
	closed bool
}

// New returns a proxy enforcing pol. It starts nothing.
func New(cfg Config, pol *Policy) *Proxy {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Dial == nil {
		cfg.Dial = guardedDial
	}
	if cfg.AllowHint == "" {
		cfg.AllowHint = "airlock run --allow %s ..."
	}
	if cfg.MaxBodyScan == 0 {
		cfg.MaxBodyScan = defaultBodyScan
	}
	if pol == nil {
		pol = &Policy{}
	}
	p := &Proxy{
		cfg: cfg,
		log: cfg.Logger,
		transport: &http.Transport{
			Proxy:                 nil, // never a proxy of the host's environment
			DialContext:           cfg.Dial,
			TLSClientConfig:       &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout:   30 * time.Second,
			ForceAttemptHTTP2:     true,
			MaxIdleConnsPerHost:   8,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		inner:   newConnListener(),
		buffers: &bufferPool{},
		tunnel:  map[net.Conn]struct{}{},
	}
	p.policy.Store(pol)
	return p
}

// SetPolicy replaces the policy; requests that start after it use the
// new one (a tunnel already open stays open).
func (p *Proxy) SetPolicy(pol *Policy) {
	if pol == nil {
		pol = &Policy{}
	}
	p.policy.Store(pol)
}

// Policy returns the policy in force.
func (p *Proxy) Policy() *Policy { return p.policy.Load() }

// Serve serves proxy connections accepted on l until ctx ends, then
// closes l and every connection it carries, and returns nil. It returns
// the accept error if l fails first. Serve is called once.
func (p *Proxy) Serve(ctx context.Context, l net.Listener) error {
	errLog := log.New(io.Discard, "", 0)
	front := &http.Server{Handler: http.HandlerFunc(p.serveFront), ReadHeaderTimeout: time.Minute, ErrorLog: errLog}
	inner := &http.Server{
		Handler:           http.HandlerFunc(p.serveIntercepted),
		ReadHeaderTimeout: time.Minute,
		ErrorLog:          errLog,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if ic, ok := c.(*interceptedConn); ok {
				return context.WithValue(ctx, targetKey{}, ic.target)
			}
			return ctx
		},
	}
	stop := context.AfterFunc(ctx, func() {
		front.Close()
		inner.Close()
		p.inner.Close()
		p.closeTunnels()
	})
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { _ = inner.Serve(p.inner) })
	err := front.Serve(deadlineListener{l})
	// front ended: stop the rest as ctx would.
	front.Close()
	inner.Close()
	p.inner.Close()
	p.closeTunnels()
	wg.Wait()
	p.transport.CloseIdleConnections()
	if ctx.Err() != nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("egress proxy: %w", err)
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.tunnel[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.tunnel, c)
	p.mu.Unlock()
}

func (p *Proxy) closeTunnels() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for c := range p.tunnel {
		c.Close()
	}
}

func (p *Proxy) record(r Record) {
	p.log.Debug("egress", "record", r.String())
	if p.cfg.Record != nil {
		p.cfg.Record(r)
	}
}

// target is where a request goes.
type target struct {
	host    string
	port    int
	connect bool // came through CONNECT (TLS)
}

func (t target) String() string { return net.JoinHostPort(t.host, strconv.Itoa(t.port)) }

type targetKey struct{}

// splitTarget splits host[:port], with def when there is no port, and
// checks the host is a host name or an IP address.
func splitTarget(hostport string, def int) (string, int, error) {
	host, port, err := net.SplitHostPort(hostport)
	n := def
	if err != nil {
		// No port.
		host = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
	} else if n, err = strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", hostport)
	}
	host = normHost(host)
	if strings.HasPrefix(host, "*") || checkHostPattern(host) != nil {
		return "", 0, fmt.Errorf("bad host in %q", hostport)
	}
	return host, n, nil
}

// serveFront handles what the guest sends to the proxy: CONNECT, or a
// plain HTTP request with an absolute URL.
func (p *Proxy) serveFront(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method == http.MethodConnect {
		p.connect(w, r, start)
		return
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" {
		msg := "This is Airlock's egress proxy: send it HTTP proxy requests (an absolute http:// URL) or CONNECT for HTTPS.\n"
		if r.URL.Scheme == "https" {
			msg = "Send HTTPS through CONNECT (HTTPS_PROXY), not as an https:// URL to the proxy.\n"
		}
		http.Error(w, msg, http.StatusBadRequest)
		p.record(Record{Time: start, Mode: ModeHTTP, Host: r.URL.Hostname(), Method: r.Method, Path: r.URL.Path, Status: http.StatusBadRequest, Rule: "malformed", Reason: "not a proxy request"})
		return
	}
	host, port, err := splitTarget(r.URL.Host, DefaultHTTPPort)
	if err != nil {
		http.Error(w, "Airlock's egress proxy: "+err.Error()+"\n", http.StatusBadRequest)
		return
	}
	p.forward(w, r, target{host: host, port: port}, start)
}

// connect handles CONNECT: denied, intercepted (a host with a secret) or
// relayed as bytes.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request, start time.Time) {
	host, port, err := splitTarget(r.Host, DefaultTLSPort)
	if err != nil {
		http.Error(w, "Airlock's egress proxy: "+err.Error()+"\n", http.StatusBadRequest)
		return
	}
	t := target{host: host, port: port, connect: true}
	rec := Record{Time: start, Mode: ModeTunnel, Host: host, Port: port, Method: http.MethodConnect}
	pol := p.policy.Load()
	d := pol.Decide(Request{Host: host, Port: port, Method: http.MethodConnect, Connect: true})
	rec.Rule = d.Rule
	if !d.Allowed {
		p.deny(w, rec, d, t)
		return
	}
	if s := pol.secretFor(host, port); s != nil {
		p.intercept(w, t, rec)
		return
	}
	up, err := p.cfg.Dial(r.Context(), "tcp", t.String())
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

// intercept terminates the guest's TLS with a certificate from the
// sandbox's CA and hands the connection to the inner server, which
// forwards each request over real, verified TLS.
func (p *Proxy) intercept(w http.ResponseWriter, t target, rec Record) {
	rec.Mode = ModeIntercept
	if p.cfg.CA == nil {
		d := Decision{Rule: "no CA", Reason: fmt.Sprintf("%s has a secret but this proxy has no CA to terminate its TLS", t)}
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
	t, ok := r.Context().Value(targetKey{}).(target)
	if !ok {
		http.Error(w, "no target", http.StatusInternalServerError)
		return
	}
	p.forward(w, r, t, time.Now())
}

// forward decides and forwards one HTTP request (plain, or intercepted
// TLS): method limits, placeholders, the secret's substitution.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, t target, start time.Time) {
	pol := p.policy.Load()
	rec := Record{Time: start, Mode: ModeHTTP, Host: t.host, Port: t.port, Method: r.Method, Path: r.URL.Path}
	if t.connect {
		rec.Mode = ModeIntercept
	}
	d := pol.Decide(Request{Host: t.host, Port: t.port, Method: r.Method, Connect: t.connect})
	rec.Rule = d.Rule
	if !d.Allowed {
		p.deny(w, rec, d, t)
		return
	}
	// Placeholders may leave only for their own host, over TLS, in any
	// part of the request; the body is searched up to MaxBodyScan.
	var own *Secret
	if t.connect {
		own = pol.secretFor(t.host, t.port)
	}
	var prefix []byte
	if r.Body != nil && r.Body != http.NoBody && len(pol.Secrets) > 0 {
		var err error
		prefix, err = io.ReadAll(io.LimitReader(r.Body, int64(p.cfg.MaxBodyScan)))
		if err != nil {
			rec.Allowed, rec.Error = true, "read request body: "+err.Error()
			p.record(rec)
			return
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(prefix), r.Body), r.Body}
	}
	if s := pol.leak(own, r, prefix); s != nil {
		p.deny(w, rec, Decision{Rule: "placeholder " + s.Name,
			Reason: fmt.Sprintf("the request carries the placeholder of the secret %s, which Airlock sends to %s only (over HTTPS), never to %s", s.Name, s.Host, t)}, t)
		return
	}
	body := &countingReader{r: r.Body}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = body
	}
	cw := &countingWriter{ResponseWriter: w}
	scheme := "http"
	if t.connect {
		scheme = "https"
	}
	var proxyErr error
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &url.URL{Scheme: scheme, Host: t.String(), Path: pr.In.URL.Path, RawPath: pr.In.URL.RawPath, RawQuery: pr.In.URL.RawQuery}
			pr.Out.Host = hostHeader(t)
			if own != nil && substitute(pr.Out.Header, own) {
				rec.Secret = own.Name
			}
		},
		Transport: p.transport,
		// The default FlushInterval already flushes at once for
		// server-sent events and responses of unknown length.
		BufferPool: p.buffers,
		ErrorLog:   log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			proxyErr = err
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, "Airlock's egress proxy could not reach %s: %v\n", t, err)
		},
	}
	rp.ServeHTTP(cw, r)
	rec.Allowed, rec.Status = true, cw.status
	rec.BytesUp, rec.BytesDown, rec.Duration = body.n, cw.n, time.Since(start)
	if proxyErr != nil {
		rec.Error = proxyErr.Error()
	}
	p.record(rec)
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

// deny answers 403 with a body that tells the agent what happened and
// how the user can allow it, and records the request.
func (p *Proxy) deny(w http.ResponseWriter, rec Record, d Decision, t target) {
	rec.Allowed, rec.Rule, rec.Reason, rec.Status = false, d.Rule, d.Reason, http.StatusForbidden
	var b strings.Builder
	fmt.Fprintf(&b, "Airlock blocked this request: %s.\n\n", d.Reason)
	b.WriteString("This sandbox reaches the network only through Airlock's proxy on the host, which allows the hosts on its allow-list and nothing else.\n")
	if !strings.HasPrefix(d.Rule, "placeholder") {
		allow := t.host
		if strings.Contains(allow, ":") {
			allow = "[" + allow + "]"
		}
		if (t.connect && t.port != DefaultTLSPort) || (!t.connect && t.port != DefaultHTTPPort) {
			allow += ":" + strconv.Itoa(t.port)
		}
		fmt.Fprintf(&b, "If it should be allowed, ask the user to run the sandbox with\n    "+p.cfg.AllowHint+"\nor to add %q to [network] allow in their Airlock configuration (~/.config/airlock/config.toml).\n", allow, allow)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Airlock-Denied", d.Rule)
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusForbidden)
	_, _ = io.WriteString(w, b.String())
	rec.Duration = time.Since(rec.Time)
	p.record(rec)
}

// unreachable answers 502 when an allowed host cannot be reached.
func (p *Proxy) unreachable(w http.ResponseWriter, rec Record, t target, err error) {
	rec.Allowed, rec.Status, rec.Error, rec.Duration = true, http.StatusBadGateway, err.Error(), time.Since(rec.Time)
	http.Error(w, fmt.Sprintf("Airlock's egress proxy could not reach %s: %v", t, err), http.StatusBadGateway)
	p.record(rec)
}

// countingReader counts a request body as it is read.
type countingReader struct {
	r io.ReadCloser
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }

// countingWriter counts the response body and keeps its status.
type countingWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

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
