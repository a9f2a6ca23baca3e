package gui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/airlock-dev/airlock/app/sandbox"
)

// storeQuiet is how long storeWatcher gathers changes before it reports
// them: a run writes sandbox.json several times in a row.
const storeQuiet = 150 * time.Millisecond

// storeWatcher reports, through file-system notifications, when the
// sandbox list of a store (its sandboxes/ directory) may have changed: a
// sandbox directory appeared or went, or a sandbox's sandbox.json was
// replaced. sandbox.json is written atomically, by rename, so the watches
// are on directories, not files. Changes within quiet of the first are
// reported by one call of onChange, from the watcher's goroutine.
type storeWatcher struct {
	dir      string
	quiet    time.Duration
	onChange func()

	w      *fsnotify.Watcher
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine ends
}

func newStoreWatcher(dir string, onChange func()) *storeWatcher {
	return &storeWatcher{dir: filepath.Clean(dir), quiet: storeQuiet, onChange: onChange}
}

// Start watches the store and its sandbox directories until ctx ends or
// Close. It fails when notifications cannot be set up.
func (s *storeWatcher) Start(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch the sandbox store: %w", err)
	}
	if err := w.Add(s.dir); err != nil {
		w.Close()
		return fmt.Errorf("watch the sandbox store: %w", err)
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		w.Close()
		return fmt.Errorf("watch the sandbox store: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			watchSandbox(w, filepath.Join(s.dir, e.Name()))
		}
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.w, s.done = w, make(chan struct{})
	go s.loop(ctx)
	return nil
}

// Close stops watching and waits for the watcher's goroutine. It is
// idempotent, and does nothing for a watcher that never started.
func (s *storeWatcher) Close() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
}

// watchSandbox adds a sandbox directory; one removed meanwhile is no
// change to report.
func watchSandbox(w *fsnotify.Watcher, dir string) {
	_ = w.Add(dir)
}

func (s *storeWatcher) loop(ctx context.Context) {
	defer close(s.done)
	defer s.w.Close()
	var timer *time.Timer
	var fire <-chan time.Time
	arm := func() {
		if fire == nil {
			timer = time.NewTimer(s.quiet)
			fire = timer.C
		}
	}
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case e, ok := <-s.w.Events:
			if !ok {
				return
			}
			if s.changes(e) {
				arm()
			}
		case _, ok := <-s.w.Errors:
			if !ok {
				return
			}
			// An overflow of the kernel's queue: events were lost, so
			// the list may be stale.
			arm()
		case <-fire:
			fire = nil
			s.onChange()
		}
	}
}

// changes says whether e may change the sandbox list, and watches a new
// sandbox directory.
func (s *storeWatcher) changes(e fsnotify.Event) bool {
	parent := filepath.Dir(e.Name)
	switch {
	case parent == s.dir:
		// A sandbox directory, or one of the store's own files (its
		// audit log): only directories coming and going count.
		if e.Has(fsnotify.Create) {
			fi, err := os.Lstat(e.Name)
			if err != nil || !fi.IsDir() {
				return false
			}
			watchSandbox(s.w, e.Name)
			return true
		}
		return e.Has(fsnotify.Remove) || e.Has(fsnotify.Rename)
	case filepath.Dir(parent) == s.dir && filepath.Base(e.Name) == sandbox.MetaFile:
		return e.Op != fsnotify.Chmod
	}
	return false
}

// StoreDir is the store's sandboxes/ directory, which the main window
// follows.
func (s *StoreService) StoreDir() string { return s.Store.Dir() }
