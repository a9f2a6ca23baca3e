package fakevendor

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// testClient reaches srv under the vendors' names, trusting its CA, as
// the egress proxy does.
func testClient(srv *Server) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:       srv.Dial,
		TLSClientConfig:   &tls.Config{RootCAs: srv.RootCAs},
		ForceAttemptHTTP2: true,
	}}
}

// send makes one request of method to url with header and body (its
// JSON; nil for none); the response is closed when the test ends.
func send(t *testing.T, c *http.Client, method, url string, header http.Header, body any) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// checkWebSocketRefused: a WebSocket handshake at url (HTTP/1.1, as one
// is) gets 426, on which Codex falls back to HTTPS.
func checkWebSocketRefused(t *testing.T, srv *Server, url string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: srv.Dial, TLSClientConfig: &tls.Config{RootCAs: srv.RootCAs, NextProtos: []string{"http/1.1"}}}}
	resp := send(t, c, http.MethodGet, url, http.Header{
		"Connection": {"Upgrade"}, "Upgrade": {"websocket"},
		"Sec-WebSocket-Version": {"13"}, "Sec-WebSocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="},
	}, nil)
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Errorf("WebSocket upgrade at %s answered %d, want 426", url, resp.StatusCode)
	}
}
