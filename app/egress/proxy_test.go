package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testNet is the host's DNS and routes for tests: names resolve to
// addresses (each test name to one of its own in 203.0.113.0/24, a
// documentation range the address guard lets through, unless point says
// otherwise), and an address:port dials a local server. It logs every
// address dialled.
type testNet struct {
	mu    sync.Mutex
	addrs map[string][]netip.Addr // host → what it resolves to
	names map[string]string       // address:port → 127.0.0.1:port
	next  byte
	dials []string
}

// add makes host:port (a name or an address) lead to the local server at
// addr.
func (n *testNet) add(hostport, addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		panic(err)
	}
	if n.addrs == nil {
		n.addrs, n.names = map[string][]netip.Addr{}, map[string]string{}
	}
	ips := []netip.Addr{}
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = append(ips, ip)
	} else {
		if n.addrs[host] == nil {
			n.next++
			n.addrs[host] = []netip.Addr{netip.AddrFrom4([4]byte{203, 0, 113, n.next})}
		}
		ips = n.addrs[host]
	}
	for _, ip := range ips {
		n.names[net.JoinHostPort(ip.String(), port)] = addr
	}
}

// point makes host resolve to addrs.
func (n *testNet) point(host string, addrs ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.addrs == nil {
		n.addrs, n.names = map[string][]netip.Addr{}, map[string]string{}
	}
	n.addrs[host] = nil
	for _, a := range addrs {
		n.addrs[host] = append(n.addrs[host], netip.MustParseAddr(a))
	}
}

func (n *testNet) resolve(_ context.Context, host string) ([]netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ips, ok := n.addrs[host]; ok {
		return ips, nil
	}
	return nil, &net.DNSError{Err: "no such host (test)", Name: host, IsNotFound: true}
}

func (n *testNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	to, ok := n.names[addr]
	n.dials = append(n.dials, addr)
	n.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("dial %s: no route (test)", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

func (n *testNet) dialled() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.dials...)
}

// harness is a proxy on a loopback listener, its records, and an upstream
// pool for intercepted hosts.
type harness struct {
	proxy   *Proxy
	url     *url.URL
	net     *testNet
	ca      *CA
	roots   *x509.CertPool // upstream roots (the test servers')
	mu      sync.Mutex
	records []Record
}

func newHarness(t *testing.T, pol *Policy) *harness {
	return newHarnessConfig(t, pol, Config{})
}

// newHarnessConfig is newHarness with the limits of cfg.
func newHarnessConfig(t *testing.T, pol *Policy, cfg Config) *harness {
	t.Helper()
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{net: &testNet{}, ca: ca, roots: x509.NewCertPool()}
	cfg.Resolve, cfg.Dial, cfg.RootCAs, cfg.CA = h.net.resolve, h.net.dial, h.roots, ca
	cfg.Record = func(r Record) { h.mu.Lock(); h.records = append(h.records, r); h.mu.Unlock() }
	h.proxy = New(cfg, pol)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// Connections without deadlines, as the SSH channels the guest's
	// connections arrive on.
	go func() { done <- h.proxy.Serve(ctx, noDeadlines{l}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	h.url = &url.URL{Scheme: "http", Host: l.Addr().String()}
	return h
}

// client is the guest's HTTP client: through the proxy, trusting the
// sandbox CA only.
func (h *harness) client() *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(h.ca.Certificate())
	return &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(h.url),
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}, Timeout: 10 * time.Second}
}

func (h *harness) last(t *testing.T) Record {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.records) == 0 {
		t.Fatal("no record")
	}
	return h.records[len(h.records)-1]
}

// waitRecords waits for n records (a tunnel is recorded when it closes).
func (h *harness) waitRecords(t *testing.T, n int) []Record {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.mu.Lock()
		got := append([]Record(nil), h.records...)
		h.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records, want %d: %+v", len(got), n, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestPlainHTTP(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s %s %s", r.Method, r.Host, r.URL.Path)
	}))
	defer up.Close()
	h := newHarness(t, &Policy{Allow: []Rule{mustRule(t, "allowed.test"), mustRule(t, "readonly.test", "GET")}})
	h.net.add("allowed.test:80", up.Listener.Addr().String())
	h.net.add("readonly.test:80", up.Listener.Addr().String())
	h.net.add("denied.test:80", up.Listener.Addr().String())
	c := h.client()

	if code, body := get(t, c, "http://allowed.test/x?token=1"); code != 200 || body != "hello GET allowed.test /x" {
		t.Errorf("allowed: %d %q", code, body)
	}
	r := h.last(t)
	if !r.Allowed || r.Mode != ModeHTTP || r.Host != "allowed.test" || r.Port != 80 || r.Path != "/x" || r.Status != 200 || r.BytesDown != int64(len("hello GET allowed.test /x")) {
		t.Errorf("record: %+v", r)
	}

	code, body := get(t, c, "http://denied.test/")
	if code != 403 || !strings.Contains(body, "denied.test:80 is not on this sandbox's network allow-list") || !strings.Contains(body, "airlock run --allow denied.test") {
		t.Errorf("denied: %d %q", code, body)
	}
	if r := h.last(t); r.Allowed || r.Rule != "default deny" || r.Status != 403 {
		t.Errorf("record: %+v", r)
	}

	if code, _ := get(t, c, "http://readonly.test/"); code != 200 {
		t.Errorf("GET on a GET-only host: %d", code)
	}
	resp, err := c.Post("http://readonly.test/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(b), "allows GET only") {
		t.Errorf("POST on a GET-only host: %d %q", resp.StatusCode, b)
	}

	// A policy swapped in while serving applies to the next request.
	h.proxy.SetPolicy(&Policy{})
	if code, _ := get(t, c, "http://allowed.test/"); code != 403 {
		t.Errorf("after SetPolicy(deny all): %d", code)
	}

	// Not a proxy request.
	resp, err = http.Get(h.url.String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("direct request to the proxy: %d", resp.StatusCode)
	}
}

func TestTunnel(t *testing.T) {
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls hello, key %q", r.Header.Get("X-Api-Key"))
	}))
	defer up.Close()
	h := newHarness(t, &Policy{Allow: []Rule{mustRule(t, "tunnel.test")}})
	h.net.add("tunnel.test:443", up.Listener.Addr().String())
	h.net.add("nope.test:443", up.Listener.Addr().String())
	c := h.client()
	// The guest verifies the upstream itself: the tunnel is opaque.
	c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: poolOf(up.Certificate()), ServerName: "example.com"}
	if code, body := get(t, c, "https://tunnel.test/"); code != 200 || !strings.HasPrefix(body, "tls hello") {
		t.Errorf("tunnel: %d %q", code, body)
	}
	c.CloseIdleConnections()
	recs := h.waitRecords(t, 1)
	if r := recs[0]; !r.Allowed || r.Mode != ModeTunnel || r.Method != "CONNECT" || r.BytesUp == 0 || r.BytesDown == 0 {
		t.Errorf("tunnel record: %+v", r)
	}
	if _, err := c.Get("https://nope.test/"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("CONNECT to a denied host: %v", err)
	}
}

func poolOf(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

func TestInterceptSubstitutesSecret(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "got %s %s %d", r.Method, r.Host, len(b))
	}))
	up.StartTLS()
	defer up.Close()
	ph, _ := NewPlaceholder()
	ph2, _ := NewPlaceholder()
	pol := &Policy{
		Allow: []Rule{mustRule(t, "other.test"), mustRule(t, "plain.test")},
		Secrets: []Secret{
			{Host: "api.secret.test", Header: "x-api-key", Name: "API_KEY", Value: "sk-real-value", Placeholder: ph},
			{Host: "bearer.test", Header: "Authorization", Name: "TOKEN", Value: "tok-real", Placeholder: ph2},
		},
	}
	h := newHarness(t, pol)
	h.roots.AddCert(up.Certificate())
	// httptest's certificate is for example.com: the proxy verifies the
	// upstream under the name it dials, so map names the certificate has.
	h.net.add("api.secret.test:443", up.Listener.Addr().String())
	h.net.add("bearer.test:443", up.Listener.Addr().String())
	h.net.add("other.test:443", up.Listener.Addr().String())
	h.net.add("plain.test:80", strings.TrimPrefix(httptest.NewServer(http.NotFoundHandler()).URL, "http://"))
	c := h.client()

	req, _ := http.NewRequest("POST", "https://api.secret.test/v1/messages", strings.NewReader(`{"x":1}`))
	req.Header.Set("X-Api-Key", ph)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The upstream's certificate does not name api.secret.test: the
	// proxy verifies it and refuses.
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "certificate") {
		t.Fatalf("upstream with a certificate for another name: %d %q; want 502 for the verification failure", resp.StatusCode, b)
	}

	// Now an upstream with a certificate for the names, signed by a root
	// the proxy trusts.
	upCA, err := NewCA("upstream")
	if err != nil {
		t.Fatal(err)
	}
	good := httptest.NewUnstartedServer(up.Config.Handler)
	good.TLS = &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) { return upCA.Leaf(hi.ServerName) }}
	good.StartTLS()
	defer good.Close()
	h.roots.AddCert(upCA.Certificate())
	h.proxy.transport.CloseIdleConnections()
	h.net.add("api.secret.test:443", good.Listener.Addr().String())
	h.net.add("bearer.test:443", good.Listener.Addr().String())

	req, _ = http.NewRequest("POST", "https://api.secret.test/v1/messages", strings.NewReader(`{"x":1}`))
	req.Header.Set("X-Api-Key", ph)
	req.Header.Set("Host", "elsewhere.test")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "got POST api.secret.test 7" {
		t.Fatalf("intercepted: %d %q", resp.StatusCode, b)
	}
	mu.Lock()
	if got := seen[len(seen)-1].Get("X-Api-Key"); got != "sk-real-value" {
		t.Errorf("upstream saw x-api-key %q, want the real secret", got)
	}
	mu.Unlock()
	r := h.last(t)
	if !r.Allowed || r.Mode != ModeIntercept || r.Secret != "API_KEY" || r.Path != "/v1/messages" || r.Method != "POST" || r.BytesUp != 7 {
		t.Errorf("record: %+v", r)
	}
	if strings.Contains(fmt.Sprintf("%+v", h.records), "sk-real-value") {
		t.Error("a record holds the secret")
	}

	// Bearer: the scheme around the placeholder is kept.
	req, _ = http.NewRequest("GET", "https://bearer.test/", nil)
	req.Header.Set("Authorization", "Bearer "+ph2)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	if got := seen[len(seen)-1].Get("Authorization"); got != "Bearer tok-real" {
		t.Errorf("upstream saw Authorization %q", got)
	}
	mu.Unlock()

	// The placeholder of one secret to the other secret's host: blocked.
	before := len(seen)
	req, _ = http.NewRequest("GET", "https://bearer.test/", nil)
	req.Header.Set("Authorization", "Bearer "+ph)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(b), "placeholder of the secret API_KEY") {
		t.Errorf("cross-secret placeholder: %d %q", resp.StatusCode, b)
	}
	if len(seen) != before {
		t.Error("the blocked request reached the upstream")
	}

	// In a plain HTTP request's body, and its URL: blocked.
	resp, err = c.Post("http://plain.test/upload", "text/plain", strings.NewReader("key="+ph))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || h.last(t).Rule != "placeholder API_KEY" {
		t.Errorf("placeholder in a plain body: %d %+v", resp.StatusCode, h.last(t))
	}
	if code, _ := get(t, c, "http://plain.test/?k="+ph2); code != 403 {
		t.Errorf("placeholder in a URL: %d", code)
	}
	// To the secret's own host over plain HTTP: denied (no substitution
	// in the clear, and no rule allows it).
	if code, _ := get(t, c, "http://api.secret.test/"); code != 403 {
		t.Errorf("plain HTTP to the secret's host: %d", code)
	}
}

// FuzzSplitTarget: the only parsing of the guest's input done here (the
// rest is net/http's).
func FuzzSplitTarget(f *testing.F) {
	for _, s := range []string{"a.b:80", "[::1]:443", "host", "[::1]", ":80", "h:99999", "h:-1", "[]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		host, port, err := splitTarget(s, 443)
		if err != nil {
			return
		}
		if host == "" || port < 1 || port > 65535 {
			t.Fatalf("splitTarget(%q) = %q, %d", s, host, port)
		}
	})
}

// noDeadlines is a listener whose connections refuse deadlines, like
// x/crypto/ssh's forwarded channels.
type noDeadlines struct{ net.Listener }

func (l noDeadlines) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return noDeadlineConn{c}, nil
}

type noDeadlineConn struct{ net.Conn }

func (noDeadlineConn) SetDeadline(time.Time) error      { return errNoDeadline }
func (noDeadlineConn) SetReadDeadline(time.Time) error  { return errNoDeadline }
func (noDeadlineConn) SetWriteDeadline(time.Time) error { return errNoDeadline }

var errNoDeadline = fmt.Errorf("deadline not supported")

// TestSecretSource: a secret with a Source gets its value at each
// request (a token refreshed during the run), one credential may go to
// two hosts under one placeholder, and a failing Source sends nothing.
func TestSecretSource(t *testing.T) {
	up, upCA, seen := authUpstream(t)
	defer up.Close()

	var token atomic.Value
	token.Store("tok-1")
	var fail atomic.Bool
	source := func(ctx context.Context) (string, error) {
		if fail.Load() {
			return "", errors.New("the sign-in expired: sign in again")
		}
		return token.Load().(string), nil
	}
	ph, _ := NewPlaceholder()
	pol := &Policy{Secrets: []Secret{
		{Host: "a.test", Header: "Authorization", Name: "TOKEN", Source: source, Placeholder: ph},
		{Host: "b.test", Header: "Authorization", Name: "TOKEN", Source: source, Placeholder: ph},
	}}
	if err := pol.Validate(); err != nil {
		t.Fatalf("a policy of secrets with a Source: %v", err)
	}
	if env := pol.GuestEnv(); len(env) != 1 || env["TOKEN"] != ph {
		t.Errorf("GuestEnv = %v, want TOKEN=%s only", env, ph)
	}
	h := newHarness(t, pol)
	h.roots.AddCert(upCA.Certificate())
	h.net.add("a.test:443", up.Listener.Addr().String())
	h.net.add("b.test:443", up.Listener.Addr().String())
	c := h.client()
	do := func(u string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+ph)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if code, body := do("https://a.test/x"); code != 200 {
		t.Fatalf("first request: %d %s", code, body)
	}
	token.Store("tok-2") // refreshed on the host
	if code, body := do("https://a.test/x"); code != 200 {
		t.Fatalf("second request: %d %s", code, body)
	}
	if code, body := do("https://b.test/y"); code != 200 {
		t.Fatalf("the second host: %d %s", code, body)
	}
	want := []string{"a.test Bearer tok-1", "a.test Bearer tok-2", "b.test Bearer tok-2"}
	if got := seen(); !slices.Equal(got, want) {
		t.Errorf("the upstream saw %q, want %q", got, want)
	}
	if r := h.last(t); r.Secret != "TOKEN" || r.SecretNotSent || r.Status != 200 {
		t.Errorf("record %+v: want TOKEN substituted, 200", r)
	}

	fail.Store(true)
	code, body := do("https://a.test/x")
	if code != http.StatusBadGateway || !strings.Contains(body, "sign in again") {
		t.Errorf("a failing source: %d %q, want 502 with its error", code, body)
	}
	if got := seen(); len(got) != 3 {
		t.Errorf("a request went upstream without its secret: %q", got[3:])
	}
	if r := h.last(t); r.Secret != "TOKEN" || !r.SecretNotSent || r.Status != http.StatusBadGateway || !strings.Contains(r.Error, "sign in again") {
		t.Errorf("record %+v: want TOKEN not sent, 502, the source's error", r)
	}
}

// TestCredentials: a registry's sign-in is added to its hosts' requests
// that carry no Authorization, over TLS, and nowhere else; a request with
// its own (a token) keeps it.
func TestCredentials(t *testing.T) {
	up, upCA, seen := authUpstream(t)
	allow := func(s string) Rule {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	pol := &Policy{
		Allow:       []Rule{allow("reg.test:443 (GET,HEAD)"), allow("auth.reg.test:443 (GET)"), allow("other.test:443 (GET)")},
		Credentials: []Credential{{Hosts: []string{"reg.test", "auth.reg.test"}, Authorization: "Basic dXNlcjpwYXNz", Name: "registry credentials for reg.test"}},
	}
	h := newHarness(t, pol)
	h.roots.AddCert(upCA.Certificate())
	for _, host := range []string{"reg.test:443", "auth.reg.test:443", "other.test:443"} {
		h.net.add(host, up.Listener.Addr().String())
	}
	c := h.client()
	get := func(u, auth string) {
		t.Helper()
		req, _ := http.NewRequest("GET", u, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", u, resp.StatusCode)
		}
	}
	get("https://auth.reg.test/token?scope=pull", "")
	if r := h.last(t); r.Secret != "registry credentials for reg.test" {
		t.Errorf("record %+v: want the credential named", r)
	}
	get("https://reg.test/v2/x/manifests/1", "Bearer tok")
	get("https://other.test/", "")
	want := []string{"auth.reg.test Basic dXNlcjpwYXNz", "reg.test Bearer tok", "other.test "}
	if got := seen(); !slices.Equal(got, want) {
		t.Errorf("the upstream saw %q, want %q", got, want)
	}
}

// authUpstream is a TLS upstream for any name (its CA's), answering "ok";
// seen gives the host and Authorization of each request it got.
func authUpstream(t *testing.T) (up *httptest.Server, ca *CA, seen func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	ca, err := NewCA("upstream")
	if err != nil {
		t.Fatal(err)
	}
	up = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Host+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	up.TLS = &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) { return ca.Leaf(hi.ServerName) }}
	up.StartTLS()
	t.Cleanup(up.Close)
	return up, ca, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}
