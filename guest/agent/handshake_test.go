package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/airlock-dev/airlock/guest"
)

// frame returns a length-prefixed message with body b.
func frame(b string) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
	return append(out, b...)
}

func helloBytes(t testing.TB, h guest.Hello) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString(guest.Magic)
	if err := guest.WriteMessage(&buf, h); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func testClientKey(t testing.TB) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return authorizedKey(k)
}

// TestHostileHandshake feeds malformed handshakes to ServeConn: each must
// be refused with an error (and, once the magic was right, a Welcome that
// says why) without hanging or crashing.
func TestHostileHandshake(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name      string
		input     []byte
		resumed   bool   // the agent already has an identity
		hangUp    bool   // the peer hangs up after the input
		wantWelc  string // substring of Welcome.Error; "" means no welcome expected
		wantError string // substring of ServeConn's error
	}{
		{name: "bad magic", input: []byte("SSH-2.0-OpenSSH\r\n"), wantError: "bad magic"},
		{name: "short magic", input: []byte("AIR"), hangUp: true, wantError: "read magic"},
		{name: "giant length", input: append([]byte(guest.Magic), 0xff, 0xff, 0xff, 0xff), wantWelc: "too large", wantError: "too large"},
		{name: "garbage json", input: append([]byte(guest.Magic), frame("{not json")...), wantWelc: "decode message", wantError: "decode"},
		{name: "truncated body", hangUp: true, input: append([]byte(guest.Magic), append(binary.BigEndian.AppendUint32(nil, 100), "{}"...)...), wantError: "read hello"},
		{name: "wrong version", input: helloBytes(t, guest.Hello{Version: 99, ClientKey: testClientKey(t), Time: now}), wantWelc: "protocol version 99", wantError: "protocol version"},
		{name: "no client key", input: helloBytes(t, guest.Hello{Version: guest.ProtocolVersion, Time: now}), wantWelc: "without a client key", wantError: "client key"},
		{name: "bad client key", input: helloBytes(t, guest.Hello{Version: guest.ProtocolVersion, ClientKey: "ssh-ed25519 AAAA", Time: now}), wantWelc: "client key", wantError: "client key"},
		{name: "bad hostname", input: helloBytes(t, guest.Hello{Version: guest.ProtocolVersion, ClientKey: testClientKey(t), Hostname: "a b;rm", Time: now}), wantWelc: "not a valid host name", wantError: "host name"},
		{name: "resume without identity", input: helloBytes(t, guest.Hello{Version: guest.ProtocolVersion, Resume: true, Time: now}), wantWelc: "no identity yet", wantError: "resume refused"},
		{name: "second first contact", resumed: true, input: helloBytes(t, guest.Hello{Version: guest.ProtocolVersion, ClientKey: testClientKey(t), Time: now}), wantWelc: "already has an identity", wantError: "first contact refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(Config{HandshakeTimeout: 5 * time.Second})
			if tt.resumed {
				if _, err := a.accept(guest.Hello{Version: guest.ProtocolVersion, ClientKey: testClientKey(t)}); err != nil {
					t.Fatal(err)
				}
			}
			host, guestEnd := net.Pipe()
			defer host.Close()
			served := make(chan error, 1)
			go func() { served <- a.ServeConn(context.Background(), guestEnd) }()
			go func() {
				_, _ = host.Write(tt.input)
				if tt.hangUp {
					host.Close() // end the stream mid-message
				}
			}()

			var w guest.Welcome
			readErr := guest.ReadMessage(host, &w)
			err := <-served
			if err == nil || !strings.Contains(err.Error(), tt.wantError) {
				t.Errorf("ServeConn error = %v, want it to mention %q", err, tt.wantError)
			}
			if tt.wantWelc == "" {
				if readErr == nil {
					t.Errorf("got welcome %+v, want the connection closed without one", w)
				}
				return
			}
			if readErr != nil {
				t.Fatalf("read welcome: %v", readErr)
			}
			if !strings.Contains(w.Error, tt.wantWelc) || w.HostKey != "" || w.Version != guest.ProtocolVersion {
				t.Errorf("welcome = %+v, want a refusal mentioning %q", w, tt.wantWelc)
			}
		})
	}
}

// TestHandshakeTimeout: a peer that says nothing is dropped.
func TestHandshakeTimeout(t *testing.T) {
	a := New(Config{HandshakeTimeout: 50 * time.Millisecond})
	host, guestEnd := net.Pipe()
	defer host.Close()
	err := a.ServeConn(context.Background(), guestEnd)
	if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "timeout") {
		t.Errorf("ServeConn = %v, want a timeout", err)
	}
}

func TestReadHello(t *testing.T) {
	key := testClientKey(t)
	want := guest.Hello{Version: guest.ProtocolVersion, ClientKey: key, Hostname: "sandbox-1.airlock", Entropy: []byte{1, 2, 3},
		Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	in := append(helloBytes(t, want), "SSH-2.0-rest"...)
	r := bytes.NewReader(in)
	got, err := readHello(r)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hello (-want +got):\n%s", diff)
	}
	rest, _ := io.ReadAll(r)
	if string(rest) != "SSH-2.0-rest" {
		t.Errorf("readHello consumed past the hello: rest %q", rest)
	}
}

func TestValidHostname(t *testing.T) {
	tests := map[string]bool{
		"sandbox": true, "sandbox-1.airlock.local": true, "a": true, strings.Repeat("a", 64): true,
		"": false, strings.Repeat("a", 65): false, "-a": false, "a-": false, "a..b": false,
		"a b": false, "a_b": false, "a/b": false, "ä": false,
	}
	for name, want := range tests {
		if got := validHostname(name); got != want {
			t.Errorf("validHostname(%q) = %v, want %v", name, got, want)
		}
	}
}

// FuzzReadHello: whatever the bytes, readHello returns (it never panics
// or allocates past MaxMessage), and what it accepts is a well-formed
// hello of our version.
func FuzzReadHello(f *testing.F) {
	key := testClientKey(f)
	f.Add(helloBytes(f, guest.Hello{Version: guest.ProtocolVersion, ClientKey: key, Hostname: "h", Time: time.Unix(0, 0)}))
	f.Add(helloBytes(f, guest.Hello{Version: guest.ProtocolVersion, Resume: true}))
	f.Add(append([]byte(guest.Magic), 0xff, 0xff, 0xff, 0xff))
	f.Add(append([]byte(guest.Magic), frame(`{"version":1,"client_key":"ssh-ed25519 AAAA"}`)...))
	f.Add(append([]byte(guest.Magic), frame(`{"version":1,"entropy":"!!"}`)...))
	f.Add([]byte("AIRLOCK0"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := readHello(bytes.NewReader(b))
		if err != nil {
			return
		}
		if h.Version != guest.ProtocolVersion {
			t.Fatalf("accepted version %d", h.Version)
		}
		if !h.Resume {
			if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(h.ClientKey)); err != nil {
				t.Fatalf("accepted bad client key %q", h.ClientKey)
			}
			if h.Hostname != "" && !validHostname(h.Hostname) {
				t.Fatalf("accepted bad hostname %q", h.Hostname)
			}
		}
	})
}

// TestProbeThenFirstContact: a probe is answered once the agent is ready,
// without a host key and without taking an identity; the first contact
// that follows mounts the disks it names, and a second one is refused.
func TestProbeThenFirstContact(t *testing.T) {
	ready := make(chan struct{})
	var mounted []string
	afterFirst, snapshotted := 0, 0
	a := New(Config{Ready: ready, AfterFirstCommand: func() { afterFirst++ }, BeforeSnapshot: func() { snapshotted++ },
		MountDisks: func(d []string) error { mounted = append(mounted, d...); return nil }})

	host, guestEnd := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- a.ServeConn(context.Background(), guestEnd) }()
	if _, err := host.Write([]byte(guest.ProbeMagic)); err != nil {
		t.Fatal(err)
	}
	answered := make(chan guest.Welcome, 1)
	go func() {
		var w guest.Welcome
		guest.ReadMessage(host, &w)
		answered <- w
	}()
	select {
	case <-answered:
		t.Fatal("the probe was answered before the agent was ready")
	case <-time.After(50 * time.Millisecond):
	}
	close(ready)
	w := <-answered
	if err := <-done; err != nil {
		t.Fatalf("probe: %v", err)
	}
	if w.Version != guest.ProtocolVersion || w.HostKey != "" || w.Error != "" {
		t.Errorf("probe answer %+v, want a version and no host key", w)
	}
	if afterFirst != 1 || snapshotted != 1 {
		t.Errorf("probe ran the deferred work %d times and the snapshot hook %d times, want 1 and 1", afterFirst, snapshotted)
	}
	if a.id != nil {
		t.Fatal("the probe set an identity")
	}

	id, err := a.accept(guest.Hello{Version: guest.ProtocolVersion, ClientKey: testClientKey(t), Disks: []string{"vdb:/workspace"}})
	if err != nil || id == nil {
		t.Fatalf("first contact after a probe: %v", err)
	}
	if diff := cmp.Diff([]string{"vdb:/workspace"}, mounted); diff != "" {
		t.Errorf("mounted (-want +got):\n%s", diff)
	}
	if _, err := a.accept(guest.Hello{Version: guest.ProtocolVersion, ClientKey: testClientKey(t)}); err == nil {
		t.Error("a second first contact was accepted")
	}
}

func TestHelloDisks(t *testing.T) {
	key := testClientKey(t)
	for _, tt := range []struct {
		disks []string
		ok    bool
	}{
		{[]string{"vda:/workspace"}, true},
		{[]string{"vda:/workspace", "vdb:/data"}, true},
		{[]string{"vda"}, false},
		{[]string{"../vda:/workspace"}, false},
		{[]string{"vda:relative"}, false},
		{[]string{"vda:/"}, false},
		{[]string{"vda:/a/../b"}, false},
		{[]string{"vda:/w airlock.disk=vdb:/x"}, false},
		{make([]string, maxHelloDisks+1), false},
	} {
		_, err := readHello(bytes.NewReader(helloBytes(t, guest.Hello{Version: guest.ProtocolVersion, ClientKey: key, Disks: tt.disks})))
		if (err == nil) != tt.ok {
			t.Errorf("disks %q: %v, want ok %v", tt.disks, err, tt.ok)
		}
	}
	// An agent that cannot mount refuses a hello naming disks.
	a := New(Config{})
	if _, err := a.accept(guest.Hello{Version: guest.ProtocolVersion, ClientKey: key, Disks: []string{"vda:/workspace"}}); err == nil {
		t.Error("an agent without MountDisks accepted disks")
	}
}
