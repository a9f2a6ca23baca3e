package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/guest/agent"
	"github.com/airlock-dev/airlock/guest/client"
)

// TestBuiltin: a command that is exactly the agent's own binary and a
// builtin subcommand runs in the agent's process, with its output, error
// and exit status as the binary's; a panic in it fails the command and
// not the agent; cancelling ends it; anything else (another path, words
// the agent cannot read for sure, a user's command) goes to the shell.
func TestBuiltin(t *testing.T) {
	const self = "/nonexistent/airlock-guest" // the shell cannot run it
	var mu sync.Mutex
	var stopped bool
	started := make(chan struct{}, 1)
	a := agent.New(agent.Config{
		Self: []string{self},
		Builtin: func(args []string) agent.Builtin {
			switch args[0] {
			case "echo":
				return func(_ context.Context, stdin io.Reader, stdout, _ io.Writer) error {
					in, _ := io.ReadAll(stdin)
					fmt.Fprintf(stdout, "%q %s", args[1:], in)
					return nil
				}
			case "fail":
				return func(context.Context, io.Reader, io.Writer, io.Writer) error { return errors.New("boom") }
			case "panic":
				return func(context.Context, io.Reader, io.Writer, io.Writer) error { panic("bad state") }
			case "block":
				return func(ctx context.Context, _ io.Reader, _, _ io.Writer) error {
					started <- struct{}{}
					<-ctx.Done()
					mu.Lock()
					stopped = true
					mu.Unlock()
					return ctx.Err()
				}
			}
			return nil
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	c, _ := connect(t, testGuest{dial: func(context.Context) (net.Conn, error) {
		host, guestEnd := net.Pipe()
		wg.Go(func() { _ = a.ServeConn(ctx, guestEnd) })
		return host, nil
	}})

	run := func(cmd client.Command) (string, string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := c.Run(ctx, cmd)
		return stdout.String(), stderr.String(), err
	}
	status := func(err error) int {
		var ee *client.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			return -1
		}
		return 0
	}

	// Quoted as sync/transfer quotes, or bare as guest/client leaves
	// plain words; stdin reaches it.
	for _, script := range []string{"'" + self + "' 'echo' 'a b' 'it'\\''s' ''", self + " echo 'a b' 'it'\\''s' ''"} {
		out, errOut, err := run(client.Command{Script: script, Stdin: strings.NewReader("in")})
		if err != nil || out != `["a b" "it's" ""] in` {
			t.Errorf("%s: %v %q %q", script, err, out, errOut)
		}
	}
	out, errOut, err := run(client.Command{Args: []string{self, "echo", "x", "$HOME"}})
	if err != nil || out != `["x" "$HOME"] ` {
		t.Errorf("Args: %v %q %q", err, out, errOut)
	}
	if _, errOut, err := run(client.Command{Args: []string{self, "fail"}}); status(err) != 1 || errOut != "airlock-guest: boom\n" {
		t.Errorf("fail: %v %q", err, errOut)
	}
	if _, errOut, err := run(client.Command{Args: []string{self, "panic"}}); status(err) != 70 || !strings.Contains(errOut, "bad state") {
		t.Errorf("panic: %v %q", err, errOut)
	}
	// The shell's: the binary does not exist, so it says so.
	for _, script := range []string{self + " echo $HOME", self + " echo x; true", self + "  echo", self + " other", "/other/path echo", self} {
		if _, errOut, err := run(client.Command{Script: script}); !strings.Contains(errOut, "not found") {
			t.Errorf("%q did not go to the shell: %v %q", script, err, errOut)
		}
	}
	// Cancelled: Run returns and the builtin's context is done.
	rctx, rcancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(rctx, client.Command{Args: []string{self, "block"}}) }()
	<-started
	rcancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled builtin: Run = %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		done := stopped
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the builtin's context was never done after the run was cancelled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The agent is still there.
	if out, _, err := run(client.Command{Script: "echo alive"}); err != nil || out != "alive\n" {
		t.Errorf("after the builtins: %v %q", err, out)
	}
}

// TestManifestBuiltin: the real binary, serving the link, runs its
// manifest subcommand in its own process (it says so in its debug log)
// and answers exactly as the same subcommand run as a process does.
func TestManifestBuiltin(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"a.txt": "a\n", "sub/b.go": "package b\n", ".gitignore": "ignored\n", "ignored": "x"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g, logs := startProcessGuestWith(t, "-v")
	c, _ := connect(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got, errOut bytes.Buffer
	if err := c.Run(ctx, client.Command{Script: "'" + agentBin + "' 'manifest' '--max-entries' '100' '--' '" + dir + "'", Stdout: &got, Stderr: &errOut}); err != nil {
		t.Fatalf("manifest over the link: %v\n%s", err, errOut.String())
	}
	want, err := exec.Command(agentBin, "manifest", "--max-entries", "100", "--", dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	// Each manifest has an id of its own, on the first line.
	_, gotEntries, _ := strings.Cut(got.String(), "\n")
	_, wantEntries, _ := strings.Cut(string(want), "\n")
	if gotEntries != wantEntries || !strings.HasPrefix(got.String(), `{"id":"`) {
		t.Errorf("in the agent's process:\n%s\nas a process:\n%s", got.String(), want)
	}
	if !strings.Contains(got.String(), "sub/b.go") || strings.Contains(got.String(), `"ignored"`) {
		t.Errorf("manifest:\n%s", got.String())
	}
	if !strings.Contains(logs(), "builtin") {
		t.Errorf("the agent did not run manifest in its process; its log:\n%s", logs())
	}
	// A directory it cannot walk: the same error and status as the process.
	err = c.Run(ctx, client.Command{Args: []string{agentBin, "manifest", "--", filepath.Join(dir, "missing")}, Stderr: &errOut})
	var ee *client.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(errOut.String(), "airlock-guest: ") {
		t.Errorf("manifest of a missing directory: %v %q", err, errOut.String())
	}
}
