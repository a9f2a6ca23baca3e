package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// benchSize is the download of BenchmarkDownload.
const benchSize = 100 << 20

// benchEnv is an upstream serving benchSize bytes over HTTP and HTTPS,
// and a proxy on loopback that allows it (the HTTPS host with a secret,
// so that it is intercepted).
type benchEnv struct {
	plain, tlsUp *httptest.Server
	proxy        *url.URL
	ca           *CA
	upCA         *CA
	stop         func()
}

func newBenchEnv(b *testing.B) *benchEnv {
	chunk := make([]byte, 1<<20)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		for range benchSize / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	e := &benchEnv{plain: httptest.NewServer(handler)}
	var err error
	if e.upCA, err = NewCA("upstream"); err != nil {
		b.Fatal(err)
	}
	e.tlsUp = httptest.NewUnstartedServer(handler)
	e.tlsUp.TLS = &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) { return e.upCA.Leaf(hi.ServerName) }}
	e.tlsUp.StartTLS()
	if e.ca, err = NewCA("bench"); err != nil {
		b.Fatal(err)
	}
	names := map[string]string{
		"plain.test:80":      e.plain.Listener.Addr().String(),
		"tunnel.test:443":    e.tlsUp.Listener.Addr().String(),
		"intercept.test:443": e.tlsUp.Listener.Addr().String(),
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, names[addr])
	}
	ph, _ := NewPlaceholder()
	// Held requests are kept as a run keeps them: one file each, synced.
	heldDir := b.TempDir()
	var held atomic.Int64
	hold := func(h Held) (int, error) {
		id := int(held.Add(1))
		data, err := json.Marshal(h)
		if err != nil {
			return 0, err
		}
		f, err := os.Create(filepath.Join(heldDir, strconv.Itoa(id)+".json"))
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if _, err := f.Write(data); err != nil {
			return 0, err
		}
		return id, f.Sync()
	}
	p := New(Config{Dial: dial, RootCAs: poolOf(e.upCA.Certificate()), CA: e.ca, Hold: hold}, &Policy{
		Allow:   []Rule{{Host: "plain.test"}, {Host: "tunnel.test"}},
		Secrets: []Secret{{Host: "intercept.test", Header: "x-api-key", Name: "K", Value: "v", Placeholder: ph}},
		Stage:   []Stage{{Host: "intercept.test", Paths: []string{"/held"}}},
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Serve(ctx, l); close(done) }()
	e.proxy = &url.URL{Scheme: "http", Host: l.Addr().String()}
	e.stop = func() { cancel(); <-done; e.plain.Close(); e.tlsUp.Close() }
	return e
}

// client is direct (proxy nil) or through the proxy, trusting both CAs.
func (e *benchEnv) client(proxy *url.URL, serverName string) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(e.ca.Certificate())
	pool.AddCert(e.upCA.Certificate())
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName}, DisableCompression: true}
	if proxy != nil {
		tr.Proxy = http.ProxyURL(proxy)
	}
	return &http.Client{Transport: tr}
}

func fetch(b *testing.B, c *http.Client, u string) int64 {
	resp, err := c.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET %s: %d, %v", u, resp.StatusCode, err)
	}
	return n
}

// BenchmarkDownload downloads 100 MB directly from a loopback server and
// through the proxy (plain HTTP, a CONNECT tunnel, an intercepted host),
// in the same run, and reports each throughput and its ratio to direct.
//
//	go test ./app/egress -run '^$' -bench Download -benchtime 3x
func BenchmarkDownload(b *testing.B) {
	e := newBenchEnv(b)
	defer e.stop()
	type way struct {
		name   string
		client *http.Client
		url    string
		took   time.Duration
	}
	ways := []*way{
		{name: "direct", client: e.client(nil, ""), url: e.plain.URL + "/big"},
		{name: "http", client: e.client(e.proxy, ""), url: "http://plain.test/big"},
		{name: "direct-tls", client: e.client(nil, "tunnel.test"), url: e.tlsUp.URL + "/big"},
		{name: "tunnel", client: e.client(e.proxy, ""), url: "https://tunnel.test/big"},
		{name: "intercept", client: e.client(e.proxy, ""), url: "https://intercept.test/big"},
	}
	b.ResetTimer()
	for range b.N {
		for _, w := range ways {
			t := time.Now()
			if n := fetch(b, w.client, w.url); n != benchSize {
				b.Fatalf("%s: %d bytes", w.name, n)
			}
			w.took += time.Since(t)
		}
	}
	b.StopTimer()
	mbps := func(w *way) float64 { return float64(benchSize) * float64(b.N) / w.took.Seconds() / 1e6 }
	for _, w := range ways {
		b.ReportMetric(mbps(w), w.name+"-MB/s")
	}
	b.ReportMetric(mbps(ways[1])/mbps(ways[0]), "http/direct")
	b.ReportMetric(mbps(ways[3])/mbps(ways[2]), "tunnel/direct-tls")
	b.ReportMetric(mbps(ways[4])/mbps(ways[2]), "intercept/direct-tls")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkLatency times small requests on kept-alive connections,
// directly and through the proxy, and reports the latency the proxy adds.
func BenchmarkLatency(b *testing.B) {
	e := newBenchEnv(b)
	defer e.stop()
	direct, proxied := e.client(nil, ""), e.client(e.proxy, "")
	directTLS := e.client(nil, "intercept.test")
	fetch(b, direct, e.plain.URL+"/small")
	fetch(b, proxied, "http://plain.test/small")
	fetch(b, proxied, "https://intercept.test/small")
	fetch(b, directTLS, e.tlsUp.URL+"/small")
	var d, p, dt, it time.Duration
	b.ResetTimer()
	for range b.N {
		t := time.Now()
		fetch(b, direct, e.plain.URL+"/small")
		d += time.Since(t)
		t = time.Now()
		fetch(b, proxied, "http://plain.test/small")
		p += time.Since(t)
		t = time.Now()
		fetch(b, directTLS, e.tlsUp.URL+"/small")
		dt += time.Since(t)
		t = time.Now()
		fetch(b, proxied, "https://intercept.test/small")
		it += time.Since(t)
	}
	b.StopTimer()
	per := func(x time.Duration) float64 { return float64(x.Microseconds()) / float64(b.N) }
	b.ReportMetric(per(d), "direct-µs/req")
	b.ReportMetric(per(p), "http-µs/req")
	b.ReportMetric(per(p)-per(d), "http-added-µs")
	b.ReportMetric(per(it)-per(dt), "intercept-added-µs")
	b.ReportMetric(0, "ns/op")
}

// post sends body to u and checks the status.
func post(b *testing.B, c *http.Client, u string, body []byte, want int) {
	resp, err := c.Post(u, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != want {
		b.Fatalf("POST %s: %d, want %d", u, resp.StatusCode, want)
	}
}

// BenchmarkHold times a 2 kB POST to an intercepted host held for review
// (answered by the proxy, kept in a synced file) beside the same POST
// forwarded to the upstream, in the same run: what staging costs the
// agent's request.
//
//	go test ./app/egress -run '^$' -bench Hold -benchtime 200x
func BenchmarkHold(b *testing.B) {
	e := newBenchEnv(b)
	defer e.stop()
	c := e.client(e.proxy, "")
	body := bytes.Repeat([]byte("x"), 2048)
	post(b, c, "https://intercept.test/small", body, 200)
	post(b, c, "https://intercept.test/held", body, 202)
	var fwd, held time.Duration
	b.ResetTimer()
	for range b.N {
		t := time.Now()
		post(b, c, "https://intercept.test/small", body, 200)
		fwd += time.Since(t)
		t = time.Now()
		post(b, c, "https://intercept.test/held", body, 202)
		held += time.Since(t)
	}
	b.StopTimer()
	per := func(x time.Duration) float64 { return float64(x.Microseconds()) / float64(b.N) }
	b.ReportMetric(per(fwd), "forwarded-µs/req")
	b.ReportMetric(per(held), "held-µs/req")
	b.ReportMetric(per(held)/per(fwd), "held/forwarded")
	b.ReportMetric(0, "ns/op")
}
