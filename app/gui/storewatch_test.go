package gui

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/sandbox"
)

// startWatcher watches dir and returns a channel that receives once per
// reported change.
func startWatcher(t *testing.T, dir string) (*storeWatcher, <-chan struct{}) {
	t.Helper()
	changed := make(chan struct{}, 100)
	sw := newStoreWatcher(dir, func() { changed <- struct{}{} })
	// Long enough that a burst of writes stays one burst on a loaded
	// machine under -race (20 ms once split one into six).
	sw.quiet = 100 * time.Millisecond
	if err := sw.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sw.Close)
	return sw, changed
}

func waitChange(t *testing.T, changed <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatalf("no change reported after %s", what)
	}
}

// noChange checks that nothing is reported for a while: the watcher's
// quiet time, many times over.
func noChange(t *testing.T, changed <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-changed:
		t.Errorf("a change reported after %s", what)
	case <-time.After(200 * time.Millisecond):
	}
}

// drain counts the changes reported until none comes for quiet.
func drain(changed <-chan struct{}, quiet time.Duration) int {
	n := 0
	for {
		select {
		case <-changed:
			n++
		case <-time.After(quiet):
			return n
		}
	}
}

func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestStoreWatcher(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "aaaa0001")
	if err := os.Mkdir(old, 0o700); err != nil {
		t.Fatal(err)
	}
	sw, changed := startWatcher(t, dir)

	// A sandbox that existed before the watch began is watched too.
	writeAtomic(t, filepath.Join(old, sandbox.MetaFile), `{"status":"ready"}`)
	waitChange(t, changed, "renaming sandbox.json into a sandbox that existed")

	// A new sandbox directory, then its sandbox.json.
	dirNew := filepath.Join(dir, "bbbb0002")
	if err := os.Mkdir(dirNew, 0o700); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "creating a sandbox directory")
	writeAtomic(t, filepath.Join(dirNew, sandbox.MetaFile), `{"status":"running"}`)
	waitChange(t, changed, "renaming sandbox.json into a new sandbox")

	// What a run writes besides sandbox.json, and the store's own audit
	// log, change nothing in the list.
	for _, p := range []string{filepath.Join(dirNew, "console.log"), filepath.Join(dir, "audit.jsonl")} {
		if err := os.WriteFile(p, []byte("line\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	noChange(t, changed, "writing console.log and the store's audit log")

	// A burst of writes is coalesced: reported at least once, and far
	// fewer times than it wrote (once when the writes come faster than
	// the quiet time; a loaded host may stretch a burst over two).
	const writes = 20
	for i := range writes {
		writeAtomic(t, filepath.Join(dirNew, sandbox.MetaFile), `{"n":`+string(rune('0'+i%10))+`}`)
	}
	waitChange(t, changed, "a burst of sandbox.json writes")
	if n := 1 + drain(changed, 10*sw.quiet); n > writes/4 {
		t.Errorf("a burst of %d writes was reported %d times", writes, n)
	}

	// A removed sandbox.
	if err := os.RemoveAll(old); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed, "removing a sandbox directory")
}

func TestStoreWatcherClose(t *testing.T) {
	dir := t.TempDir()
	var calls atomic.Int32
	sw := newStoreWatcher(dir, func() { calls.Add(1) })
	sw.Close() // never started: nothing to do
	if err := sw.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	sw.Close()
	select {
	case <-sw.done:
	default:
		t.Fatal("Close returned before the watcher's goroutine ended")
	}
	sw.Close() // idempotent
	if err := os.Mkdir(filepath.Join(dir, "cccc0003"), 0o700); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * storeQuiet)
	if n := calls.Load(); n != 0 {
		t.Errorf("%d changes reported after Close", n)
	}
}

func TestStoreWatcherNoStore(t *testing.T) {
	sw := newStoreWatcher(filepath.Join(t.TempDir(), "missing"), func() {})
	if err := sw.Start(t.Context()); err == nil {
		sw.Close()
		t.Fatal("watching a missing store directory: no error")
	}
	sw.Close()
}
