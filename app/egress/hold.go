package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/internal/bytesize"
)

// hold answers a request that st holds with st's reply and hands it,
// whole and without credentials, to Config.Hold. own is the secret of
// the request's host, if any: its placeholder is kept as a place, never a
// value.
func (p *Proxy) hold(w http.ResponseWriter, r *http.Request, t target, rec Record, st *Stage, own *Secret) {
	rec.Held = true
	refuse := func(status int, reason string) {
		rec.Allowed, rec.Status, rec.Reason, rec.Duration = false, status, reason, time.Since(rec.Time)
		p.record(rec)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Airlock-Denied", rec.Rule)
		w.Header().Set("Connection", "close")
		w.WriteHeader(status)
		fmt.Fprintf(w, "Airlock did not hold this request for review, and did not send it: %s.\n", reason)
	}
	if p.cfg.Hold == nil {
		refuse(http.StatusServiceUnavailable, fmt.Sprintf("requests to %s are held for review (%s), and this proxy has nowhere to keep them", t, rec.Rule))
		return
	}
	limit := st.maxBody()
	if r.ContentLength > limit {
		refuse(http.StatusRequestEntityTooLarge, tooLarge(t, r.ContentLength, limit))
		return
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		in := &bodyTimeout{r: r.Body, rc: http.NewResponseController(w), d: p.cfg.BodyTimeout}
		var err error
		body, err = io.ReadAll(io.LimitReader(in, limit+1))
		rec.BytesUp = int64(len(body))
		if int64(len(body)) > limit {
			refuse(http.StatusRequestEntityTooLarge, tooLarge(t, -1, limit))
			return
		}
		if err != nil {
			rec.Error = err.Error()
			refuse(http.StatusBadRequest, "its body could not be read whole: "+err.Error())
			return
		}
	}
	pol := p.policy.Load()
	for _, s := range pol.foreign(own) {
		if bytes.Contains(body, []byte(s.Placeholder)) {
			p.deny(w, rec, placeholderDecision(s, t), t)
			return
		}
	}
	h := Held{
		Time: rec.Time, Scheme: "http", Host: t.host, Port: t.port, Method: r.Method,
		Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Body: body, Rule: rec.Rule,
	}
	if t.connect {
		h.Scheme = "https"
	}
	h.Header, h.Dropped, h.Secret = heldHeader(r.Header, own)
	id, err := p.cfg.Hold(h)
	if err != nil {
		rec.Error = err.Error()
		refuse(http.StatusServiceUnavailable, fmt.Sprintf("requests to %s are held for review (%s), and it could not be kept: %v", t, rec.Rule, err))
		return
	}
	status, header, text := st.replyFor(id)
	rec.Allowed, rec.Action, rec.Status, rec.BytesDown = true, id, status, int64(len(text))
	if h.Secret != nil {
		// Kept as a place for the value; nothing with the value left.
		rec.Secret, rec.SecretNotSent = h.Secret.Name, true
	}
	rec.Duration = time.Since(rec.Time)
	p.record(rec)
	for k, vs := range header {
		w.Header()[k] = vs
	}
	w.Header().Set("X-Airlock-Held", fmt.Sprint(id))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text)
}

// url is the held request's URL, built from its parts, each checked: a
// host name or address, a port, a path that is one. A held request is
// read back from a file: nothing in it may make its URL another host's.
func (h Held) url() (*url.URL, error) {
	if h.Scheme != "https" && h.Scheme != "http" {
		return nil, fmt.Errorf("the held request's scheme %q is neither https nor http", h.Scheme)
	}
	host := normHost(h.Host)
	if host != h.Host || strings.HasPrefix(host, "*") || checkHostPattern(host) != nil {
		return nil, fmt.Errorf("the held request's host %q is not a host name or address", h.Host)
	}
	if h.Port < 1 || h.Port > 65535 {
		return nil, fmt.Errorf("the held request's port %d is not one", h.Port)
	}
	if h.Path != "" && !strings.HasPrefix(h.Path, "/") {
		return nil, fmt.Errorf("the held request's path %q does not start with /", h.Path)
	}
	if strings.ContainsAny(h.Path+h.Query, " \t\r\n\x00") {
		return nil, errors.New("the held request's path or query holds white space")
	}
	u := &url.URL{Scheme: h.Scheme, Host: hostHeader(target{host: h.Host, port: h.Port, connect: h.Scheme == "https"}), RawQuery: h.Query}
	p, err := url.PathUnescape(h.Path)
	if err != nil {
		return nil, fmt.Errorf("the held request's path %q: %w", h.Path, err)
	}
	u.Path, u.RawPath = p, h.Path
	if u.EscapedPath() != h.Path && h.Path != "" {
		return nil, fmt.Errorf("the held request's path %q is not escaped as a URL's", h.Path)
	}
	return u, nil
}

// tooLarge is the reason a body over limit is refused; n is its length
// when known (-1 when it was read past the limit).
func tooLarge(t target, n, limit int64) string {
	size := "larger than " + bytesize.Format(limit)
	if n >= 0 {
		size = bytesize.Format(n)
	}
	return fmt.Sprintf("requests to %s are held for review with their bodies up to %s, and this one's body is %s. Ask the user to raise max_body of the [[network.stage]] entry for %s in their Airlock configuration, or send less", t, bytesize.Format(limit), size, t.host)
}

// MaxSentBody is how much of an upstream's answer to a sent action is
// kept.
const MaxSentBody = 64 << 10

// Sent is what happened to a held request sent from the host.
type Sent struct {
	// Status is the upstream's status (0 when no answer came).
	Status int `json:"status,omitempty"`
	// Header is the answer's headers.
	Header http.Header `json:"header,omitempty"`
	// Body is the start of the answer's body, at most MaxSentBody bytes;
	// Truncated says there was more.
	Body      []byte `json:"body,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	// Wrote says the request's headers were written towards the
	// upstream: from then on it may have arrived, even without an answer.
	Wrote bool `json:"wrote"`
}

// ErrSecretHost is returned by Send when a held request carries a
// secret's place but the secret goes to another host.
var ErrSecretHost = errors.New("the secret is not configured for this host")

// Send sends a held request from the host to its upstream, through the
// proxy's guard and TLS verification, with secret's value where its
// placeholder was (secret is the host's secret as configured now; nil
// when the request carried none). The answer is read whole, up to
// MaxSentBody. Send is used on a Proxy that is not serving.
func (p *Proxy) Send(ctx context.Context, h Held, secret *Secret) (Sent, error) {
	var out Sent
	u, err := h.url()
	if err != nil {
		return out, err
	}
	req, err := http.NewRequestWithContext(ctx, h.Method, u.Scheme+"://"+u.Host+"/", bytes.NewReader(h.Body))
	if err != nil {
		return out, fmt.Errorf("the held request: %w", err)
	}
	// The URL as held, not parsed again from text: its path and query go
	// as they came, whatever they hold.
	req.URL = u
	req.Header = h.Header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	// The answer is read here, not by the agent's client: the transport
	// asks for gzip itself and decodes it.
	req.Header.Del("Accept-Encoding")
	if len(h.Body) == 0 {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	if h.Secret != nil {
		if secret == nil || secret.Name != h.Secret.Name {
			return out, fmt.Errorf("it carried the secret %s, which is not configured now: configure it ([[network.secret]] with env = %q) and apply again", h.Secret.Name, h.Secret.Name)
		}
		if normHost(secret.Host) != normHost(h.Host) || secret.port() != h.Port || h.Scheme != "https" {
			return out, fmt.Errorf("%w: %s goes to %s, not %s", ErrSecretHost, secret.Name, secret.Host, h.Target())
		}
		v, err := secret.value(ctx)
		if err != nil {
			return out, err
		}
		req.Header.Set(h.Secret.Header, strings.Join(h.Secret.Parts, v))
	}
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }})
	req = req.WithContext(ctx)
	resp, err := p.transport.RoundTrip(req)
	out.Wrote = wrote.Load() || err == nil
	if err != nil {
		return out, fmt.Errorf("send %s %s: %w", h.Method, h.Target(), err)
	}
	defer resp.Body.Close()
	out.Status, out.Header = resp.StatusCode, resp.Header
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxSentBody+1))
	if len(body) > MaxSentBody {
		body, out.Truncated = body[:MaxSentBody], true
	}
	out.Body = body
	if err == nil && !out.Truncated && ctx.Err() != nil {
		// Ended by ctx, which the transport may report as the answer's
		// end: the answer was cut.
		err = context.Cause(ctx)
	}
	if err != nil && !out.Truncated {
		return out, fmt.Errorf("read the answer of %s: %w", h.Target(), err)
	}
	return out, nil
}
