package launch_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/qemu"
)

func backend(t testing.TB, home string) vm.Backend {
	return qemu.New(qemu.Config{
		CacheDir: filepath.Join(home, "cache", "qemu"),
		Notice:   func(s string) { t.Log(s) },
	})
}

// boot starts a minimal guest of arch and shuts it down at the end of t.
func boot(t testing.TB, arch vm.Arch) *launch.Guest { return bootWith(t, arch, 0) }

// bootWith is boot with memMiB of guest memory (0: the default).
func bootWith(t testing.TB, arch vm.Arch, memMiB int) *launch.Guest {
	t.Helper()
	testenv.SkipIfShort(t)
	testenv.Image(t, arch)
	home := testenv.Home(t)
	// Not t.Context(): it ends before cleanups run, which would kill the
	// machine before Shutdown could stop it cleanly.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	g, err := launch.Boot(ctx, launch.Options{Home: home, Arch: arch, Backend: backend(t, home), MemoryMiB: memMiB})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s guest ready in %s over %s", arch, g.BootTime.Round(time.Millisecond), g.Machine.LinkKind())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return g
}

// run runs a script in the guest and returns stdout, stderr and the error.
func run(t *testing.T, g *launch.Guest, cmd client.Command) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := g.Client.Run(ctx, cmd)
	return stdout.String(), stderr.String(), err
}

func TestMinimalAMD64(t *testing.T) {
	g := boot(t, vm.AMD64)

	t.Run("uname", func(t *testing.T) {
		out, _, err := run(t, g, client.Command{Args: []string{"uname", "-m"}})
		if err != nil || strings.TrimSpace(out) != "x86_64" {
			t.Fatalf("uname -m = %q, %v; want x86_64", out, err)
		}
	})

	t.Run("exit codes", func(t *testing.T) {
		tests := []struct {
			script string
			code   int
			signal string
		}{
			{"exit 0", 0, ""},
			{"exit 3", 3, ""},
			{"kill -TERM $$", 128 + 15, "TERM"},
			{"kill -KILL $$", 128 + 9, "KILL"},
		}
		for _, tt := range tests {
			_, _, err := run(t, g, client.Command{Script: tt.script})
			var ee *client.ExitError
			switch {
			case tt.code == 0 && err != nil:
				t.Errorf("%q: %v, want success", tt.script, err)
			case tt.code == 0:
			case !errors.As(err, &ee):
				t.Errorf("%q: %v, want an ExitError", tt.script, err)
			case ee.ExitCode() != tt.code || ee.Signal != tt.signal:
				t.Errorf("%q: exit %d signal %q, want %d %q", tt.script, ee.ExitCode(), ee.Signal, tt.code, tt.signal)
			}
		}
	})

	t.Run("command not found", func(t *testing.T) {
		_, stderr, err := run(t, g, client.Command{Args: []string{"no-such-command", "x"}})
		var ee *client.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 127 {
			t.Fatalf("err = %v, want exit 127", err)
		}
		if !strings.Contains(stderr, "no-such-command: not found") {
			t.Errorf("stderr = %q, want the shell's not-found message", stderr)
		}
	})

	t.Run("stdout and stderr stay separate", func(t *testing.T) {
		out, errOut, err := run(t, g, client.Command{Script: "echo to-out; echo to-err >&2; echo more-out"})
		if err != nil {
			t.Fatal(err)
		}
		if out != "to-out\nmore-out\n" || errOut != "to-err\n" {
			t.Errorf("stdout %q stderr %q", out, errOut)
		}
	})

	t.Run("env and workdir", func(t *testing.T) {
		out, _, err := run(t, g, client.Command{Script: `echo "$GREETING"; pwd`, Env: map[string]string{"GREETING": "hi there"}, Dir: "/tmp"})
		if err != nil || out != "hi there\n/tmp\n" {
			t.Errorf("out %q, err %v", out, err)
		}
	})

	t.Run("pty", func(t *testing.T) {
		resize := make(chan client.WindowSize, 1)
		out := &watchWriter{want: "30 100", seen: make(chan struct{})}
		stdinR, stdinW := io.Pipe()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- g.Client.Run(ctx, client.Command{
				// A resize and the input travel apart (the window's
				// change is a message of its own, as SIGWINCH is
				// asynchronous on any terminal): the size is read
				// again until it changes, for at most 5 s.
				Script: `tty; stty size; read line; n=0; while [ "$(stty size)" != "40 120" ] && [ $n -lt 100 ]; do sleep 0.05; n=$((n+1)); done; stty size; echo "got $line"`,
				Stdin:  stdinR, Stdout: out,
				TTY: &client.TTY{Term: "xterm", Rows: 30, Cols: 100, Resize: resize},
			})
		}()
		select {
		case <-out.seen:
		case err := <-done:
			t.Fatalf("pty session ended early: %v (output %q)", err, out.String())
		}
		resize <- client.WindowSize{Rows: 40, Cols: 120}
		io.WriteString(stdinW, "ping\n")
		if err := <-done; err != nil {
			t.Fatalf("pty session: %v (output %q)", err, out.String())
		}
		s := strings.ReplaceAll(out.String(), "\r", "")
		for _, want := range []string{"/dev/pts/", "30 100", "40 120\n", "got ping\n"} {
			if !strings.Contains(s, want) {
				t.Errorf("pty output %q lacks %q", s, want)
			}
		}
	})

	t.Run("sftp 10MB round trip", func(t *testing.T) {
		sc, err := g.Client.SFTP()
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		data := make([]byte, 10<<20)
		rand.Read(data)
		f, err := sc.Create("/tmp/blob")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		f.Close()
		t.Logf("10 MB up in %s", time.Since(start).Round(time.Millisecond))
		out, _, err := run(t, g, client.Command{Script: "sha256sum /tmp/blob"})
		if err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256(data)
		if got, _, _ := strings.Cut(out, " "); got != hexString(want[:]) {
			t.Errorf("guest sha256 %q, want %x", got, want)
		}
		r, err := sc.Open("/tmp/blob")
		if err != nil {
			t.Fatal(err)
		}
		back, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(back, data) {
			t.Errorf("read back %d bytes (err %v), not what was written", len(back), err)
		}
	})

	t.Run("only loopback network", func(t *testing.T) {
		out, _, err := run(t, g, client.Command{Script: "ls /sys/class/net"})
		if err != nil || strings.TrimSpace(out) != "lo" {
			t.Errorf("interfaces %q (err %v), want only lo", out, err)
		}
	})

	t.Run("refuses a key it was not given", func(t *testing.T) {
		stranger, err := client.NewIdentity("stranger")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		c, err := client.Connect(ctx, g.Dial, client.Config{Identity: stranger, Resume: true})
		if err == nil {
			c.Close()
			t.Fatal("guest accepted a key it was never given")
		}
		t.Logf("refused as expected: %v", err)
		// A fresh identity on a provisioned guest is refused too.
		c, err = client.Connect(ctx, g.Dial, client.Config{Identity: stranger})
		if err == nil {
			c.Close()
			t.Fatal("guest took a second identity")
		}
		// The sandbox's own key still works, beside the first connection.
		c, err = client.Connect(ctx, g.Dial, client.Config{Identity: g.Identity, Resume: true})
		if err != nil {
			t.Fatalf("second connection with the sandbox's own key: %v", err)
		}
		defer c.Close()
		var out bytes.Buffer
		if err := c.Run(ctx, client.Command{Script: "hostname", Stdout: &out}); err != nil || !strings.HasPrefix(out.String(), "airlock-") {
			t.Errorf("hostname over the second connection: %q, %v", out.String(), err)
		}
	})

	// Last: it loads modules into this machine.
	t.Run("docker kernel", func(t *testing.T) { checkDockerKernel(t, g) })
}

// checkDockerKernel: a boot loads none of a Docker Engine's modules, and
// airlock-guest docker-kernel readies the kernel for one (its modules,
// cgroup v2 with the controllers limits need, forwarding) and names
// nothing missing.
func checkDockerKernel(t *testing.T, g *launch.Guest) {
	t.Helper()
	if out, _, err := run(t, g, client.Command{Script: "grep -E '^(bridge|veth|nf_tables) ' /proc/modules || echo none"}); err != nil || strings.TrimSpace(out) != "none" {
		t.Errorf("Docker's modules before anyone asked for them: %q, %v", out, err)
	}
	out, errOut, err := run(t, g, client.Command{Script: `"$(readlink -f /init)" docker-kernel && cat /proc/sys/net/ipv4/ip_forward && grep -c . /proc/modules && grep ' /sys/fs/cgroup ' /proc/mounts`})
	if err != nil {
		t.Fatalf("docker-kernel: %v\n%s%s", err, out, errOut)
	}
	for _, want := range []string{"ready for a Docker Engine", "cgroup v2 (", "memory", "pids", "\n1\n", "cgroup2 /sys/fs/cgroup cgroup2"} {
		if !strings.Contains(out, want) {
			t.Errorf("docker-kernel says %q, lacks %q", out, want)
		}
	}
	// Again: nothing to do, the same answer.
	if out, errOut, err := run(t, g, client.Command{Script: `"$(readlink -f /init)" docker-kernel`}); err != nil || !strings.Contains(out, "ready for a Docker Engine") {
		t.Errorf("docker-kernel a second time: %v\n%s%s", err, out, errOut)
	}
}

// watchWriter collects output and closes seen once it contains want.
type watchWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	s := make([]byte, 0, 2*len(b))
	for _, c := range b {
		s = append(s, digits[c>>4], digits[c&15])
	}
	return string(s)
}

func TestMinimalARM64(t *testing.T) {
	testenv.SkipIfShort(t)
	if ok, why := testenv.ForeignArchReady(vm.ARM64); !ok {
		testenv.Skip(t, testenv.ForeignArch, why)
	}
	g := boot(t, vm.ARM64)
	out, _, err := run(t, g, client.Command{Args: []string{"uname", "-m"}})
	if err != nil || strings.TrimSpace(out) != "aarch64" {
		t.Fatalf("uname -m = %q, %v; want aarch64", out, err)
	}
}

// TestContextEndKillsVM: a machine whose context expires is killed and no
// qemu process is left behind.
func TestContextEndKillsVM(t *testing.T) {
	testenv.SkipIfShort(t)
	testenv.Image(t, vm.AMD64)
	home := testenv.Home(t)
	ctx, cancel := context.WithCancel(t.Context())
	g, err := launch.Boot(ctx, launch.Options{Home: home, Arch: vm.AMD64, Backend: backend(t, home)})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	dir := g.Dir
	if len(qemuProcesses(t, dir)) == 0 {
		t.Fatal("no qemu process found for the running machine")
	}
	runErr := make(chan error, 1)
	go func() { runErr <- g.Client.Run(ctx, client.Command{Script: "sleep 600"}) }()
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case err := <-runErr:
		if err == nil {
			t.Error("Run returned nil after its context ended")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	werr := make(chan error, 1)
	go func() { werr <- g.Machine.Wait() }()
	select {
	case <-werr:
	case <-time.After(30 * time.Second):
		t.Fatal("machine still running 30s after its context ended")
	}
	if ps := qemuProcesses(t, dir); len(ps) > 0 {
		t.Fatalf("qemu processes survived: %v", ps)
	}
	if g.Machine.State() != vm.StateStopped {
		t.Errorf("state %s, want stopped", g.Machine.State())
	}
	os.RemoveAll(dir)
}

// TestBootTimeoutShowsConsole: a guest that never answers gives a BootError
// with the console's last lines.
func TestBootTimeoutShowsConsole(t *testing.T) {
	testenv.SkipIfShort(t)
	im := testenv.Image(t, vm.AMD64)
	home := t.TempDir()
	// An image whose init is not the guest agent: copy the real one and
	// boot it with an init that does not exist, so the kernel panics.
	dst := filepath.Join(home, "images", "broken", "amd64")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"kernel", "initrd", "image.toml"} {
		os.Symlink(filepath.Join(im.Dir, f), filepath.Join(dst, f))
	}
	toml, _ := os.ReadFile(filepath.Join(im.Dir, "image.toml"))
	toml = bytes.Replace(toml, []byte(`name = "minimal"`), []byte(`name = "broken"`), 1)
	toml = bytes.Replace(toml, []byte("rdinit=/init"), []byte("rdinit=/missing-init"), 1)
	os.Remove(filepath.Join(dst, "image.toml"))
	if err := os.WriteFile(filepath.Join(dst, "image.toml"), toml, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := launch.Boot(t.Context(), launch.Options{Home: home, Image: "broken", Arch: vm.AMD64, Backend: backend(t, home), BootTimeout: 60 * time.Second})
	var be *vm.BootError
	if !errors.As(err, &be) {
		t.Fatalf("err = %v, want a BootError", err)
	}
	if len(be.Console) == 0 || !strings.Contains(err.Error(), "last console lines") {
		t.Errorf("boot error shows no console lines: %v", err)
	}
	t.Logf("boot error as a user sees it:\n%v", err)
}

// qemuProcesses lists the qemu processes of the machine whose run
// directory is dir: QEMU is named after the machine (-name
// guest=airlock-NAME, NAME the directory's base name).
func qemuProcesses(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, "qemu-system") && strings.Contains(cmd, "airlock-"+filepath.Base(dir)+" ") {
			found = append(found, e.Name()+": "+cmd)
		}
	}
	return found
}

// TestBootFromImageRoot boots with an empty home and the image in a
// read-only root, as the airlock binary in Airlock.app does with the
// images shipped in Contents/Resources.
func TestBootFromImageRoot(t *testing.T) {
	testenv.SkipIfShort(t)
	im := testenv.Image(t, vm.AMD64)
	home := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, err := launch.Boot(ctx, launch.Options{Home: home, ImageRoots: []string{testenv.Home(t)}, Arch: vm.AMD64, Backend: backend(t, home)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		if err := g.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}()
	if g.Image.Dir != im.Dir {
		t.Errorf("booted %s, want the root's %s", g.Image.Dir, im.Dir)
	}
	if out, _, err := run(t, g, client.Command{Args: []string{"uname", "-m"}}); err != nil || strings.TrimSpace(out) != "x86_64" {
		t.Errorf("uname -m = %q, %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(home, "images")); err == nil {
		t.Error("the image was copied into the home")
	}
}
