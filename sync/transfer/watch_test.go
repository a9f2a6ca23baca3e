//go:build linux

package transfer_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sync/transfer"
)

// watchedGuest is a guest played by this host whose manifest subcommand's
// stderr is kept: it says whether a collect used the watcher.
type watchedGuest struct {
	*localRemote
	stderr bytes.Buffer
}

func newWatchedGuest(t *testing.T) *watchedGuest {
	g := &watchedGuest{}
	g.localRemote = &localRemote{t: t, exec: func(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error {
		g.stderr.Reset()
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, io.MultiWriter(stderr, &g.stderr)
		return cmd.Run()
	}}
	return g
}

// seedWatched writes a project into a fresh directory, seeds the guest
// with its manifest (which starts a watcher) and returns the directory
// and what both ends know.
func seedWatched(t *testing.T, g *watchedGuest) (string, transfer.Known) {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "workspace")
	writeTree(t, ws, map[string]string{
		"README.md":          "# demo\n",
		"main.go":            "package main\n",
		"run.sh":             "#!/bin/sh\n",
		".gitignore":         "*.log\nbuild/\n",
		"src/a.go":           "package src\n",
		"src/b.go":           "package src // b\n",
		"src/deep/x/y/z.txt": "z\n",
		"docs/guide.md":      "guide\n",
		"docs/img/logo.txt":  "logo\n",
		"old/one.txt":        "one\n",
		"old/sub/two.txt":    "two\n",
		"build/out.bin":      "ignored\n",
	}, map[string]os.FileMode{"run.sh": 0o755})
	base := walk(t, ws)
	known, err := transfer.Seed(t.Context(), g, ws, base, transfer.Options{AgentPath: agentBin(t)})
	if err != nil {
		t.Fatal(err)
	}
	if known.ID == "" {
		t.Fatal("not seeded")
	}
	if watchers(t, ws) == nil {
		t.Fatal("the seed started no watcher")
	}
	t.Cleanup(func() { stopWatching(t, ws) })
	return ws, known
}

// watchers returns the pids of the watcher processes of dir.
func watchers(t *testing.T, dir string) []int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if len(args) > 2 && args[1] == "watch" && args[len(args)-1] == dir {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out = append(out, pid)
		}
	}
	return out
}

// waitExit blocks until process pid has exited (a pidfd becomes readable
// then), for at most 10 seconds.
func waitExit(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // gone already
	}
	defer unix.Close(fd)
	n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 10_000)
	if err != nil || n == 0 {
		t.Errorf("watcher %d has not exited: %v", pid, err)
	}
}

// stopWatching stops the watcher of dir and checks that no watcher
// process of dir is left.
func stopWatching(t *testing.T, dir string) {
	t.Helper()
	pids := watchers(t, dir)
	transfer.StopWatcher(context.Background(), dir, "")
	for _, pid := range pids {
		waitExit(t, pid)
	}
	if left := watchers(t, dir); len(left) > 0 {
		t.Errorf("watcher processes left behind: %v", left)
	}
}

// watchSocket is where the watcher of dir listens (as the guest computes
// it under $AIRLOCK_STATE_DIR).
func watchSocket(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(os.Getenv(transfer.StateDirEnv), hex.EncodeToString(sum[:16])+".sock")
}

// collectWatched collects dir and checks the result against a fresh walk
// and whether the whole tree was walked.
func collectWatched(t *testing.T, g *watchedGuest, ws string, known transfer.Known, wantWhole bool) transfer.Known {
	t.Helper()
	k, err := transfer.RemoteManifest(t.Context(), g, ws, known, transfer.Options{AgentPath: agentBin(t)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(walk(t, ws), k.Manifest); diff != "" {
		t.Fatalf("collected manifest differs from a walk (-walk +collected):\n%s\nguest: %s", diff, g.stderr.String())
	}
	whole := strings.Contains(g.stderr.String(), "walked the whole tree")
	if whole != wantWhole || !whole && !strings.Contains(g.stderr.String(), "the watcher saw touched") {
		t.Errorf("whole walk %v, want %v; the guest said: %s", whole, wantWhole, g.stderr.String())
	}
	if k.ID == "" {
		t.Fatal("the guest remembers nothing")
	}
	return k
}

// Edits of every kind, each followed by a collect that uses the watcher
// (or walks the whole tree when the rules changed): the resolved
// manifest is always exactly a fresh walk's.
func TestWatchedCollect(t *testing.T) {
	g := newWatchedGuest(t)
	ws, known := seedWatched(t, g)
	p := func(rel string) string { return filepath.Join(ws, rel) }
	write := func(t *testing.T, rel, body string) {
		t.Helper()
		must(t, os.MkdirAll(filepath.Dir(p(rel)), 0o755))
		must(t, os.WriteFile(p(rel), []byte(body), 0o644))
	}
	for _, tc := range []struct {
		name      string
		edit      func(t *testing.T)
		wantWhole bool
	}{
		{"nothing", func(t *testing.T) {}, false},
		{"modify-same-size", func(t *testing.T) {
			info, _ := os.Stat(p("main.go"))
			write(t, "main.go", "package mian\n")
			os.Chtimes(p("main.go"), info.ModTime(), info.ModTime())
		}, false},
		{"append", func(t *testing.T) {
			f, err := os.OpenFile(p("src/a.go"), os.O_APPEND|os.O_WRONLY, 0)
			must(t, err)
			f.WriteString("// more\n")
			f.Close()
		}, false},
		{"chmod-file", func(t *testing.T) { must(t, os.Chmod(p("run.sh"), 0o644)) }, false},
		{"chmod-dir", func(t *testing.T) { must(t, os.Chmod(p("docs"), 0o700)) }, false},
		{"create-file", func(t *testing.T) { write(t, "new.txt", "new\n") }, false},
		{"create-dirs-with-files-quickly", func(t *testing.T) {
			for i := range 5 {
				write(t, "gen/"+strconv.Itoa(i)+"/a/b/f.txt", "f"+strconv.Itoa(i))
				write(t, "gen/"+strconv.Itoa(i)+"/g.txt", "g")
			}
			must(t, os.MkdirAll(p("empty/deeper"), 0o750))
		}, false},
		{"modify-in-new-dir", func(t *testing.T) { write(t, "gen/3/a/b/f.txt", "changed later") }, false},
		{"delete-file", func(t *testing.T) { must(t, os.Remove(p("README.md"))) }, false},
		{"delete-tree", func(t *testing.T) { must(t, os.RemoveAll(p("old"))) }, false},
		{"rename-file", func(t *testing.T) { must(t, os.Rename(p("src/b.go"), p("src/c.go"))) }, false},
		{"rename-dir", func(t *testing.T) { must(t, os.Rename(p("src/deep"), p("shallow"))) }, false},
		{"modify-in-renamed-dir", func(t *testing.T) { write(t, "shallow/x/y/z.txt", "zz\n") }, false},
		{"move-out-and-in", func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "outside")
			must(t, os.Rename(p("docs"), out))
			must(t, os.WriteFile(filepath.Join(out, "img/logo.txt"), []byte("changed outside\n"), 0o644))
			must(t, os.Rename(out, p("docs2")))
		}, false},
		{"symlink", func(t *testing.T) { must(t, os.Symlink("../main.go", p("src/link"))) }, false},
		{"retarget-symlink", func(t *testing.T) {
			must(t, os.Remove(p("src/link")))
			must(t, os.Symlink("a.go", p("src/link")))
		}, false},
		{"fifo", func(t *testing.T) { must(t, syscall.Mkfifo(p("src/fifo"), 0o644)) }, false},
		{"file-becomes-dir", func(t *testing.T) {
			must(t, os.Remove(p("new.txt")))
			write(t, "new.txt/inside", "inside\n")
		}, false},
		{"dir-becomes-file", func(t *testing.T) {
			must(t, os.RemoveAll(p("shallow")))
			write(t, "shallow", "a file now\n")
		}, false},
		{"ignored-files", func(t *testing.T) {
			write(t, "debug.log", "log\n")
			write(t, "build/more.bin", "more\n")
		}, false},
		{"secret", func(t *testing.T) { write(t, "src/.env", "TOKEN=x\n") }, false},
		{"gitignore-changed", func(t *testing.T) { write(t, ".gitignore", "build/\n") }, true},
		{"after-the-rules-changed", func(t *testing.T) { write(t, "src/after.txt", "after\n") }, false},
		{"nested-gitignore-in-new-dir", func(t *testing.T) {
			write(t, "pkg/.gitignore", "*.tmp\n")
			write(t, "pkg/x.tmp", "tmp\n")
			write(t, "pkg/x.go", "package pkg\n")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.edit(t)
			known = collectWatched(t, g, ws, known, tc.wantWhole)
		})
	}
	// The fifo is still reported, though the last collects did not look
	// at it.
	if len(known.Skipped) != 1 || known.Skipped[0].Path != "src/fifo" {
		t.Errorf("skipped %+v, want the fifo", known.Skipped)
	}
}

// A watcher that lost events (the kernel's queue overflowed, injected
// here) cannot vouch for anything: the collect walks the whole tree and
// the watcher exits.
func TestWatchOverflow(t *testing.T) {
	g := newWatchedGuest(t)
	ws, known := seedWatched(t, g)
	pids := watchers(t, ws)
	must(t, os.WriteFile(filepath.Join(ws, "new.txt"), []byte("new\n"), 0o644))
	c, err := net.Dial("unix", watchSocket(ws))
	must(t, err)
	c.Write([]byte("overflow\n"))
	io.ReadAll(c)
	c.Close()
	must(t, os.WriteFile(filepath.Join(ws, "main.go"), []byte("changed\n"), 0o644))
	known = collectWatched(t, g, ws, known, true)
	for _, pid := range pids {
		waitExit(t, pid)
	}
	// Without a watcher, collects go on walking everything.
	must(t, os.Remove(filepath.Join(ws, "new.txt")))
	collectWatched(t, g, ws, known, true)
}

// A dead watcher (killed, its socket left behind) answers nothing: the
// collect walks the whole tree. A new seed starts a new watcher and stops
// the old one.
func TestWatchDead(t *testing.T) {
	g := newWatchedGuest(t)
	ws, known := seedWatched(t, g)
	for _, pid := range watchers(t, ws) {
		must(t, syscall.Kill(pid, syscall.SIGKILL))
		waitExit(t, pid)
	}
	if _, err := os.Stat(watchSocket(ws)); err != nil {
		t.Fatalf("the killed watcher's socket: %v", err)
	}
	must(t, os.WriteFile(filepath.Join(ws, "main.go"), []byte("changed\n"), 0o644))
	collectWatched(t, g, ws, known, true)

	// Two seeds in a row: one watcher.
	for range 2 {
		k, err := transfer.Seed(t.Context(), g, ws, walk(t, ws), transfer.Options{AgentPath: agentBin(t)})
		must(t, err)
		known = k
	}
	if n := len(watchers(t, ws)); n != 1 {
		t.Fatalf("%d watchers after two seeds, want 1", n)
	}
	must(t, os.WriteFile(filepath.Join(ws, "main.go"), []byte("changed again\n"), 0o644))
	collectWatched(t, g, ws, known, false)
	// --full walks everything even so.
	k, err := transfer.RemoteManifest(t.Context(), g, ws, known, transfer.Options{AgentPath: agentBin(t), FullWalk: true})
	must(t, err)
	if !strings.Contains(g.stderr.String(), `msg="walked the whole tree"`) || !strings.Contains(g.stderr.String(), `why="asked to"`) {
		t.Errorf("--full: the guest said %s", g.stderr.String())
	}
	if diff := cmp.Diff(walk(t, ws), k.Manifest); diff != "" {
		t.Fatal(diff)
	}
}

// The watcher exits when the directory it watches goes away.
func TestWatchRootRemoved(t *testing.T) {
	g := newWatchedGuest(t)
	ws, _ := seedWatched(t, g)
	pids := watchers(t, ws)
	must(t, os.RemoveAll(ws))
	for _, pid := range pids {
		waitExit(t, pid)
	}
	if _, err := os.Stat(watchSocket(ws)); err == nil {
		t.Error("the watcher left its socket behind")
	}
}
