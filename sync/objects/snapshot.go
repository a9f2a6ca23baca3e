package objects

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sync/errgroup"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// ErrChanged means a file changed between the walk that recorded it and
// the snapshot that copies it.
var ErrChanged = errors.New("file changed during the snapshot")

// SnapshotTree copies every file of m, read from root, into s, checking
// each against the size and SHA-256 that m records, so the baseline
// survives later edits of the real project. Files already stored are not
// read again. A file that changed since the walk fails the snapshot with
// an error naming it (and wrapping ErrChanged): take the snapshot again.
// Reads never leave root, even through a symlink swapped in meanwhile.
//
// The files are written side by side (snapshotWorkers at once) without a
// flush each: they are made durable together (syncTemps: one syncfs on
// Linux) before any is renamed into place, so a name in the store only
// ever holds checked content that is on the disk, at a fraction of the
// cost of two fsyncs per file. A batch of at most fsyncBatch files (an
// edit's) is flushed file by file and directory by directory instead: a
// syncfs writes out everything dirty on the file system, other programs'
// writes too.
func SnapshotTree(ctx context.Context, root string, m *manifest.Manifest, s *Store) (err error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", root, err)
	}
	defer r.Close()
	var todo []manifest.Entry
	seen := map[string]bool{}
	for _, e := range m.Entries {
		if e.Type != manifest.File || seen[e.SHA256] || s.Has(e.SHA256) {
			continue
		}
		seen[e.SHA256] = true
		todo = append(todo, e)
	}
	if len(todo) == 0 {
		return ctx.Err()
	}
	perFile := !syncfsWorks || len(todo) <= fsyncBatch
	temps := make([]temp, len(todo))
	defer func() {
		if err != nil {
			for _, t := range temps {
				if t.path != "" {
					os.Remove(t.path)
				}
			}
		}
	}()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(snapshotWorkers())
	for i, e := range todo {
		g.Go(func() error {
			t, err := snapshotFile(gctx, r, e, s, perFile)
			temps[i] = t
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if !perFile {
		if err := s.syncTemps(temps); err != nil {
			return fmt.Errorf("snapshot %s: %w", root, err)
		}
	}
	dirs := map[string]bool{}
	for i, t := range temps {
		if t.path == "" {
			continue
		}
		if err := s.commit(t); err != nil {
			temps[i].path = ""
			return fmt.Errorf("snapshot %s: %w", root, err)
		}
		temps[i].path = ""
		dirs[filepath.Dir(s.objectPath(t.sum))] = true
	}
	if perFile {
		for d := range dirs {
			if err := syncDir(d); err != nil {
				return fmt.Errorf("snapshot %s: %w", root, err)
			}
		}
	} else if err := s.syncCommitted(dirs); err != nil {
		return fmt.Errorf("snapshot %s: %w", root, err)
	}
	return ctx.Err()
}

// fsyncBatch is the most files SnapshotTree flushes one by one (an fsync
// each, and one per directory) rather than with a syncfs of the store's
// file system, which on a busy host took up to a second to store a
// one-file edit.
const fsyncBatch = 16

// snapshotWorkers is how many files SnapshotTree copies at once.
func snapshotWorkers() int { return min(max(2*runtime.GOMAXPROCS(0), 2), 8) }

func snapshotFile(ctx context.Context, r *os.Root, e manifest.Entry, s *Store, fsync bool) (temp, error) {
	f, err := r.Open(e.Path)
	if err != nil {
		return temp{}, fmt.Errorf("snapshot %s: %w", e.Path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return temp{}, fmt.Errorf("snapshot %s: %w", e.Path, err)
	}
	if !info.Mode().IsRegular() {
		return temp{}, fmt.Errorf("snapshot %s: now a %s: %w", e.Path, info.Mode().Type(), ErrChanged)
	}
	if err := ValidSum(e.SHA256); err != nil {
		return temp{}, fmt.Errorf("snapshot %s: %w", e.Path, err)
	}
	t, err := s.writeTemp(ctx, f, e.SHA256, e.Size, fsync)
	if err != nil {
		if errors.Is(err, ErrMismatch) {
			return temp{}, fmt.Errorf("snapshot %s: %w (%w)", e.Path, ErrChanged, err)
		}
		return temp{}, fmt.Errorf("snapshot %s: %w", e.Path, err)
	}
	return t, nil
}
