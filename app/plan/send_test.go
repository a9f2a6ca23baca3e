package plan

import (
	"context"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/sandbox"
)

// TestSenderUsesTheUserSecretAndDeny: the sender puts the user's own
// secret where the placeholder was, for the host the secret names only,
// and refuses a host the user denies now without sending anything.
func TestSenderUsesTheUserSecretAndDeny(t *testing.T) {
	var got []*http.Request
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r)
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte(`[network]
deny = ["denied.example.com"]

[[network.secret]]
host = "example.com"
header = "Authorization"
env = "EXAMPLE_TOKEN"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	pl := &Planner{Home: t.TempDir(), UserConfig: cfg,
		Getenv: func(k string) string {
			if k == "EXAMPLE_TOKEN" {
				return "real-token"
			}
			return ""
		},
		// httptest's certificate is for example.com.
		SendDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		},
		SendRootCAs: roots}
	send, err := pl.Sender()
	if err != nil {
		t.Fatal(err)
	}
	a := sandbox.Action{ID: 1, Held: egress.Held{Time: time.Now(), Scheme: "https", Host: "example.com", Port: 443, Method: "POST", Path: "/x",
		Body: []byte("hi"), Secret: &egress.HeldSecret{Name: "EXAMPLE_TOKEN", Header: "Authorization", Parts: []string{"Bearer ", ""}}}}
	res, err := send(context.Background(), a)
	if err != nil || res.Status != 200 || len(got) != 1 || got[0].Header.Get("Authorization") != "Bearer real-token" {
		t.Fatalf("send: %+v %v, upstream saw %d", res, err, len(got))
	}
	a.Host = "denied.example.com"
	a.Secret = nil
	if res, err = send(context.Background(), a); err == nil || !strings.Contains(err.Error(), "denied by your configuration now") || res.Wrote || len(got) != 1 {
		t.Fatalf("send to a denied host: %+v %v", res, err)
	}
	a.Host = "other.example.com"
	a.Secret = &egress.HeldSecret{Name: "EXAMPLE_TOKEN", Header: "Authorization", Parts: []string{"Bearer ", ""}}
	if _, err = send(context.Background(), a); err == nil || !strings.Contains(err.Error(), "not configured for this host") || len(got) != 1 {
		t.Fatalf("the secret to another host: %v", err)
	}
}
