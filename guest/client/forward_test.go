package client_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestRemoteForward: the host asks the agent to listen on the guest's
// loopback; a connection there reaches the host as a channel, both ways,
// with each side's end of stream passed on. Other addresses are refused.
func TestRemoteForward(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c, _ := connect(t, tr.start(t))
			if _, err := c.SSH().Listen("tcp", "0.0.0.0:0"); err == nil {
				t.Error("a forward on 0.0.0.0 was accepted; only the loopback may be forwarded")
			}
			l, err := c.SSH().Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for {
					conn, err := l.Accept()
					if err != nil {
						return
					}
					go func() {
						defer conn.Close()
						data, _ := io.ReadAll(conn)
						_, _ = conn.Write([]byte(strings.ToUpper(string(data))))
					}()
				}
			}()
			// The agent runs on this host here, so the test is the guest's
			// program too.
			for range 3 {
				g, err := net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				_ = g.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := g.Write([]byte("hello through the link")); err != nil {
					t.Fatal(err)
				}
				_ = g.(*net.TCPConn).CloseWrite()
				got, err := io.ReadAll(bufio.NewReader(g))
				g.Close()
				if err != nil || string(got) != "HELLO THROUGH THE LINK" {
					t.Fatalf("got %q, %v", got, err)
				}
			}
			addr := l.Addr().String()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			// cancel-tcpip-forward closed the guest's listener.
			if g, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				g.Close()
				t.Errorf("%s still accepts after the forward was cancelled", addr)
			}
		})
	}
}
