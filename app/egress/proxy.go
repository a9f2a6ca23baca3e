package egress

import (
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
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Proxy. The zero value reaches upstreams by the
// host's DNS and routes, verifies TLS against the system roots, records
// nothing, and has the limits below.
type Config struct {
	// Resolve looks up the addresses of an upstream's host name; nil is
	// the host's DNS (never the guest's). Every address is checked by the
	// address guard before it is dialled.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to an upstream address (IP:port) that the guard let
	// through; nil is a net.Dialer. A Dial without Resolve is a whole
	// network of names (tests): it gets host names, and the guard, having
	// no addresses to check, does not apply.
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
	// Hold keeps a request a Stage holds and returns its number, which
	// the stage's reply may carry; an error refuses the request (503). It
	// is called from the request's goroutine, in the order requests are
	// read. Nil refuses every request a stage holds.
	Hold func(Held) (int, error)
	// AllowHint is the command, with %s for HOST[:PORT], that the 403
	// body suggests to allow a host; empty means
	// "airlock run --allow %s ...".
	AllowHint string
	// MaxConns caps the guest's connections open through the proxy at
	// once (tunnels, kept-alive connections, requests in flight): one more
	// is answered 503 and closed. Zero means DefaultMaxConns.
	MaxConns int
	// HeaderTimeout is how long a request's line and headers may take to
	// arrive; zero means DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection (plain HTTP, or
	// inside an intercepted host's TLS) may wait for its next request;
	// zero means DefaultIdleTimeout. An opaque tunnel has no idle limit.
	IdleTimeout time.Duration
	// BodyTimeout is how long a request body may go without a byte
	// arriving; the request is then ended. Zero means DefaultBodyTimeout.
	BodyTimeout time.Duration
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Defaults of Config's limits. 128 connections leave room for package
// managers' parallel downloads (pip, npm and cargo open 10 to 50) while
// bounding what one sandbox can hold open on the host.
const (
	DefaultMaxConns      = 128
	DefaultHeaderTimeout = 30 * time.Second
	DefaultIdleTimeout   = 2 * time.Minute
	DefaultBodyTimeout   = time.Minute
)

// Proxy is the host's egress proxy for one sandbox. Create it with New,
// run it with Serve; the policy may be swapped with SetPolicy at any time.
type Proxy struct {
	cfg       Config
	log       *slog.Logger
	policy    atomic.Pointer[Policy]
	transport *http.Transport
	inner     *connListener // TLS-terminated connections for the inner server
	buffers   httputil.BufferPool
	// localAddrs lists the host's own addresses for the guard.
	localAddrs func() []netip.Addr
	// conns counts the guest's connections (MaxConns); refusing, the 503
	// answers under way.
	conns, refusing atomic.Int64

	mu     sync.Mutex
	tunnel map[net.Conn]struct{} // hijacked connections, closed when Serve ends
	closed bool
	// handlers counts requests being handled: Serve returns only once
	// each has ended and been recorded.
	handlers sync.WaitGroup
}

// New returns a proxy enforcing pol. It starts nothing.
func New(cfg Config, pol *Policy) *Proxy {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.AllowHint == "" {
		cfg.AllowHint = "airlock run --allow %s ..."
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = DefaultHeaderTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if pol == nil {
		pol = &Policy{}
	}
	p := &Proxy{
		cfg:        cfg,
		log:        cfg.Logger,
		localAddrs: interfaceAddrs,
		transport: &http.Transport{
			Proxy:                 nil, // never a proxy of the host's environment
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
	p.transport.DialContext = p.dialUpstream
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
	front := &http.Server{
		Handler:           http.HandlerFunc(p.serveFront),
		ReadHeaderTimeout: p.cfg.HeaderTimeout,
		IdleTimeout:       p.cfg.IdleTimeout,
		ErrorLog:          errLog,
	}
	inner := &http.Server{
		Handler:           http.HandlerFunc(p.serveIntercepted),
		ReadHeaderTimeout: p.cfg.HeaderTimeout,
		IdleTimeout:       p.cfg.IdleTimeout,
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
	err := front.Serve(deadlineListener{Listener: l, p: p})
	// front ended: stop the rest as ctx would.
	front.Close()
	inner.Close()
	p.inner.Close()
	p.closeTunnels()
	wg.Wait()
	p.handlers.Wait()
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
	p.handlers.Add(1)
	defer p.handlers.Done()
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

// deny answers 403 with a body that tells the agent what happened and
// how the user can allow it, and records the request.
func (p *Proxy) deny(w http.ResponseWriter, rec Record, d Decision, t target) {
	rec.Allowed, rec.Rule, rec.Reason, rec.Status = false, d.Rule, d.Reason, http.StatusForbidden
	var b strings.Builder
	fmt.Fprintf(&b, "Airlock blocked this request: %s.\n\n", d.Reason)
	b.WriteString("This sandbox reaches the network only through Airlock's proxy on the host, which allows the hosts on its allow-list and nothing else.\n")
	switch {
	case strings.HasPrefix(d.Rule, "placeholder"):
	case d.MethodLimit && d.registry != "":
		fmt.Fprintf(&b, "The @%s preset allows reading only. If this should be allowed, ask the user to add a rule of its own for %s with the methods it needs ([[network.host]] with host = %q and methods = [...] in their Airlock configuration, ~/.config/airlock/config.toml).\n", d.registry, t.host, t.String())
	case d.MethodLimit:
		fmt.Fprintf(&b, "If it should be allowed, ask the user to add %s to the methods of that rule (methods = [...] of its [[network.host]] in their Airlock configuration, ~/.config/airlock/config.toml).\n", rec.Method)
	default:
		allow := t.host
		if d.allow != "" {
			allow = d.allow
		}
		if strings.Contains(allow, ":") {
			allow = "[" + allow + "]"
		}
		if (t.connect && t.port != DefaultTLSPort) || (!t.connect && t.port != DefaultHTTPPort) {
			allow += ":" + strconv.Itoa(t.port)
		}
		fmt.Fprintf(&b, "If it should be allowed, ask the user to run the sandbox with\n    "+p.cfg.AllowHint+"\nor to add %q to [network] allow in their Airlock configuration (~/.config/airlock/config.toml).\n", allow, allow)
	}
	// Recorded before the guest sees the answer, so that the user's line
	// comes first.
	rec.Duration = time.Since(rec.Time)
	p.record(rec)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Airlock-Denied", d.Rule)
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusForbidden)
	_, _ = io.WriteString(w, b.String())
}

// unreachable answers 502 when an allowed host cannot be reached, or 403
// when the address guard refused where its name leads.
func (p *Proxy) unreachable(w http.ResponseWriter, rec Record, t target, err error) {
	if d, ok := guardDecision(err); ok {
		p.deny(w, rec, d, t)
		return
	}
	rec.Allowed, rec.Status, rec.Error, rec.Duration = true, http.StatusBadGateway, err.Error(), time.Since(rec.Time)
	http.Error(w, fmt.Sprintf("Airlock's egress proxy could not reach %s: %v", t, err), http.StatusBadGateway)
	p.record(rec)
}

// guardDecision is the denial for an error of the address guard.
func guardDecision(err error) (Decision, bool) {
	var g *guardError
	if !errors.As(err, &g) {
		return Decision{}, false
	}
	return Decision{Rule: "address guard", Reason: g.Error(), allow: g.refused[0].addr.String()}, true
}
