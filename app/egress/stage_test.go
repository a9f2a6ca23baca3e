package egress

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// seen is a request as an upstream received it.
type seen struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte
}

// upstreamLog keeps what reaches an upstream.
type upstreamLog struct {
	mu   sync.Mutex
	reqs []seen
}

func (u *upstreamLog) handle(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.reqs = append(u.reqs, seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), b})
	u.mu.Unlock()
	fmt.Fprintf(w, "upstream got %s %s", r.Method, r.URL.Path)
}

func (u *upstreamLog) all() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.reqs)
}

// holdLog is a Config.Hold that keeps what it is handed and numbers it
// from first, or fails with err.
type holdLog struct {
	mu    sync.Mutex
	held  []Held
	first int
	err   error
}

func (l *holdLog) hold(h Held) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return 0, l.err
	}
	l.held = append(l.held, h)
	return l.first + len(l.held) - 1, nil
}

func (l *holdLog) fail(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

func (l *holdLog) all() []Held {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.held)
}

// stageSetup is a proxy with a CA enforcing pol, whose Hold is held, with
// every host in hosts (names, port 443) leading to one HTTPS upstream.
type stageSetup struct {
	h    *harness
	held *holdLog
	up   *upstreamLog
	addr string // the upstream's listener
	c    *http.Client
}

func newStageSetup(t *testing.T, pol *Policy, hosts ...string) *stageSetup {
	t.Helper()
	s := &stageSetup{held: &holdLog{first: 7}, up: &upstreamLog{}}
	s.h = newHarnessConfig(t, pol, Config{Hold: s.held.hold})
	up := upstreamTLS(t, s.h, s.up.handle)
	s.addr = up.Listener.Addr().String()
	for _, host := range hosts {
		s.h.net.add(host+":443", s.addr)
	}
	s.c = s.h.client()
	return s
}

// answer is what the guest got.
type answer struct {
	code   int
	header http.Header
	body   string
}

func (s *stageSetup) do(t *testing.T, method, u string, header map[string]string, body io.Reader) answer {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := s.c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// stagePolicy: api.stage.test is staged and has a secret (Bearer in
// Authorization), allowed for GET only; other.test has a secret of its
// own.
func stagePolicy(t *testing.T, st Stage) (pol *Policy, ph, otherPH string) {
	ph, _ = NewPlaceholder()
	otherPH, _ = NewPlaceholder()
	return &Policy{
		Allow: []Rule{mustRule(t, "api.stage.test", "GET")},
		Secrets: []Secret{
			{Host: "api.stage.test", Header: "Authorization", Name: "STAGE_TOKEN", Value: "tok-real-value", Placeholder: ph},
			{Host: "other.test", Header: "x-api-key", Name: "OTHER_KEY", Value: "other-real-value", Placeholder: otherPH},
		},
		Stage: []Stage{st},
	}, ph, otherPH
}

// TestStageHolds: a POST the stage matches is answered with the stage's
// reply and handed whole to Hold without credentials; the upstream sees
// nothing. The secret's placeholder is kept as a place, never a value.
func TestStageHolds(t *testing.T) {
	st := Stage{Host: "api.stage.test", Source: "user", Reply: Reply{
		Status: 201,
		Header: map[string]string{"X-Request-Id": "r-1"},
		Body:   `{"id": {{id}}, "url": "https://api.stage.test/items/{{id}}"}`,
	}}
	pol, ph, _ := stagePolicy(t, st)
	s := newStageSetup(t, pol, "api.stage.test")

	body := `{"body": "Fixed in ` + "\u00e9" + `t\u00e9 — see #3", "n": [1, 2, 3]}`
	got := s.do(t, "POST", "https://api.stage.test/repos/me/app/issues/12/comments?b=2&a=1&a=3", map[string]string{
		"Authorization":             "Bearer " + ph,
		"Cookie":                    "session=abc",
		"X-Api-Key":                 "agent-own-key",
		"X-GitHub-Api-Version":      "2022-11-28",
		"Content-Type":              "application/json",
		"Accept":                    "application/vnd.github+json",
		"X-Custom-Session-Id":       "s-1",
		"Idempotency-Key":           "k-1",
		"X-Idempotency-Key":         "k-2",
		"Ocp-Apim-Subscription-Key": "azure-key",
		"Dd-Application-Key":        "dd-key",
		"X-Keyboard":                "kept",
		"X-Auth-Idempotency-Key":    "auth-idem",
	}, strings.NewReader(body))

	if got.code != 201 || got.body != `{"id": 7, "url": "https://api.stage.test/items/7"}` {
		t.Errorf("the agent got %d %q, want 201 with the configured body and id 7", got.code, got.body)
	}
	for k, want := range map[string]string{"X-Request-Id": "r-1", "Content-Type": "application/json", "X-Airlock-Held": "7"} {
		if v := got.header.Get(k); v != want {
			t.Errorf("reply header %s = %q, want %q", k, v, want)
		}
	}
	if reqs := s.up.all(); len(reqs) != 0 {
		t.Errorf("the upstream saw %d requests while the POST was held: %+v", len(reqs), reqs)
	}
	held := s.held.all()
	if len(held) != 1 {
		t.Fatalf("Hold got %d requests, want 1", len(held))
	}
	h := held[0]
	if h.Scheme != "https" || h.Host != "api.stage.test" || h.Port != 443 || h.Method != "POST" ||
		h.Path != "/repos/me/app/issues/12/comments" || h.Query != "b=2&a=1&a=3" || string(h.Body) != body ||
		h.Rule != "stage "+st.String() || h.Time.IsZero() {
		t.Errorf("held %+v", h)
	}
	if h.URL() != "https://api.stage.test/repos/me/app/issues/12/comments?b=2&a=1&a=3" {
		t.Errorf("URL() = %q", h.URL())
	}
	for _, k := range []string{"X-Github-Api-Version", "Content-Type", "Accept", "Idempotency-Key", "X-Idempotency-Key", "X-Keyboard", "User-Agent"} {
		if len(h.Header[k]) != 1 {
			t.Errorf("held header %s = %q, want it kept", k, h.Header[k])
		}
	}
	for _, k := range []string{"Authorization", "Cookie", "X-Api-Key", "X-Custom-Session-Id", "Content-Length", "Connection"} {
		if _, ok := h.Header[k]; ok {
			t.Errorf("held header %s = %q, want it left out", k, h.Header[k])
		}
	}
	if diff := cmp.Diff([]string{"Cookie", "Dd-Application-Key", "Ocp-Apim-Subscription-Key", "X-Api-Key", "X-Auth-Idempotency-Key", "X-Custom-Session-Id"}, h.Dropped); diff != "" {
		t.Errorf("Dropped (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&HeldSecret{Name: "STAGE_TOKEN", Header: "Authorization", Parts: []string{"Bearer ", ""}}, h.Secret); diff != "" {
		t.Errorf("Secret (-want +got):\n%s", diff)
	}
	// Neither the placeholder nor the value is anywhere in what is kept,
	// nor in the log.
	js, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{ph, "tok-real-value", "agent-own-key", "session=abc", "azure-key", "dd-key"} {
		if strings.Contains(string(js), bad) {
			t.Errorf("the held request holds %q:\n%s", bad, js)
		}
	}
	r := s.h.last(t)
	if !r.Held || !r.Allowed || r.Action != 7 || r.Status != 201 || r.Secret != "STAGE_TOKEN" || !r.SecretNotSent ||
		r.BytesUp != int64(len(body)) || r.Mode != ModeIntercept || r.Rule != h.Rule {
		t.Errorf("record %+v", r)
	}
	if line := r.String(); !strings.Contains(line, "HELD POST api.stage.test:443/repos/me/app/issues/12/comments → 201 (action 7, for review: nothing was sent) [STAGE_TOKEN to be substituted when sent]") {
		t.Errorf("record line %q", line)
	}

	// Without the placeholder: Authorization is the agent's own, and is
	// dropped like any credential.
	s.do(t, "DELETE", "https://api.stage.test/repos/me/app", map[string]string{"Authorization": "token literal"}, nil)
	held = s.held.all()
	if len(held) != 2 {
		t.Fatalf("Hold got %d requests, want 2", len(held))
	}
	if h := held[1]; h.Secret != nil || !slices.Contains(h.Dropped, "Authorization") || h.Header.Get("Authorization") != "" || len(h.Body) != 0 || h.Method != "DELETE" {
		t.Errorf("held without the placeholder: %+v", h)
	}
	if r := s.h.last(t); r.Secret != "" || r.Action != 8 {
		t.Errorf("record %+v", r)
	}
}

// TestStageDefaultReply: without a reply table the agent gets 202 and a
// JSON body naming the action.
func TestStageDefaultReply(t *testing.T) {
	pol, _, _ := stagePolicy(t, Stage{Host: "api.stage.test"})
	s := newStageSetup(t, pol, "api.stage.test")
	got := s.do(t, "PUT", "https://api.stage.test/things/1", map[string]string{"Content-Type": "text/plain"}, strings.NewReader("x"))
	if got.code != http.StatusAccepted || got.header.Get("Content-Type") != "application/json" {
		t.Errorf("default reply: %d %q %q", got.code, got.header.Get("Content-Type"), got.body)
	}
	var v struct {
		Airlock string `json:"airlock"`
		Action  int    `json:"action"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(got.body), &v); err != nil || v.Action != 7 || v.Airlock != "held for review" || !strings.Contains(v.Message, "Nothing was sent yet") {
		t.Errorf("default body %q: %+v, %v", got.body, v, err)
	}

	// A 204 reply has no body; a text body is sent as text.
	for _, tt := range []struct {
		reply      Reply
		body, kind string
	}{
		{Reply{Status: 204}, "", ""},
		{Reply{Body: "held as {{id}}"}, "held as 7", "text/plain; charset=utf-8"},
		{Reply{Body: "<ok/>", Header: map[string]string{"content-type": "application/xml"}}, "<ok/>", "application/xml"},
	} {
		status, header, body := Stage{Reply: tt.reply}.replyFor(7)
		want := tt.reply.Status
		if want == 0 {
			want = 202
		}
		if status != want || body != tt.body || header.Get("Content-Type") != tt.kind {
			t.Errorf("replyFor(%+v) = %d %v %q, want %d %q %q", tt.reply, status, header, body, want, tt.kind, tt.body)
		}
	}
}

// TestStageSelects: the stage's methods and paths choose what is held;
// the rest is decided as any request (a GET the allow rule allows passes
// untouched, with the secret substituted); a staged host needs no allow
// rule for what is held; a deny rule wins.
func TestStageSelects(t *testing.T) {
	st := Stage{Host: "api.stage.test", Methods: []string{"POST", "PATCH"}, Paths: []string{"/repos/*/*/issues/*/comments", "/api/**", "/v1/*.json"}}
	pol, ph, _ := stagePolicy(t, st)
	pol.Stage = append(pol.Stage, Stage{Host: "only.stage.test"}, Stage{Host: "denied.stage.test"})
	pol.Deny = []Rule{mustRule(t, "denied.stage.test")}
	s := newStageSetup(t, pol, "api.stage.test", "only.stage.test", "denied.stage.test")
	auth := map[string]string{"Authorization": "Bearer " + ph}

	tests := []struct {
		method, url string
		held        bool
		code        int // of what is not held
		says        string
	}{
		{"POST", "https://api.stage.test/repos/o/r/issues/1/comments", true, 0, ""},
		{"PATCH", "https://api.stage.test/repos/o/r/issues/1/comments", true, 0, ""},
		{"POST", "https://api.stage.test/api", true, 0, ""},
		{"POST", "https://api.stage.test/api/a/b/c", true, 0, ""},
		{"POST", "https://api.stage.test/v1/send.json", true, 0, ""},
		// Spelled otherwise, the same path is still held.
		{"POST", "https://api.stage.test/repos/o/r/issues/1/comments/", true, 0, ""},
		{"POST", "https://api.stage.test/repos//o/r/issues/1/comments", true, 0, ""},
		{"POST", "https://api.stage.test/repos/o/x/../r/issues/1/./comments", true, 0, ""},
		{"POST", "https://api.stage.test/repos/o/r/issues/1/%63omments", true, 0, ""},
		{"post", "https://api.stage.test/repos/o/r/issues/1/comments", true, 0, ""},
		// Not held: decided by the allow rule (GET only).
		{"POST", "https://api.stage.test/repos/o/r/issues/1/comments/9", false, 403, "allows GET only"},
		{"POST", "https://api.stage.test/repos/o/r/pulls", false, 403, "allows GET only"},
		{"POST", "https://api.stage.test/v1/a/send.json", false, 403, "allows GET only"},
		{"PUT", "https://api.stage.test/api/x", false, 403, "allows GET only"},
		{"DELETE", "https://api.stage.test/repos/o/r/issues/1/comments", false, 403, "allows GET only"},
		{"GET", "https://api.stage.test/repos/o/r/issues/1/comments", false, 200, "upstream got GET /repos/o/r/issues/1/comments"},
		// A staged host with no allow rule: what is held is held, the
		// rest denied as today.
		{"POST", "https://only.stage.test/x", true, 0, ""},
		{"GET", "https://only.stage.test/x", false, 403, "only.stage.test:443 is not on this sandbox's network allow-list"},
	}
	for _, tt := range tests {
		before, ups := len(s.held.all()), len(s.up.all())
		header := auth
		if !strings.HasPrefix(tt.url, "https://api.stage.test/") {
			header = nil // the token goes to its own host only
		}
		got := s.do(t, tt.method, tt.url, header, strings.NewReader(`{"a":1}`))
		held := s.held.all()
		if tt.held {
			if got.code != 202 || len(held) != before+1 || len(s.up.all()) != ups {
				t.Errorf("%s %s: %d %q, %d held, upstream %d; want it held", tt.method, tt.url, got.code, got.body, len(held)-before, len(s.up.all())-ups)
			}
			continue
		}
		if got.code != tt.code || !strings.Contains(got.body, tt.says) || len(held) != before {
			t.Errorf("%s %s: %d %q (%d held); want %d saying %q", tt.method, tt.url, got.code, got.body, len(held)-before, tt.code, tt.says)
		}
	}
	// The GET went through with the real credential, as any request.
	reqs := s.up.all()
	if len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "Bearer tok-real-value" || string(reqs[0].Body) != `{"a":1}` {
		t.Errorf("the upstream saw %+v; want the GET alone, with the real token", reqs)
	}
	if r := s.h.last(t); r.Held {
		t.Errorf("the last record (a denied GET) says held: %+v", r)
	}

	// Deny wins: the staged host's tunnel is refused whole.
	if _, err := s.c.Post("https://denied.stage.test/x", "text/plain", strings.NewReader("x")); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("POST to a denied staged host: %v", err)
	}
	if r := s.h.last(t); r.Allowed || !strings.HasPrefix(r.Rule, "deny ") {
		t.Errorf("record %+v", r)
	}
}

// TestStageBodyCap: a body over max_body is refused with 413 and a
// message naming max_body, whether its length is announced or not;
// nothing is held and nothing reaches the upstream. A body of exactly
// max_body is held.
func TestStageBodyCap(t *testing.T) {
	pol, _, _ := stagePolicy(t, Stage{Host: "api.stage.test", MaxBody: 1000})
	s := newStageSetup(t, pol, "api.stage.test")

	// unsized hides the length, so that the client sends it chunked.
	type unsized struct{ io.Reader }
	for _, tt := range []struct {
		name string
		body io.Reader
		says string
	}{
		{"announced", strings.NewReader(strings.Repeat("a", 2000)), "this one's body is 2.0 KiB"},
		{"announced, one over", strings.NewReader(strings.Repeat("a", 1001)), "this one's body is 1001 B"},
		{"chunked", unsized{strings.NewReader(strings.Repeat("a", 5000))}, "this one's body is larger than 1000 B"},
		{"chunked, large", unsized{io.LimitReader(zeros{}, 8<<20)}, "this one's body is larger than 1000 B"},
	} {
		got := s.do(t, "POST", "https://api.stage.test/upload", nil, tt.body)
		if got.code != http.StatusRequestEntityTooLarge || !strings.Contains(got.body, "max_body") || !strings.Contains(got.body, tt.says) ||
			!strings.Contains(got.body, "did not hold this request for review, and did not send it") {
			t.Errorf("%s: %d %q", tt.name, got.code, got.body)
		}
		if r := s.h.last(t); r.Allowed || !r.Held || r.Status != 413 || !strings.Contains(r.Reason, "max_body") {
			t.Errorf("%s: record %+v", tt.name, r)
		}
	}
	if n := len(s.held.all()); n != 0 {
		t.Errorf("%d requests held over the cap", n)
	}
	got := s.do(t, "POST", "https://api.stage.test/upload", nil, unsized{strings.NewReader(strings.Repeat("b", 1000))})
	if held := s.held.all(); got.code != 202 || len(held) != 1 || len(held[0].Body) != 1000 {
		t.Errorf("a body of exactly max_body: %d %q", got.code, got.body)
	}
	if n := len(s.up.all()); n != 0 {
		t.Errorf("the upstream saw %d requests", n)
	}
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// TestStageRefuses: a held body carrying another secret's placeholder is
// denied and not kept; a failing Hold answers 503 with its reason; plain
// HTTP carrying the host's own placeholder is denied (no substitution in
// the clear).
func TestStageRefuses(t *testing.T) {
	pol, ph, otherPH := stagePolicy(t, Stage{Host: "api.stage.test"})
	s := newStageSetup(t, pol, "api.stage.test")

	got := s.do(t, "POST", "https://api.stage.test/x", map[string]string{"Authorization": "Bearer " + ph}, strings.NewReader(`{"key": "`+otherPH+`"}`))
	if got.code != 403 || !strings.Contains(got.body, "placeholder of the secret OTHER_KEY") {
		t.Errorf("another secret's placeholder in a held body: %d %q", got.code, got.body)
	}
	if r := s.h.last(t); r.Allowed || r.Rule != "placeholder OTHER_KEY" {
		t.Errorf("record %+v", r)
	}
	// In a header, too.
	got = s.do(t, "POST", "https://api.stage.test/x", map[string]string{"X-Other": otherPH}, strings.NewReader("{}"))
	if got.code != 403 || !strings.Contains(got.body, "placeholder of the secret OTHER_KEY") {
		t.Errorf("another secret's placeholder in a held request's header: %d %q", got.code, got.body)
	}
	if n := len(s.held.all()); n != 0 {
		t.Errorf("%d requests held with another secret's placeholder", n)
	}

	s.held.fail(errors.New("the disk is full"))
	got = s.do(t, "POST", "https://api.stage.test/x", nil, strings.NewReader("{}"))
	if got.code != 503 || !strings.Contains(got.body, "and it could not be kept: the disk is full") {
		t.Errorf("a failing Hold: %d %q", got.code, got.body)
	}
	if r := s.h.last(t); r.Allowed || !r.Held || r.Status != 503 || r.Error != "the disk is full" {
		t.Errorf("record %+v", r)
	}
	s.held.fail(nil)

	// Plain HTTP to the staged host is held too, but never with the
	// placeholder.
	s.h.net.add("api.stage.test:80", "127.0.0.1:9") // never dialled
	got = s.do(t, "POST", "http://api.stage.test/x", map[string]string{"Authorization": "Bearer " + ph}, strings.NewReader("{}"))
	if got.code != 403 || !strings.Contains(got.body, "placeholder of the secret STAGE_TOKEN") {
		t.Errorf("the placeholder over plain HTTP: %d %q", got.code, got.body)
	}
	got = s.do(t, "POST", "http://api.stage.test/x?q=1", nil, strings.NewReader("{}"))
	if held := s.held.all(); got.code != 202 || len(held) != 1 || held[0].Scheme != "http" || held[0].Port != 80 || held[0].URL() != "http://api.stage.test/x?q=1" {
		t.Errorf("plain HTTP held: %d %q %+v", got.code, got.body, held)
	}
	if n := len(s.up.all()); n != 0 {
		t.Errorf("the upstream saw %d requests", n)
	}

	// A proxy with nowhere to keep them refuses.
	h := newHarness(t, &Policy{Stage: []Stage{{Host: "api.stage.test"}}})
	h.net.add("api.stage.test:80", "127.0.0.1:9")
	resp, err := h.client().Post("http://api.stage.test/x", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "nowhere to keep them") {
		t.Errorf("without Hold: %d %q", resp.StatusCode, b)
	}
}

// TestSendHeld: a request held through the proxy and then sent with Send
// reaches the upstream exactly as the agent sent it, with the real
// credential where the placeholder was.
func TestSendHeld(t *testing.T) {
	pol, ph, _ := stagePolicy(t, Stage{Host: "api.stage.test"})
	s := newStageSetup(t, pol, "api.stage.test")
	body := "line one\nline two \x00\xff"
	header := map[string]string{
		"Authorization":        "Bearer " + ph,
		"Content-Type":         "application/octet-stream",
		"X-GitHub-Api-Version": "2022-11-28",
		"Idempotency-Key":      "k-1",
	}
	if got := s.do(t, "PATCH", "https://api.stage.test/repos/o/r/issues/5?x=%2F&y=1", header, strings.NewReader(body)); got.code != 202 {
		t.Fatalf("held: %d %q", got.code, got.body)
	}
	held := s.held.all()[0]
	// Sent later, from another proxy that is not serving (the host's, at
	// apply).
	p := New(Config{Resolve: s.h.net.resolve, Dial: s.h.net.dial, RootCAs: s.h.roots}, pol)
	sent, err := p.Send(context.Background(), held, &pol.Secrets[0])
	if err != nil {
		t.Fatal(err)
	}
	if !sent.Wrote || sent.Status != 200 || string(sent.Body) != "upstream got PATCH /repos/o/r/issues/5" || sent.Truncated {
		t.Errorf("sent %+v", sent)
	}
	reqs := s.up.all()
	if len(reqs) != 1 {
		t.Fatalf("the upstream saw %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != "PATCH" || r.Path != "/repos/o/r/issues/5" || r.Query != "x=%2F&y=1" || string(r.Body) != body {
		t.Errorf("the upstream saw %s %s?%s %q", r.Method, r.Path, r.Query, r.Body)
	}
	for k, v := range header {
		if k == "Authorization" {
			v = "Bearer tok-real-value"
		}
		if got := r.Header.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("the upstream saw %s %q, want %q", k, got, v)
		}
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			if strings.Contains(v, PlaceholderPrefix) {
				t.Errorf("the upstream saw a placeholder in %s: %q", k, v)
			}
		}
	}
	if ua := r.Header.Get("User-Agent"); ua != held.Header.Get("User-Agent") {
		t.Errorf("User-Agent %q, want the agent's %q", ua, held.Header.Get("User-Agent"))
	}

	// The path and query exactly as held, whatever they hold.
	held = Held{Scheme: "https", Host: "api.stage.test", Port: 443, Method: "POST", Path: "/a%2Fb/c%20d/%E2%80%AE", Query: "q=a#b&r=%ZZ"}
	if _, err := p.Send(context.Background(), held, nil); err != nil {
		t.Fatal(err)
	}
	if r := s.up.all()[1]; r.Path != held.Path || r.Query != held.Query {
		t.Errorf("the upstream saw %q ? %q, want %q ? %q", r.Path, r.Query, held.Path, held.Query)
	}
}

// TestSendRefuses: Send sends a secret only to its own host over HTTPS,
// never to an address the guard refuses; Wrote says whether anything
// may have left.
func TestSendRefuses(t *testing.T) {
	pol, _, _ := stagePolicy(t, Stage{Host: "api.stage.test"})
	s := newStageSetup(t, pol, "api.stage.test", "other.test")
	s.h.net.point("lan.stage.test", "10.0.0.1")
	s.h.net.add("10.0.0.1:443", s.addr)
	p := New(Config{Resolve: s.h.net.resolve, Dial: s.h.net.dial, RootCAs: s.h.roots}, pol)
	ctx := context.Background()
	secret := &pol.Secrets[0]
	held := Held{Scheme: "https", Host: "api.stage.test", Port: 443, Method: "POST", Path: "/x", Header: http.Header{},
		Body: []byte("{}"), Secret: &HeldSecret{Name: "STAGE_TOKEN", Header: "Authorization", Parts: []string{"Bearer ", ""}}}

	// The secret configured for another host now.
	moved := *secret
	moved.Host = "other.test"
	if sent, err := p.Send(ctx, held, &moved); !errors.Is(err, ErrSecretHost) || sent.Wrote {
		t.Errorf("a secret for another host: %+v, %v", sent, err)
	}
	// A held request for another host carrying the secret's place.
	elsewhere := held
	elsewhere.Host = "other.test"
	if _, err := p.Send(ctx, elsewhere, secret); !errors.Is(err, ErrSecretHost) {
		t.Errorf("a held request to another host with the secret: %v", err)
	}
	// Over plain HTTP.
	plain := held
	plain.Scheme, plain.Port = "http", 80
	if _, err := p.Send(ctx, plain, secret); !errors.Is(err, ErrSecretHost) {
		t.Errorf("plain HTTP with the secret: %v", err)
	}
	// Another port.
	port := held
	port.Port = 8443
	if _, err := p.Send(ctx, port, secret); !errors.Is(err, ErrSecretHost) {
		t.Errorf("another port with the secret: %v", err)
	}
	// The secret no longer configured.
	if _, err := p.Send(ctx, held, nil); err == nil || !strings.Contains(err.Error(), "STAGE_TOKEN, which is not configured now") {
		t.Errorf("no secret: %v", err)
	}
	other := pol.Secrets[1]
	if _, err := p.Send(ctx, held, &other); err == nil || !strings.Contains(err.Error(), "not configured now") {
		t.Errorf("another secret: %v", err)
	}
	// A Source that fails sends nothing.
	failing := *secret
	failing.Value, failing.Source = "", func(context.Context) (string, error) { return "", errors.New("sign in again") }
	if sent, err := p.Send(ctx, held, &failing); err == nil || !strings.Contains(err.Error(), "sign in again") || sent.Wrote {
		t.Errorf("a failing source: %+v, %v", sent, err)
	}

	// A held request that does not read as one of its host: a path that
	// is no path would make the URL another host's.
	for _, bad := range []Held{
		{Scheme: "https", Host: "api.stage.test", Port: 443, Method: "POST", Path: "@evil.test/x", Secret: held.Secret},
		{Scheme: "https", Host: "api.stage.test", Port: 443, Method: "POST", Path: "*", Secret: held.Secret},
		{Scheme: "https", Host: "api.stage.test", Port: 443, Method: "POST", Path: ".evil.test/x", Secret: held.Secret},
		{Scheme: "https", Host: "api.stage.test/x", Port: 443, Method: "POST", Path: "/"},
		{Scheme: "https", Host: "user@api.stage.test", Port: 443, Method: "POST", Path: "/"},
		{Scheme: "ftp", Host: "api.stage.test", Port: 443, Method: "POST", Path: "/"},
		{Scheme: "https", Host: "api.stage.test", Port: 0, Method: "POST", Path: "/"},
		{Scheme: "https", Host: "api.stage.test", Port: 443, Method: "BAD METHOD", Path: "/"},
	} {
		if sent, err := p.Send(ctx, bad, secret); err == nil || sent.Wrote {
			t.Errorf("Send(%s %s://%s:%d %q): %+v, %v; want it refused", bad.Method, bad.Scheme, bad.Host, bad.Port, bad.Path, sent, err)
		}
	}

	// A name that resolves to the host's network.
	lan := held
	lan.Host, lan.Secret = "lan.stage.test", nil
	sent, err := p.Send(ctx, lan, nil)
	var g *guardError
	if !errors.As(err, &g) || sent.Wrote || !strings.Contains(err.Error(), "lan.stage.test resolves to 10.0.0.1") {
		t.Errorf("a guarded address: %+v, %v", sent, err)
	}
	// No route: nothing written.
	gone := held
	gone.Host, gone.Secret = "gone.stage.test", nil
	if sent, err := p.Send(ctx, gone, nil); err == nil || sent.Wrote {
		t.Errorf("a host that cannot be reached: %+v, %v", sent, err)
	}
	if n := len(s.up.all()); n != 0 {
		t.Errorf("the upstream saw %d requests", n)
	}
	if d := strings.Join(s.h.net.dialled(), " "); strings.Contains(d, "10.0.0.1") {
		t.Errorf("dialled %s", d)
	}
}

// TestSendAnswer: the answer's body is kept up to MaxSentBody; an
// answer the upstream compressed because the agent's client asked for it
// is kept readable.
func TestSendAnswer(t *testing.T) {
	h := newHarness(t, &Policy{})
	big := bytes.Repeat([]byte("0123456789abcdef"), (MaxSentBody+1000)/16)
	up := upstreamTLS(t, h, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Write(big)
		case "/gzip":
			if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				fmt.Fprint(w, `{"id": 1}`)
				return
			}
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			fmt.Fprint(zw, `{"id": 1}`)
			zw.Close()
		case "/slow":
			w.WriteHeader(201)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	})
	h.net.add("answer.test:443", up.Listener.Addr().String())
	p := New(Config{Resolve: h.net.resolve, Dial: h.net.dial, RootCAs: h.roots}, &Policy{})
	held := Held{Scheme: "https", Host: "answer.test", Port: 443, Method: "POST", Path: "/big", Header: http.Header{"Accept-Encoding": {"gzip, deflate"}}}
	sent, err := p.Send(context.Background(), held, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !sent.Truncated || len(sent.Body) != MaxSentBody || !bytes.Equal(sent.Body, big[:MaxSentBody]) || sent.Status != 200 || !sent.Wrote {
		t.Errorf("a large answer: %d bytes, truncated %v, status %d", len(sent.Body), sent.Truncated, sent.Status)
	}
	held.Path = "/gzip"
	sent, err = p.Send(context.Background(), held, nil)
	if err != nil || string(sent.Body) != `{"id": 1}` || sent.Truncated {
		t.Errorf("a compressed answer: %q, %v", sent.Body, err)
	}
	// An answer that never ends: Send returns when ctx does, with what
	// it has and Wrote set.
	held.Path = "/slow"
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	sent, err = p.Send(ctx, held, nil)
	if err == nil || !sent.Wrote || sent.Status != 201 {
		t.Errorf("an answer cut by ctx: %+v, %v", sent, err)
	}
}

func TestStageValidate(t *testing.T) {
	tests := []struct {
		stage Stage
		want  []string // nil: valid
	}{
		{Stage{Host: "api.github.com"}, nil},
		{Stage{Host: "*.example.com", Port: 8443, Methods: []string{"POST"}, Paths: []string{"/a/*/b", "/api/**", "/v1/*.json", "/"}, MaxBody: MaxStageBody,
			Reply: Reply{Status: 201, Header: map[string]string{"X-Id": "{{id}}"}, Body: `{"id": {{id}}}`}}, nil},
		{Stage{Host: "h.com", Reply: Reply{Status: 204}}, nil},
		{Stage{Host: ""}, []string{"empty host"}},
		{Stage{Host: "*"}, []string{"wildcard"}},
		{Stage{Host: "h.com", Port: 70000}, []string{"port 70000"}},
		{Stage{Host: "h.com", Methods: []string{"post"}}, []string{`method "post"`}},
		{Stage{Host: "h.com", Methods: []string{"CONNECT"}}, []string{`method "CONNECT"`}},
		{Stage{Host: "h.com", Paths: []string{"repos/x"}}, []string{"absolute path"}},
		{Stage{Host: "h.com", Paths: []string{"/a**/b"}}, []string{"whole segments"}},
		{Stage{Host: "h.com", Paths: []string{"/a/[b"}}, []string{`segment "[b"`}},
		{Stage{Host: "h.com", Paths: []string{""}}, []string{"absolute path"}},
		{Stage{Host: "h.com", Reply: Reply{Status: 404}}, []string{"reply status 404"}},
		{Stage{Host: "h.com", Reply: Reply{Status: 302}}, []string{"reply status 302"}},
		{Stage{Host: "h.com", Reply: Reply{Status: 204, Body: "x"}}, []string{"204 has no body"}},
		{Stage{Host: "h.com", Reply: Reply{Header: map[string]string{"Bad Name": "x"}}}, []string{"not a valid header name"}},
		{Stage{Host: "h.com", Reply: Reply{Header: map[string]string{"X-A": "a\r\nSet-Cookie: x"}}}, []string{"line break"}},
		{Stage{Host: "h.com", Reply: Reply{Header: map[string]string{"content-length": "5"}}}, []string{"set by the proxy"}},
		{Stage{Host: "h.com", MaxBody: -1}, []string{"max_body -1"}},
		{Stage{Host: "h.com", MaxBody: MaxStageBody + 1}, []string{"max_body"}},
		// Every problem at once.
		{Stage{Host: "*", Paths: []string{"x"}, Reply: Reply{Status: 500}}, []string{"wildcard", "absolute path", "reply status 500"}},
	}
	for _, tt := range tests {
		err := tt.stage.Validate()
		if tt.want == nil {
			if err != nil {
				t.Errorf("Validate(%+v): %v", tt.stage, err)
			}
			continue
		}
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Validate(%+v) = %v, want it to say %q", tt.stage, err, w)
			}
		}
	}
	pol := &Policy{Stage: []Stage{{Host: "ok.com"}, {Host: "bad.com", Reply: Reply{Status: 500}}}}
	if err := pol.Validate(); err == nil || !strings.Contains(err.Error(), "stage bad.com (POST,PUT,PATCH,DELETE): reply status 500") {
		t.Errorf("Policy.Validate: %v", err)
	}
	if !pol.Inspects() {
		t.Error("a policy with a stage does not inspect")
	}
	if got := (Stage{Host: "api.github.com", Methods: []string{"POST"}, Paths: []string{"/a/**", "/b"}}).String(); got != "api.github.com (POST) /a/** /b" {
		t.Errorf("String() = %q", got)
	}
}

func TestMatchPath(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"/repos/*/*/issues/*/comments", "/repos/o/r/issues/12/comments", true},
		{"/repos/*/*/issues/*/comments", "/repos/o/r/issues/12/comments/3", false},
		{"/repos/*/*/issues/*/comments", "/repos/o/issues/12/comments", false},
		{"/repos/*/*/issues/*/comments", "/repos/o/r/pulls/12/comments", false},
		{"/api/**", "/api", true},
		{"/api/**", "/api/", true},
		{"/api/**", "/api/a", true},
		{"/api/**", "/api/a/b/c", true},
		{"/api/**", "/apis/a", false},
		{"/api/**", "/", false},
		{"/**/comments", "/comments", true},
		{"/**/comments", "/a/b/comments", true},
		{"/**/comments", "/a/b/comments/x", false},
		{"/a/**/b/**/c", "/a/x/b/y/z/c", true},
		{"/a/**/b/**/c", "/a/b/c", true},
		{"/a/**/b/**/c", "/a/c/b", false},
		{"/**", "/anything/at/all", true},
		{"/**", "/", true},
		{"/v1/*.json", "/v1/send.json", true},
		{"/v1/*.json", "/v1/send.xml", false},
		{"/v1/*.json", "/v1/a/send.json", false},
		{"/v?/x", "/v2/x", true},
		{"/[ab]/x", "/b/x", true},
		{"/", "/", true},
		{"/", "/a", false},
		// The path as it is: Stage.holds tries the other spellings.
		{"/a", "/a/", false},
		{"/a/b", "/a//b", false},
		{"/a/b", "/a/./b", false},
		{"/a/*", "/a/", true},
		{"/a/*", "/a/x", true},
	}
	for _, tt := range tests {
		if got := matchPath(tt.pattern, tt.path); got != tt.want {
			t.Errorf("matchPath(%q, %q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
}

// TestMatchPathCost: the guest chooses the path; many ** in a pattern
// and a path of many segments stay cheap.
func TestMatchPathCost(t *testing.T) {
	pattern := "/" + strings.Repeat("**/a/", 12) + "b"
	p := "/" + strings.Repeat("a/", 5000) + "c"
	done := make(chan bool, 1)
	go func() { done <- matchPath(pattern, p) }()
	select {
	case got := <-done:
		if got {
			t.Error("matched")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("matchPath of 12 ** against 5000 segments runs for more than 5s")
	}
}

// FuzzMatchPath: a pattern that checks out never panics against any
// path, and "/**" matches every path.
func FuzzMatchPath(f *testing.F) {
	for _, s := range [][2]string{{"/repos/*/*/issues/*/comments", "/repos/o/r/issues/1/comments"}, {"/api/**", "/api/x/y"}, {"/**/x/**", "//x//"}, {"/[a-", "/b"}, {"/v1/*.json", "/v1/../v1/a.json"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, p string) {
		if checkPathPattern(pattern) != nil {
			return
		}
		got := matchPath(pattern, p)
		if pattern == "/**" && !got {
			t.Fatalf("/** does not match %q", p)
		}
		if again := matchPath(pattern, p); again != got {
			t.Fatalf("matchPath(%q, %q) changed its mind", pattern, p)
		}
	})
}

// TestStageConcurrent: requests held at once each get the number Hold
// gave their own request.
func TestStageConcurrent(t *testing.T) {
	pol, _, _ := stagePolicy(t, Stage{Host: "api.stage.test", Reply: Reply{Status: 201, Body: `{"id": {{id}}}`}})
	s := newStageSetup(t, pol, "api.stage.test")
	const n = 24
	ids := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// Not s.do: t.Fatal belongs to the test's goroutine.
			resp, err := s.c.Post(fmt.Sprintf("https://api.stage.test/n/%d", i), "text/plain", strings.NewReader(fmt.Sprintf("body %d", i)))
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			var v struct{ ID int }
			if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != 201 || resp.Header.Get("X-Airlock-Held") != fmt.Sprint(v.ID) {
				t.Errorf("request %d: %d %+v %v", i, resp.StatusCode, v, err)
			}
			ids[i] = v.ID
		})
	}
	wg.Wait()
	held := s.held.all()
	if len(held) != n {
		t.Fatalf("%d held, want %d", len(held), n)
	}
	for i, id := range ids {
		if id < s.held.first || id-s.held.first >= n {
			t.Fatalf("request %d was answered with action %d", i, id)
		}
		h := held[id-s.held.first]
		if h.Path != fmt.Sprintf("/n/%d", i) || string(h.Body) != fmt.Sprintf("body %d", i) {
			t.Errorf("request %d was answered with action %d, which is %s %q", i, id, h.Path, h.Body)
		}
	}
}
