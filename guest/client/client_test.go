package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/testkit/testenv"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/airlock-dev/airlock/guest"
	"github.com/airlock-dev/airlock/guest/agent"
	"github.com/airlock-dev/airlock/guest/client"
)

// agentBin is the airlock-guest binary TestMain builds, so tests run the
// real main as an ordinary process.
var agentBin string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "airlock-guest-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		agentBin = filepath.Join(dir, "airlock-guest")
		build := exec.Command("go", "build", "-o", agentBin, "github.com/airlock-dev/airlock/guest/cmd/airlock-guest")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build airlock-guest: %v\n%s", err, out)
			return 1
		}
		return m.Run()
	}())
}

// testGuest is an agent and a way to dial it.
type testGuest struct {
	dial client.DialFunc
	// pid is the agent's process (the process transport) or 0.
	pid int
	// poweredOff is closed when the agent was asked to power off.
	poweredOff <-chan struct{}
}

// transports start an agent two ways: in this process over net.Pipe, and
// as the real binary over a unix socket (a subreaper, as PID 1 reaps).
var transports = []struct {
	name  string
	start func(t *testing.T) testGuest
}{
	{"pipe", startPipeGuest},
	{"process", startProcessGuest},
}

func startPipeGuest(t *testing.T) testGuest {
	off := make(chan struct{})
	var once sync.Once
	a := agent.New(agent.Config{
		Logger:   nil,
		PowerOff: func() error { once.Do(func() { close(off) }); return nil },
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	dial := func(ctx context.Context) (net.Conn, error) {
		host, guestEnd := net.Pipe()
		wg.Go(func() { _ = a.ServeConn(ctx, guestEnd) })
		return host, nil
	}
	return testGuest{
		dial:       func(context.Context) (net.Conn, error) { return dial(ctx) },
		poweredOff: off,
	}
}

func startProcessGuest(t *testing.T) testGuest {
	g, _ := startProcessGuestWith(t)
	return g
}

// startProcessGuestWith starts the agent binary with serve's flags extra
// and returns it and what it has logged so far.
func startProcessGuestWith(t *testing.T, extra ...string) (testGuest, func() string) {
	sock := filepath.Join(t.TempDir(), "link.sock")
	cmd := exec.Command(agentBin, append([]string{"serve", "--unix", sock, "--subreaper"}, extra...)...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() && stderr.String() != "" {
			t.Logf("agent stderr:\n%s", stderr.String())
		}
	})
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}
	// Wait for the socket (a test may poll; the agent reports nothing).
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := dial(context.Background())
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent never listened on %s: %v\n%s", sock, err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	off := make(chan struct{})
	go func() {
		<-exited
		if waitErr == nil {
			close(off) // a clean exit is the plain process's power off
		}
	}()
	return testGuest{dial: dial, pid: cmd.Process.Pid, poweredOff: off}, stderr.String
}

// lockedBuffer is a bytes.Buffer a process writes while a test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// connect makes first contact with g and returns the client.
func connect(t *testing.T, g testGuest) (*client.Client, client.Identity) {
	t.Helper()
	id, err := client.NewIdentity("sandbox-test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, g.dial, client.Config{Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, id
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name       string
		cmd        client.Command
		stdin      string
		wantOut    string
		wantErrOut string // substring of stderr
		wantExit   *client.ExitError
		wantCode   int
	}{
		{name: "exit 0", cmd: client.Command{Script: "exit 0"}},
		{name: "exit 3", cmd: client.Command{Script: "exit 3"}, wantExit: &client.ExitError{Status: 3}, wantCode: 3},
		{name: "killed", cmd: client.Command{Script: "kill -9 $$"}, wantExit: &client.ExitError{Signal: "KILL"}, wantCode: 137},
		{name: "terminated", cmd: client.Command{Script: "kill -TERM $$"}, wantExit: &client.ExitError{Signal: "TERM"}, wantCode: 143},
		{name: "stdout and stderr", cmd: client.Command{Script: "echo out; echo err >&2"}, wantOut: "out\n", wantErrOut: "err\n"},
		{
			name:    "env and dir",
			cmd:     client.Command{Script: `printf '%s|%s|%s|%s' "$FOO" "$(pwd)" "$PATH" "$TERM"`, Env: map[string]string{"FOO": "bar baz"}, Dir: dir},
			wantOut: "bar baz|" + dir + "|/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|",
		},
		{
			name:    "args are quoted",
			cmd:     client.Command{Args: []string{"printf", `%s\n`, "a b", "it's", "$HOME", "", "*", "x;y"}},
			wantOut: "a b\nit's\n$HOME\n\n*\nx;y\n",
		},
		{name: "stdin", cmd: client.Command{Script: "cat; echo done"}, stdin: "hello\n", wantOut: "hello\ndone\n"},
		{
			name:       "missing command",
			cmd:        client.Command{Args: []string{"no-such-command-airlock"}},
			wantErrOut: "not found",
			wantExit:   &client.ExitError{Status: 127},
			wantCode:   127,
		},
		{name: "pty size", cmd: client.Command{Script: "stty size; echo $TERM", TTY: &client.TTY{Term: "xterm-256color", Rows: 24, Cols: 80}}, wantOut: "24 80\r\nxterm-256color\r\n"},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c, _ := connect(t, tr.start(t))
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					var stdout, stderr bytes.Buffer
					cmd := tt.cmd
					cmd.Stdout, cmd.Stderr = &stdout, &stderr
					if tt.stdin != "" {
						cmd.Stdin = strings.NewReader(tt.stdin)
					}
					err := c.Run(ctx, cmd)
					var ee *client.ExitError
					switch {
					case tt.wantExit == nil && err != nil:
						t.Fatalf("Run: %v (stderr %q)", err, stderr.String())
					case tt.wantExit != nil && !errors.As(err, &ee):
						t.Fatalf("Run = %v, want an *ExitError", err)
					case tt.wantExit != nil:
						if diff := cmp.Diff(tt.wantExit, ee); diff != "" {
							t.Errorf("exit (-want +got):\n%s", diff)
						}
						if ee.ExitCode() != tt.wantCode {
							t.Errorf("ExitCode() = %d, want %d", ee.ExitCode(), tt.wantCode)
						}
					}
					if tt.wantOut != "" || tt.wantErrOut == "" {
						if diff := cmp.Diff(tt.wantOut, stdout.String()); diff != "" {
							t.Errorf("stdout (-want +got):\n%s", diff)
						}
					}
					if !strings.Contains(stderr.String(), tt.wantErrOut) || (tt.wantErrOut == "" && stderr.Len() > 0) {
						t.Errorf("stderr = %q, want %q", stderr.String(), tt.wantErrOut)
					}
				})
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	c, _ := connect(t, startPipeGuest(t))
	ctx := context.Background()
	tests := []struct {
		name string
		cmd  client.Command
		want string
	}{
		{"neither", client.Command{}, "neither Args nor Script"},
		{"both", client.Command{Args: []string{"true"}, Script: "true"}, "both Args and Script"},
		{"missing dir", client.Command{Script: "true", Dir: "/no/such/dir"}, "no directory /no/such/dir"},
		{"relative dir", client.Command{Script: "true", Dir: "rel"}, "not an absolute guest path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Run(ctx, tt.cmd)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

// TestPTYResize runs a shell under a PTY that waits for its window to be
// resized.
func TestPTYResize(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c, _ := connect(t, tr.start(t))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			resize := make(chan client.WindowSize, 1)
			resize <- client.WindowSize{Rows: 30, Cols: 100}
			var out bytes.Buffer
			err := c.Run(ctx, client.Command{
				Script: `tty; while [ "$(stty size)" != "30 100" ]; do sleep 0.01; done; stty size`,
				Stdout: &out,
				TTY:    &client.TTY{Term: "xterm", Rows: 24, Cols: 80, Resize: resize},
			})
			if err != nil {
				t.Fatalf("Run: %v (output %q)", err, out.String())
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\r\n")
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "/dev/pts/") || lines[1] != "30 100" {
				t.Errorf("output %q, want a /dev/pts/N line then 30 100", out.String())
			}
		})
	}
}

// TestRunCancel: when ctx ends, Run returns at once and the remote
// process is killed.
func TestRunCancel(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c, _ := connect(t, tr.start(t))
			pidFile := filepath.Join(t.TempDir(), "pid")
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				errc <- c.Run(ctx, client.Command{Script: "echo $$ > " + pidFile + "; exec sleep 60"})
			}()
			pid := waitForPid(t, pidFile)
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
			waitGone(t, pid)
		})
	}
}

// TestChannelCloseKills: a session closed while its command runs kills
// the command's process group.
func TestChannelCloseKills(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c, _ := connect(t, tr.start(t))
			dir := t.TempDir()
			s, err := c.SSH().NewSession()
			if err != nil {
				t.Fatal(err)
			}
			// The shell and its child both record their pids.
			if err := s.Start("sleep 60 & echo $! > " + dir + "/child; echo $$ > " + dir + "/pid; wait"); err != nil {
				t.Fatal(err)
			}
			shell := waitForPid(t, filepath.Join(dir, "pid"))
			child := waitForPid(t, filepath.Join(dir, "child"))
			s.Close()
			waitGone(t, shell)
			waitGone(t, child)
		})
	}
}

// waitForPid waits until the remote command has written its pid.
func waitForPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no pid in %s", path)
	return 0
}

// waitGone waits until pid no longer exists (not even as a zombie).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	state, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	t.Errorf("process %d still exists: %s", pid, state)
}

// TestOrphansReaped: a background process the command leaves behind is
// reparented to the agent (a subreaper, as PID 1) and reaped when it exits.
func TestOrphansReaped(t *testing.T) {
	g := startProcessGuest(t)
	c, _ := connect(t, g)
	var out bytes.Buffer
	err := c.Run(context.Background(), client.Command{Script: "sleep 0.1 >/dev/null 2>&1 & echo $!", Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
}

func TestSFTP(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c, _ := connect(t, tr.start(t))
			s, err := c.SFTP()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()

			data := make([]byte, 10<<20)
			if _, err := rand.Read(data); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			path := filepath.Join(t.TempDir(), "blob")
			f, err := s.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}

			// The guest sees the same bytes...
			var out bytes.Buffer
			if err := c.Run(context.Background(), client.Command{Args: []string{"sha256sum", path}, Stdout: &out}); err != nil {
				t.Fatal(err)
			}
			if got, want := strings.Fields(out.String())[0], hex.EncodeToString(sum[:]); got != want {
				t.Errorf("guest sha256 %s, want %s", got, want)
			}
			// ...and they come back whole.
			f, err = s.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			if _, err := f.WriteTo(h); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if got := h.Sum(nil); !bytes.Equal(got, sum[:]) {
				t.Errorf("downloaded sha256 %x, want %x", got, sum)
			}
		})
	}
}

// TestIdentity covers first contact, resume and the one accepted key.
func TestIdentity(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			g := tr.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			id, err := client.NewIdentity("sandbox-1")
			if err != nil {
				t.Fatal(err)
			}
			// Resume before any identity is refused.
			if _, err := client.Connect(ctx, g.dial, client.Config{Identity: id, Resume: true}); !errors.Is(err, client.ErrRefused) {
				t.Errorf("resume before first contact: %v, want ErrRefused", err)
			}

			first, err := client.Connect(ctx, g.dial, client.Config{Identity: id})
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()
			w := first.Welcome()
			if w.HostKey == "" || w.Version != guest.ProtocolVersion || w.Arch == "" || w.Error != "" {
				t.Errorf("welcome %+v", w)
			}
			hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(w.HostKey))
			if err != nil {
				t.Fatal(err)
			}

			// A second first contact is refused, even with the same key.
			if _, err := client.Connect(ctx, g.dial, client.Config{Identity: id}); !errors.Is(err, client.ErrRefused) {
				t.Errorf("second first contact: %v, want ErrRefused", err)
			}

			// Resume with the same key works, and the host key is the same.
			again, err := client.Connect(ctx, g.dial, client.Config{Identity: id, Resume: true, HostKey: hostKey})
			if err != nil {
				t.Fatalf("resume: %v", err)
			}
			if err := again.Run(ctx, client.Command{Script: "true"}); err != nil {
				t.Errorf("run after resume: %v", err)
			}
			again.Close()

			// Another key is not accepted.
			other, err := client.NewIdentity("sandbox-1")
			if err != nil {
				t.Fatal(err)
			}
			if c, err := client.Connect(ctx, g.dial, client.Config{Identity: other, Resume: true}); err == nil {
				c.Close()
				t.Error("resume with another key succeeded")
			} else if !strings.Contains(err.Error(), "unable to authenticate") {
				t.Errorf("resume with another key: %v, want an authentication failure", err)
			}

			// A pinned host key that differs is refused.
			wrong, _ := client.NewIdentity("x")
			if _, err := client.Connect(ctx, g.dial, client.Config{Identity: id, Resume: true, HostKey: wrong.Signer.PublicKey()}); err == nil || !strings.Contains(err.Error(), "host key") {
				t.Errorf("resume with a wrong pinned host key: %v", err)
			}

			// The first connection still works.
			if err := first.Run(ctx, client.Command{Script: "true"}); err != nil {
				t.Errorf("first connection after the others: %v", err)
			}
		})
	}
}

// TestHostileHandshakeProcess: malformed handshakes do not take the agent
// down; a good client connects afterwards.
func TestHostileHandshakeProcess(t *testing.T) {
	g := startProcessGuest(t)
	inputs := map[string][]byte{
		"bad magic":    []byte("GET / HTTP/1.1\r\n\r\n"),
		"giant length": append([]byte(guest.Magic), 0x7f, 0xff, 0xff, 0xff),
		"garbage json": append([]byte(guest.Magic), 0, 0, 0, 5, '{', '{', '{', '{', '{'),
		"ssh first":    []byte("SSH-2.0-OpenSSH_9.6\r\n"),
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			conn, err := g.dial(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := conn.Write(in); err != nil {
				t.Fatal(err)
			}
			var w guest.Welcome
			if err := guest.ReadMessage(conn, &w); err == nil && w.Error == "" {
				t.Errorf("hostile handshake welcomed: %+v", w)
			}
			// The agent closes the connection.
			if _, err := io.Copy(io.Discard, conn); err != nil {
				t.Errorf("connection not closed by the agent: %v", err)
			}
		})
	}
	connect(t, g)
	if err := syscall.Kill(g.pid, 0); err != nil {
		t.Errorf("agent died: %v", err)
	}
}

func TestUnknownChannelRejected(t *testing.T) {
	c, _ := connect(t, startPipeGuest(t))
	_, _, err := c.SSH().OpenChannel("x11", nil)
	var oce *ssh.OpenChannelError
	if !errors.As(err, &oce) || oce.Reason != ssh.UnknownChannelType {
		t.Errorf("OpenChannel(x11) = %v, want an unknown channel type rejection", err)
	}
	// Keepalives are answered.
	if ok, _, err := c.SSH().SendRequest("keepalive@openssh.com", true, nil); err != nil || !ok {
		t.Errorf("keepalive: %v %v", ok, err)
	}
}

func TestPowerOff(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			g := tr.start(t)
			c, _ := connect(t, g)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.PowerOff(ctx); err != nil {
				t.Fatalf("PowerOff: %v", err)
			}
			select {
			case <-g.poweredOff:
			case <-ctx.Done():
				t.Fatal("the agent did not power off")
			}
			c.Close()
			if err := c.PowerOff(ctx); err == nil {
				t.Error("PowerOff on a closed client succeeded")
			}
		})
	}
}

func TestConnectContext(t *testing.T) {
	// A guest that never answers: Connect gives up when ctx ends.
	dial := func(context.Context) (net.Conn, error) {
		host, guestEnd := net.Pipe()
		go func() { _, _ = io.Copy(io.Discard, guestEnd) }()
		return host, nil
	}
	id, err := client.NewIdentity("x")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := client.Connect(ctx, dial, client.Config{Identity: id}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Connect = %v, want DeadlineExceeded", err)
	}
}

// TestRunAsUser runs commands as another account of the guest's
// /etc/passwd (the host's, here): uid, groups, HOME, USER and the home as
// the working directory unless Dir says otherwise. Switching user needs
// root, which CI has.
func TestRunAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Skip(t, testenv.Root, "switching user needs root")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		testenv.Skip(t, testenv.Unix, fmt.Sprint("no user nobody: ", err))
	}
	c, _ := connect(t, startPipeGuest(t))
	ctx := context.Background()
	var out, errOut bytes.Buffer
	if err := c.Run(ctx, client.Command{Script: `printf '%s|%s|%s|%s' "$(id -u)" "$HOME" "$USER" "$(pwd)"`, User: "nobody", Stdout: &out, Stderr: &errOut}); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	home := u.HomeDir
	if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
		home = "/" // no such directory: the working directory is /
	}
	got := strings.Split(out.String(), "|")
	if len(got) != 4 || got[0] != u.Uid || got[1] != u.HomeDir || got[2] != "nobody" || got[3] != home {
		t.Errorf("as nobody: %q (uid %s, home %s)", out.String(), u.Uid, u.HomeDir)
	}
	out.Reset()
	dir, err := os.MkdirTemp("", "airlock-user-") // t.TempDir's parent is root's only
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	if err := c.Run(ctx, client.Command{Script: "pwd", User: "nobody", Dir: dir, Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out.String()) != dir {
		t.Errorf("Dir with User: pwd = %q, want %q", out.String(), dir)
	}
	err = c.Run(ctx, client.Command{Script: "true", User: "no-such-user-airlock"})
	if err == nil || !strings.Contains(err.Error(), "no such user") {
		t.Errorf("unknown user: %v", err)
	}
}

// The link's ciphers are the host's choice: ChaCha20-Poly1305 for an
// emulated guest works with the agent, and a cipher the agent does not
// offer fails the handshake, so the choice is not ignored.
func TestConnectCiphers(t *testing.T) {
	g := startPipeGuest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := client.NewIdentity("sandbox-ciphers")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Connect(ctx, g.dial, client.Config{Identity: id, Ciphers: []string{"aes128-cbc"}}); err == nil {
		t.Fatal("a handshake offering only aes128-cbc succeeded")
	}
	g = startPipeGuest(t)
	c, err := client.Connect(ctx, g.dial, client.Config{Identity: id, Ciphers: client.EmulatedCiphers})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out bytes.Buffer
	if err := c.Run(ctx, client.Command{Args: []string{"echo", "over chacha"}, Stdout: &out}); err != nil || out.String() != "over chacha\n" {
		t.Errorf("run: %v, %q", err, out.String())
	}
}
