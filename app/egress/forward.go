package egress

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

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
