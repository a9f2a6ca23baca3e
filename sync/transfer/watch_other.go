//go:build !linux

package transfer

import (
	"context"
	"errors"
)

// WatchOptions configures Watch, which only Linux has.
type WatchOptions struct {
	Generation  string
	Socket      string
	RaiseLimits bool
	Ready       func()
}

// Watch needs inotify: elsewhere collects walk the whole tree.
func Watch(ctx context.Context, dir string, o WatchOptions) error {
	return errors.New("watch: only on Linux")
}

// SpawnWatcher returns nil: no watcher outside Linux.
func SpawnWatcher(exe string) func(ctx context.Context, dir, socket, generation string, raiseLimits bool) error {
	return nil
}
