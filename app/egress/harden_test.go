package egress

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// upstreamTLS is an HTTPS server with certificates for any name, signed
// by a CA the harness's proxy trusts, that counts what reaches it.
func upstreamTLS(t *testing.T, h *harness, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	upCA, err := NewCA("upstream")
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewUnstartedServer(handler)
	up.TLS = &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) { return upCA.Leaf(hi.ServerName) }}
	up.StartTLS()
	t.Cleanup(up.Close)
	h.roots.AddCert(upCA.Certificate())
	return up
}

// TestSecretDoesNotLiftMethodLimits: api.github.com is allowed for GET and
// HEAD, and has a token. The agent sends DELETE and POST with the token's
// placeholder: the proxy refuses them before anything reaches the
// upstream, so the real token never goes with a write.
func TestSecretDoesNotLiftMethodLimits(t *testing.T) {
	ph, _ := NewPlaceholder()
	rule := mustRule(t, "api.github.test", "GET", "HEAD")
	rule.Source = "user"
	h := newHarness(t, &Policy{
		Allow:   []Rule{rule},
		Secrets: []Secret{{Host: "api.github.test", Header: "Authorization", Name: "GITHUB_TOKEN", Value: "ghp-real", Placeholder: ph}},
	})
	var mu sync.Mutex
	var seen []string
	up := upstreamTLS(t, h, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Header.Get("Authorization"))
		mu.Unlock()
	})
	h.net.add("api.github.test:443", up.Listener.Addr().String())
	c := h.client()
	do := func(method string) (int, string) {
		req, _ := http.NewRequest(method, "https://api.github.test/repos/me/app", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+ph)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := do("GET"); code != 200 {
		t.Fatalf("GET: %d", code)
	}
	for _, m := range []string{"DELETE", "POST"} {
		code, body := do(m)
		if code != 403 {
			t.Errorf("%s with the token on a GET-only host: %d %q", m, code, body)
		}
		for _, want := range []string{
			m + " api.github.test:443 is not allowed",
			`the user rule "api.github.test (GET,HEAD)" allows GET, HEAD only`,
			"the secret GITHUB_TOKEN is sent to this host, but a secret does not lift its method limits",
			"add " + m + " to the methods of that rule",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: the 403 does not say %q:\n%s", m, want, body)
			}
		}
		if r := h.last(t); r.Allowed || r.Method != m || r.Secret != "" || r.Mode != ModeIntercept {
			t.Errorf("%s: record %+v", m, r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "GET Bearer ghp-real" {
		t.Errorf("the upstream saw %q; want only the GET with the real token", seen)
	}
}

// TestAddressGuard: *.wild.test is allowed, and whoever runs its DNS
// points names at the host's neighbourhood. Each is refused for CONNECT,
// plain HTTP and an intercepted host alike, without a dial, and the 403
// says which address and how to allow it if it was meant.
func TestAddressGuard(t *testing.T) {
	ph, _ := NewPlaceholder()
	h := newHarness(t, &Policy{
		Allow:   []Rule{mustRule(t, "*.wild.test"), mustRule(t, "10.1.2.3")},
		Secrets: []Secret{{Host: "api.wild.test", Header: "x-api-key", Name: "KEY", Value: "real", Placeholder: ph}},
	})
	self := netip.MustParseAddr("127.0.0.1")
	for _, a := range interfaceAddrs() {
		if !a.IsLoopback() {
			self = a
			break
		}
	}
	attacks := map[string]string{
		"lan.wild.test":      "10.0.0.1",
		"self.wild.test":     self.String(),
		"loop.wild.test":     "127.0.0.1",
		"meta.wild.test":     "169.254.169.254",
		"alibaba.wild.test":  "100.100.100.200",
		"aws6.wild.test":     "fd00:ec2::254",
		"nat64.wild.test":    "64:ff9b::a00:1",
		"zero.wild.test":     "0.0.0.0",
		"rfc1918.wild.test":  "192.168.1.1",
		"api.wild.test":      "10.0.0.1", // the secret's host: intercepted
		"both.wild.test":     "172.16.0.5",
		"spelled.wild.test":  "10.1.2.3", // an Allow rule names this address
		"public.wild.test":   "203.0.113.77",
		"mixed.wild.test":    "10.0.0.1",
		"mixed-ok.wild.test": "203.0.113.78",
	}
	for name, addr := range attacks {
		h.net.point(name, addr)
	}
	h.net.point("mixed.wild.test", "10.0.0.1", "203.0.113.78")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached") }))
	defer up.Close()
	upTLS := upstreamTLS(t, h, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached") })
	// Every address leads somewhere in the test network: only the guard
	// stands in the way.
	for _, addr := range attacks {
		h.net.add(net.JoinHostPort(addr, "80"), up.Listener.Addr().String())
		h.net.add(net.JoinHostPort(addr, "443"), upTLS.Listener.Addr().String())
	}
	c := h.client()
	tunnel := h.client()
	tunnel.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true}

	refused := []string{"lan", "self", "loop", "meta", "alibaba", "aws6", "nat64", "zero", "rfc1918", "both"}
	for _, n := range refused {
		name := n + ".wild.test"
		addr := attacks[name]
		code, body := get(t, c, "http://"+name+"/")
		if code != 403 || !strings.Contains(body, name+" resolves to "+addr) || !strings.Contains(body, "a host name never leads there") {
			t.Errorf("plain GET %s (→ %s): %d %q", name, addr, code, body)
		}
		hint := addr
		if strings.Contains(hint, ":") {
			hint = "[" + hint + "]"
		}
		if !strings.Contains(body, "--allow "+hint) {
			t.Errorf("plain GET %s: the 403 does not say how to allow %s:\n%s", name, hint, body)
		}
		if r := h.last(t); r.Allowed || r.Rule != "address guard" || r.Status != 403 {
			t.Errorf("plain GET %s: record %+v", name, r)
		}
		if _, err := tunnel.Get("https://" + name + "/"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("CONNECT %s (→ %s): %v", name, addr, err)
		}
	}
	// The secret's host, intercepted: refused inside the TLS.
	if code, body := get(t, c, "https://api.wild.test/"); code != 403 || !strings.Contains(body, "api.wild.test resolves to 10.0.0.1, a private (RFC 1918) address") {
		t.Errorf("intercepted api.wild.test (→ 10.0.0.1): %d %q", code, body)
	}
	for _, d := range h.net.dialled() {
		for _, n := range refused {
			if a := attacks[n+".wild.test"]; strings.HasPrefix(d, a+":") || strings.HasPrefix(d, "["+a+"]:") {
				t.Errorf("dialled %s, which the guard refused", d)
			}
		}
	}
	// What the guard lets through: an address a rule spells out, a public
	// address, and the public one of a name with both.
	for _, name := range []string{"spelled.wild.test", "public.wild.test", "mixed.wild.test"} {
		if code, body := get(t, c, "http://"+name+"/"); code != 200 || body != "reached" {
			t.Errorf("GET %s: %d %q", name, code, body)
		}
	}
	if d := h.net.dialled(); !strings.Contains(strings.Join(d, " "), "203.0.113.78:80") || strings.Contains(strings.Join(d, " "), "10.0.0.1") {
		t.Errorf("dials: %q; want mixed.wild.test's public address only", d)
	}
}

func TestGuardedWhy(t *testing.T) {
	local := []netip.Addr{netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("2001:db8::7")}
	for ip, want := range map[string]string{
		"127.0.0.1": "loopback", "::1": "loopback", "::ffff:127.0.0.1": "loopback",
		"0.0.0.0": "this network", "0.1.2.3": "this network", "::": "unspecified",
		"10.0.0.1": "RFC 1918", "172.31.255.255": "RFC 1918", "192.168.0.1": "RFC 1918",
		"100.64.0.1": "carrier-grade NAT", "100.100.100.200": "metadata",
		"169.254.169.254": "metadata", "fe80::1": "link-local",
		"fd00:ec2::254": "unique local", "fc00::1": "unique local",
		"64:ff9b::a00:1": "embeds 10.0.0.1", "64:ff9b:1::a9fe:a9fe": "embeds 169.254.169.254",
		"2002:c0a8:0101::1": "embeds 192.168.1.1",
		"224.0.0.1":         "multicast", "ff02::1": "multicast", "255.255.255.255": "broadcast",
		"198.51.100.7": "own network interfaces", "2001:db8::7": "own network interfaces",
		// Public addresses, also behind NAT64 and 6to4.
		"93.184.216.34": "", "2606:2800::1": "", "64:ff9b::5db8:d822": "", "2002:5db8:d822::1": "",
		"100.63.255.255": "", "100.128.0.0": "", "172.32.0.1": "",
	} {
		got := guardedWhy(netip.MustParseAddr(ip), local)
		if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
			t.Errorf("guardedWhy(%s) = %q, want %q", ip, got, want)
		}
	}
}

// TestStalledConnections: the guest opens 300 connections that each send
// a request announcing a 100 MB body, 512 KiB of it, and then stall. The
// proxy holds at most MaxConns (the default, 128) of them, refuses the
// rest at once with a 503 that says why, streams what it holds instead of
// buffering it, and its heap grows by less than 32 MiB (before: every
// connection buffered 1 MiB, 326 MiB for 300). All connections are closed
// at the end.
func TestStalledConnections(t *testing.T) {
	const (
		conns    = 300
		sent     = 512 << 10
		heapUp   = 32 << 20
		announce = 100 << 20
	)
	ph, _ := NewPlaceholder()
	// A secret in the policy makes the proxy search bodies.
	h := newHarness(t, &Policy{
		Allow:   []Rule{mustRule(t, "upload.test")},
		Secrets: []Secret{{Host: "api.secret.test", Header: "x-api-key", Name: "KEY", Value: "real", Placeholder: ph}},
	})
	var entered atomic.Int64
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		<-release // never reads the body: the upload stalls on both sides
	}))
	defer up.Close()
	defer close(release)
	h.net.add("upload.test:80", up.Listener.Addr().String())

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	body := make([]byte, sent)
	head := fmt.Sprintf("POST http://upload.test/big HTTP/1.1\r\nHost: upload.test\r\nContent-Length: %d\r\n\r\n", announce)
	answers := make(chan string, conns)
	all := make([]net.Conn, conns)
	for i := range all {
		c, err := net.Dial("tcp", h.url.Host)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		all[i] = c
		go func() {
			_, _ = io.WriteString(c, head)
			_, _ = c.Write(body)
		}()
		go func() {
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				line += err.Error()
			}
			answers <- line
		}()
	}
	// The connections over the cap are answered at once; the held ones
	// stall until the end.
	hang := time.After(30 * time.Second)
	for refused := 0; refused < conns-DefaultMaxConns; refused++ {
		select {
		case line := <-answers:
			if !strings.HasPrefix(line, "HTTP/1.1 503") {
				t.Fatalf("a connection got %q, want a 503", line)
			}
		case <-hang:
			t.Fatalf("%d connections refused, want %d", refused, conns-DefaultMaxConns)
		}
	}
	const refused = conns - DefaultMaxConns
	for entered.Load() < DefaultMaxConns {
		time.Sleep(10 * time.Millisecond)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	growth := int64(after.HeapInuse) - int64(before.HeapInuse)

	t.Logf("heap in use grew by %.1f MiB with %d connections stalled and %d refused", float64(growth)/(1<<20), DefaultMaxConns, refused)
	if growth > heapUp {
		t.Errorf("heap in use grew by %d MiB, want under %d MiB", growth>>20, heapUp>>20)
	}
	recs := h.waitRecords(t, refused)
	if r := recs[0]; r.Rule != "connection cap" || r.Status != 503 || !strings.Contains(r.String(), "already has 128 connections open") {
		t.Errorf("refusal record: %+v %q", r, r.String())
	}
	select {
	case line := <-answers:
		t.Errorf("a held connection got an answer while stalled: %q", line)
	default:
	}
	for _, c := range all {
		c.Close()
	}
	// The harness's cleanup stops Serve, which returns only once every
	// connection and request it held has ended.
}

// TestConnectionCapAnswer: the 503 over the cap says what happened and
// what to do.
func TestConnectionCapAnswer(t *testing.T) {
	h := newHarnessConfig(t, &Policy{Allow: []Rule{mustRule(t, "idle.test")}}, Config{MaxConns: 1})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	h.net.add("idle.test:80", up.Listener.Addr().String())
	first, err := net.Dial("tcp", h.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	// The first connection is held once the proxy has answered a request
	// on it (and keeps it alive).
	if _, err := io.WriteString(first, "GET http://idle.test/ HTTP/1.1\r\nHost: idle.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(first), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The answer over the cap comes at once, before any request is read,
	// so it is read from a raw connection (an HTTP client may take it
	// for a reply to nothing and retry).
	conn, err := net.Dial("tcp", h.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "GET http://idle.test/ HTTP/1.1\r\nHost: idle.test\r\n\r\n")
	second, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(second.Body)
	second.Body.Close()
	for _, want := range []string{"already has 1 connections open", "MaxConns", "2m0s idle", "default 128"} {
		if second.StatusCode != 503 || !strings.Contains(string(b), want) {
			t.Errorf("over the cap: %d, want 503 saying %q:\n%s", second.StatusCode, want, b)
		}
	}
}

// TestBodyTimeout: a request body that stops arriving is ended after
// BodyTimeout, and the record says so.
func TestBodyTimeout(t *testing.T) {
	h := newHarnessConfig(t, &Policy{Allow: []Rule{mustRule(t, "upload.test")}}, Config{BodyTimeout: 100 * time.Millisecond})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer up.Close()
	h.net.add("upload.test:80", up.Listener.Addr().String())
	c, err := net.Dial("tcp", h.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST http://upload.test/ HTTP/1.1\r\nHost: upload.test\r\nContent-Length: 1000\r\n\r\nhalf"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	// The proxy ends the request and closes the connection.
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Errorf("the connection was not closed: %v", err)
	}
	r := h.waitRecords(t, 1)[0]
	if !strings.Contains(r.Error, "the guest sent no byte of the request body for 100ms") {
		t.Errorf("record: %+v", r)
	}
}

// TestSecretNotSentRecord: the upstream of a host with a secret fails its
// TLS verification, so the request (and the credential) never left; the
// log says "not sent", not "substituted".
func TestSecretNotSentRecord(t *testing.T) {
	ph, _ := NewPlaceholder()
	h := newHarness(t, &Policy{Secrets: []Secret{{Host: "api.anthropic.test", Header: "x-api-key", Name: "ANTHROPIC_API_KEY", Value: "sk-real", Placeholder: ph}}})
	// An upstream whose certificate the proxy does not trust.
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the request reached the upstream") }))
	defer up.Close()
	h.net.add("api.anthropic.test:443", up.Listener.Addr().String())
	req, _ := http.NewRequest("POST", "https://api.anthropic.test/v1/messages", strings.NewReader("{}"))
	req.Header.Set("X-Api-Key", ph)
	resp, err := h.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d, want 502", resp.StatusCode)
	}
	r := h.last(t)
	line := r.String()
	if !r.SecretNotSent || !strings.Contains(line, "[ANTHROPIC_API_KEY not sent]") || strings.Contains(line, "substituted") || !strings.Contains(line, "certificate") {
		t.Errorf("record %+v\nline %q", r, line)
	}
}

// TestVendorRejectsSecret: a vendor that refuses the credential answers
// 401 with its own body; the guest gets exactly that (not a proxy error),
// and the log line says the vendor rejected the secret.
func TestVendorRejectsSecret(t *testing.T) {
	const body = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`
	upCA, err := NewCA("upstream")
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, body)
	}))
	up.TLS = &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) { return upCA.Leaf(hi.ServerName) }}
	up.StartTLS()
	defer up.Close()
	ph, _ := NewPlaceholder()
	h := newHarness(t, &Policy{Secrets: []Secret{{Host: "api.anthropic.test", Header: "x-api-key", Name: "ANTHROPIC_API_KEY", Value: "sk-revoked", Placeholder: ph}}})
	h.roots.AddCert(upCA.Certificate())
	h.net.add("api.anthropic.test:443", up.Listener.Addr().String())
	req, _ := http.NewRequest("POST", "https://api.anthropic.test/v1/messages", strings.NewReader("{}"))
	req.Header.Set("X-Api-Key", ph)
	resp, err := h.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || string(got) != body {
		t.Errorf("the guest got %d %q, want the vendor's 401 as it was", resp.StatusCode, got)
	}
	r := h.last(t)
	line := r.String()
	if !r.Rejected() || !strings.Contains(line, "api.anthropic.test answered 401: it rejected the credential, check the value of ANTHROPIC_API_KEY") {
		t.Errorf("record %+v\nline %q", r, line)
	}
}
