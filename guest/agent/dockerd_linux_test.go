package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The daemon gets a fixed PATH and the proxy variables, nothing else of
// the command's environment (no placeholder of a secret, no HOME).
func TestDockerEnv(t *testing.T) {
	got := dockerEnv([]string{"HTTPS_PROXY=http://127.0.0.1:3128", "ANTHROPIC_API_KEY=airlock-placeholder", "SSL_CERT_FILE=/etc/airlock/ca-bundle.pem",
		"PATH=/evil", "no_proxy=localhost", "HTTPS_PROXYX=no"})
	want := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HTTPS_PROXY=http://127.0.0.1:3128",
		"SSL_CERT_FILE=/etc/airlock/ca-bundle.pem", "no_proxy=localhost"}
	if !slices.Equal(got, want) {
		t.Errorf("dockerEnv = %q, want %q", got, want)
	}
}

// logTail reads only the end of a log, however long it is, and nothing
// before the offset it is given (what an earlier start logged).
func TestLogTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(p, []byte(strings.Repeat("x", 10000)+"the end\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := logTail(p, 0, 8); got != "the end" {
		t.Errorf("logTail = %q", got)
	}
	if got := logTail(p, 10004, 100); got != "end" {
		t.Errorf("logTail from 10004 = %q", got)
	}
	if got := logTail(filepath.Join(t.TempDir(), "none"), 0, 8); !strings.Contains(got, "no such file") {
		t.Errorf("logTail of a missing file = %q", got)
	}
}

// fakeDaemon exits with each of logs in turn (one per start) and
// answers at the start after the last, when answers is set.
type fakeDaemon struct {
	logs    []string
	answers bool
	starts  int
}

func (f *fakeDaemon) daemon() daemon {
	return daemon{
		start: func() (<-chan error, error) {
			f.starts++
			exited := make(chan error, 1)
			if f.starts <= len(f.logs) {
				exited <- errors.New("exit status 1")
			}
			return exited, nil
		},
		answer: func(context.Context) error {
			if f.answers && f.starts > len(f.logs) {
				return nil
			}
			return errors.New("connection refused")
		},
		log: func() string { return f.logs[min(f.starts, len(f.logs))-1] },
	}
}

// A dockerd that gave up on a slow containerd is started again, up to
// dockerStarts times; one that exits for anything else, or past that
// many starts, is an error with its log; one that never answers is an
// error at the deadline.
func TestAwaitDaemon(t *testing.T) {
	slow := "level=info msg=\"starting containerd\"\nfailed to start daemon: " + containerdSlow
	ctx := context.Background()
	f := &fakeDaemon{logs: []string{slow, slow}, answers: true}
	if starts, err := awaitDaemon(ctx, f.daemon(), time.Millisecond); err != nil || starts != 3 {
		t.Errorf("after two slow containerds: %d starts, %v; want 3 starts, no error", starts, err)
	}
	f = &fakeDaemon{logs: []string{slow, slow, slow}, answers: true}
	if starts, err := awaitDaemon(ctx, f.daemon(), time.Millisecond); err == nil || starts != dockerStarts || !strings.Contains(err.Error(), containerdSlow) {
		t.Errorf("three slow containerds: %d starts, %v; want %d and an error with the log", starts, err, dockerStarts)
	}
	f = &fakeDaemon{logs: []string{"failed to start daemon: pid file found"}, answers: true}
	if starts, err := awaitDaemon(ctx, f.daemon(), time.Millisecond); err == nil || starts != 1 || !strings.Contains(err.Error(), "pid file found") {
		t.Errorf("another failure: %d starts, %v; want one start and its log", starts, err)
	}
	f = &fakeDaemon{}
	ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	d := f.daemon()
	d.log = func() string { return "still starting" }
	if _, err := awaitDaemon(ctx, d, time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("a daemon that never answers: %v", err)
	}
}

// TestContainersMemory: the containers get all but an eighth of the VM,
// and at least 256 MiB stays for the rest of it.
func TestContainersMemory(t *testing.T) {
	for _, c := range []struct{ total, want int64 }{
		{2 << 30, 2<<30 - 256<<20},
		{8 << 30, 7 << 30},
		{512 << 20, 256 << 20},
		{256 << 20, 64 << 20},
	} {
		if got := containersMemory(c.total); got != c.want {
			t.Errorf("containersMemory(%d MiB) = %d MiB, want %d MiB", c.total>>20, got>>20, c.want>>20)
		}
	}
}
