package egress

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// upgrader is an upstream that switches any request asking for it to a
// raw byte stream and keeps what arrives on it; it records every
// request's method and the headers the proxy let through.
type upgrader struct {
	mu       sync.Mutex
	requests []string
	raw      strings.Builder
}

func (u *upgrader) handler(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.requests = append(u.requests, r.Method+" up="+r.Header.Get("Upgrade")+" override="+r.Header.Get("X-HTTP-Method-Override")+r.Header.Get("X-Method-Override")+r.Header.Get("X-HTTP-Method"))
	u.mu.Unlock()
	if r.Header.Get("Upgrade") != "websocket" {
		io.WriteString(w, "plain")
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	brw.Flush()
	line, _ := brw.ReadString('\n')
	u.mu.Lock()
	u.raw.WriteString(line)
	u.mu.Unlock()
	io.WriteString(conn, "ack "+line)
}

func (u *upgrader) seen() ([]string, string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.requests...), u.raw.String()
}

// TestUpgradePastMethodLimits: a GET that switches the connection to a
// WebSocket would carry raw bytes (a POST to the issues API with the
// secret's placeholder) past the method limit, the stage and the scans.
// On a host with a method limit, a stage or a secret it is refused with
// the reason and how to allow it, and nothing reaches the upstream; a
// rule naming UPGRADE allows it, and so does a host with none of those,
// the switched bytes counted both ways in the record. h2c is dropped
// there instead, the request answered in HTTP/1.1; headers asking a
// server to take a GET as another method are dropped on a guarded host
// and kept elsewhere.
func TestUpgradePastMethodLimits(t *testing.T) {
	ph, _ := NewPlaceholder()
	secret := Secret{Host: "secret.test", Header: "Authorization", Name: "TOKEN", Value: "real", Placeholder: ph}
	pol := &Policy{
		Allow: []Rule{
			mustRule(t, "limited.test", "GET", "HEAD"),
			mustRule(t, "staged.test"), mustRule(t, "secret.test"), mustRule(t, "open.test"),
			mustRule(t, "named.test", "GET", "UPGRADE"),
		},
		Secrets: []Secret{secret},
		Stage:   []Stage{{Host: "staged.test", Methods: []string{"POST"}}},
	}
	h := newHarness(t, pol)
	var up upgrader
	srv := upstreamTLS(t, h, up.handler)
	for _, host := range []string{"limited.test", "staged.test", "secret.test", "named.test"} {
		h.net.add(host+":443", srv.Listener.Addr().String())
	}
	// open.test over plain HTTP: its HTTPS would be a tunnel the proxy
	// relays unseen, upgrade or not.
	plain := httptest.NewServer(http.HandlerFunc(up.handler))
	t.Cleanup(plain.Close)
	h.net.add("open.test:80", plain.Listener.Addr().String())
	// No Timeout: its wrapper hides a switched body's Write.
	c := &http.Client{Transport: h.client().Transport}
	upgrade := func(host string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		scheme := "https://"
		if host == "open.test" {
			scheme = "http://"
		}
		req, _ := http.NewRequest("GET", scheme+host+"/ws", nil)
		if host == secret.Host {
			req.Header.Set("Authorization", "Bearer "+ph)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", host, err)
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	ws := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket"}

	for host, why := range map[string]string{
		"limited.test": `allows GET, HEAD only`,
		"staged.test":  "holds requests to it",
		"secret.test":  "the secret TOKEN is sent to it",
	} {
		resp, body := upgrade(host, ws)
		if resp.StatusCode != http.StatusForbidden {
			resp.Body.Close()
			t.Errorf("%s: a WebSocket upgrade got %d", host, resp.StatusCode)
			continue
		}
		for _, want := range []string{`asks to switch the connection to "websocket"`, why, `"` + host + ` (GET,UPGRADE)"`} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: the refusal does not say %q:\n%s", host, want, body)
			}
		}
		if r := h.last(t); r.Allowed || r.Rule != "upgrade websocket" {
			t.Errorf("%s: record %+v", host, r)
		}
	}
	if reqs, _ := up.seen(); len(reqs) != 0 {
		t.Fatalf("refused upgrades reached the upstream: %q", reqs)
	}

	// Allowed: the switched stream works, and its bytes are counted.
	for _, host := range []string{"open.test", "named.test"} {
		resp, body := upgrade(host, ws)
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("%s: a WebSocket upgrade got %d %s", host, resp.StatusCode, body)
		}
		rw := resp.Body.(io.ReadWriteCloser)
		msg := "POST /repos/me/app/issues " + ph + "\n"
		if _, err := io.WriteString(rw, msg); err != nil {
			t.Fatal(err)
		}
		ack, err := bufio.NewReader(rw).ReadString('\n')
		if err != nil || ack != "ack "+msg {
			t.Errorf("%s: %q %v", host, ack, err)
		}
		rw.Close()
		// The record comes when the switched connection has closed.
		var r Record
		for deadline := time.Now().Add(5 * time.Second); r.Host == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			h.mu.Lock()
			for _, rec := range h.records {
				if rec.Host == host {
					r = rec
				}
			}
			h.mu.Unlock()
		}
		if !r.Allowed || r.Upgrade != "websocket" || r.Status != 101 || r.BytesUp < int64(len(msg)) || r.BytesDown < int64(len("ack "+msg)) {
			t.Errorf("%s: record %+v: want the upgrade and its bytes", host, r)
		}
	}

	// h2c on a guarded host: asked in plain words, answered in HTTP/1.1.
	resp, body := upgrade("limited.test", map[string]string{"Connection": "Upgrade, HTTP2-Settings", "Upgrade": "h2c", "HTTP2-Settings": "AAMAAABkAAQAAP__"})
	if resp.StatusCode != 200 || body != "plain" {
		t.Errorf("h2c on a method-limited host: %d %q", resp.StatusCode, body)
	}
	// Method overrides: dropped where a limit or stage is, kept elsewhere.
	for _, host := range []string{"limited.test", "staged.test", "open.test"} {
		upgrade(host, map[string]string{"X-HTTP-Method-Override": "DELETE", "X-Method-Override": "DELETE", "X-HTTP-Method": "DELETE"})
	}
	reqs, raw := up.seen()
	want := []string{
		"GET up=websocket override=", "GET up=websocket override=", // open, named
		"GET up= override=",                      // h2c, stripped
		"GET up= override=", "GET up= override=", // limited, staged
		"GET up= override=DELETEDELETEDELETE", // open
	}
	if strings.Join(reqs, "\n") != strings.Join(want, "\n") {
		t.Errorf("the upstream saw:\n%s\nwant:\n%s", strings.Join(reqs, "\n"), strings.Join(want, "\n"))
	}
	if strings.Count(raw, "POST /repos/me/app/issues") != 2 {
		t.Errorf("the upstream's raw streams: %q", raw)
	}
}
