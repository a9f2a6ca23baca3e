package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
	"github.com/airlock-dev/airlock/sync/transfer"
	"github.com/airlock-dev/airlock/vm/disk"
)

// StagingDir is the staging clone in a sandbox directory (virtiofs mode).
// It is removed once the changes are collected, and kept for inspection
// when a run fails.
const StagingDir = "staging"

// WorkspaceTag is the virtio-fs tag of the staging clone, mounted on
// Workspace in the guest.
const WorkspaceTag = "workspace"

// stagingTransfer is the Transfer of virtiofs mode. Its machine is the
// staging directory on the host, shared into the guest: Push clones the
// baseline into it (before the machine boots; m may be nil), Manifest
// walks it and Pull stores files from it, after the machine is gone. Only
// dest/dir Workspace is accepted: the staging directory is /workspace.
type stagingTransfer struct {
	root string
}

var _ Transfer = stagingTransfer{}

func (t stagingTransfer) check(dir string) error {
	if dir != sandbox.Workspace {
		return fmt.Errorf("virtiofs staging holds %s only, not %s", sandbox.Workspace, dir)
	}
	return nil
}

// Push materialises base from the content store into the staging
// directory, which must not exist yet.
// Push clones base into the staging directory; the guest keeps no
// state of it (the host walks the clone itself after the run).
func (t stagingTransfer) Push(ctx context.Context, _ Machine, dest string, base *manifest.Manifest, store *objects.Store, progress func(done, total int)) (transfer.Known, error) {
	return transfer.Known{}, t.clone(ctx, dest, base, store, progress)
}

func (t stagingTransfer) clone(ctx context.Context, dest string, base *manifest.Manifest, store *objects.Store, progress func(done, total int)) error {
	if err := t.check(dest); err != nil {
		return err
	}
	_, err := CloneBaseline(ctx, t.root, base, store, progress)
	return err
}

// Manifest walks the staging directory the guest could write, with the
// rules the guest's own walk follows, and reads the result back as a
// manifest from the guest: setuid, setgid and sticky bits dropped, paths,
// types and caps validated. Symbolic links are recorded, never followed;
// fifos, sockets and devices are left out.
func (t stagingTransfer) Manifest(ctx context.Context, _ Machine, dir string, _ transfer.Known, limits manifest.Limits, excludes []string) (transfer.Known, error) {
	if err := t.check(dir); err != nil {
		return transfer.Known{}, err
	}
	m, left, err := walkHostile(ctx, t.root, limits, excludes)
	return transfer.Known{Manifest: m, Skipped: left}, err
}

// Pull stores the changed files of the staging directory into the
// content store, each checked against the size and SHA-256 its manifest
// entry declared.
func (t stagingTransfer) Pull(ctx context.Context, _ Machine, dir string, changes []manifest.Change, store *objects.Store, _ manifest.Limits, progress func(done, total int)) error {
	if err := t.check(dir); err != nil {
		return err
	}
	root, err := os.OpenRoot(t.root)
	if err != nil {
		return fmt.Errorf("open staging: %w", err)
	}
	defer root.Close()
	for i, c := range changes {
		if err := ctx.Err(); err != nil {
			return err
		}
		if c.New == nil || c.New.Type != manifest.File {
			continue
		}
		if err := storeHostile(root, *c.New, store); err != nil {
			return err
		}
		if progress != nil {
			progress(i+1, len(changes))
		}
	}
	return nil
}

// storeHostile copies one file of a tree the guest could write into the
// store. os.Root keeps every path inside the tree (a parent the guest
// swapped for a symlink cannot lead out), O_NOFOLLOW refuses a final
// symlink and O_NONBLOCK a fifo, and the content must match the entry.
func storeHostile(root *os.Root, e manifest.Entry, store *objects.Store) error {
	f, err := root.OpenFile(e.Path, os.O_RDONLY|noFollow|nonBlock, 0)
	if err != nil {
		return fmt.Errorf("read %s from staging: %w", e.Path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read %s from staging: %w", e.Path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("read %s from staging: no longer a regular file (%s)", e.Path, fi.Mode().Type())
	}
	if err := store.PutExpect(io.LimitReader(f, e.Size+1), e.SHA256, e.Size); err != nil {
		return fmt.Errorf("read %s from staging: %w", e.Path, err)
	}
	return nil
}

// walkHostile walks a tree the guest could write, stopping early at the
// caps of limits, and returns its manifest as Decode would from the guest,
// without the files over the per-file cap, which it returns as
// exclusions (manifest.ReasonTooLarge).
func walkHostile(ctx context.Context, dir string, limits manifest.Limits, excludes []string) (*manifest.Manifest, []manifest.Exclusion, error) {
	maxEntries, maxTotal := hostileCaps(limits)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	m, report, err := manifest.Walk(ctx, dir, manifest.WalkOptions{
		Excludes: excludes, IncludeGit: limits.AllowGit, MaxFileSize: limits.FileSizeCap(),
		Progress: func(p manifest.Progress) {
			switch {
			case p.Entries > maxEntries:
				cancel(fmt.Errorf("the workspace has more than %d entries: %w", maxEntries, manifest.ErrTooLarge))
			case p.BytesTotal > maxTotal:
				cancel(fmt.Errorf("files in the workspace add up to %d bytes, over the limit of %d: %w", p.BytesTotal, maxTotal, manifest.ErrTooLarge))
			}
		},
	})
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return nil, nil, cause
	}
	if err != nil {
		return nil, nil, err
	}
	// A file that grew past the cap after its stat is left out too.
	m, late := manifest.LeaveOutLarge(m, nil, limits)
	m.StripSpecialBits()
	if err := m.Validate(limits); err != nil {
		return nil, nil, err
	}
	var left []manifest.Exclusion
	for _, x := range report.Excluded {
		if x.Reason == manifest.ReasonTooLarge {
			left = append(left, x)
		}
	}
	return m, append(left, late...), nil
}

// hostileCaps are the entry and byte caps of limits, defaults filled in
// as manifest.Limits documents them.
func hostileCaps(l manifest.Limits) (entries int, total int64) {
	entries, total = l.MaxEntries, l.MaxTotalBytes
	switch {
	case entries == 0:
		entries = 500_000
	case entries < 0:
		entries = int(^uint(0) >> 1)
	}
	switch {
	case total == 0:
		total = 4 << 30
	case total < 0:
		total = 1<<63 - 1
	}
	return entries, total
}

// CloneStats says how a staging clone was made.
type CloneStats struct {
	Files, Dirs, Symlinks int
	Bytes                 int64
	// Reflinked counts files cloned copy-on-write (FICLONE); the rest were
	// copied.
	Reflinked int
}

// CloneBaseline materialises base from the content store into dir, which
// must not exist: directories, symbolic links, and files with their
// permission bits. Files are reflinked from the store where the file
// system can (FICLONE), copied otherwise; never hard-linked, because the
// guest writes the clone and would write through a link into the store.
func CloneBaseline(ctx context.Context, dir string, base *manifest.Manifest, store *objects.Store, progress func(done, total int)) (CloneStats, error) {
	var st CloneStats
	if err := os.Mkdir(dir, 0o755); err != nil {
		return st, fmt.Errorf("staging clone: %w", err)
	}
	var files []manifest.Entry
	var dirs []manifest.Entry
	for _, e := range base.Entries {
		p := filepath.Join(dir, filepath.FromSlash(e.Path))
		switch e.Type {
		case manifest.Dir:
			if err := os.Mkdir(p, 0o700); err != nil {
				return st, fmt.Errorf("staging clone: %w", err)
			}
			dirs = append(dirs, e)
			st.Dirs++
		case manifest.Symlink:
			if err := os.Symlink(e.Target, p); err != nil {
				return st, fmt.Errorf("staging clone: %w", err)
			}
			st.Symlinks++
		case manifest.File:
			files = append(files, e)
			st.Bytes += e.Size
		}
	}
	st.Files = len(files)
	total := len(files) + st.Symlinks
	var done, reflinked atomic.Int64
	done.Store(int64(st.Symlinks))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(min(16, 2*runtime.NumCPU()))
	var copier disk.FileCopier
	for _, e := range files {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			src, err := store.Path(e.SHA256)
			if err != nil {
				return err
			}
			linked, err := copier.Copy(src, filepath.Join(dir, filepath.FromSlash(e.Path)), e.Mode.Perm())
			if err != nil {
				return fmt.Errorf("staging clone: %s: %w", e.Path, err)
			}
			if linked {
				reflinked.Add(1)
			}
			if n := done.Add(1); progress != nil && (n%256 == 0 || int(n) == total) {
				progress(int(n), total)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return st, err
	}
	st.Reflinked = int(reflinked.Load())
	// Directory modes last, deepest first, so a read-only directory does
	// not stop its own filling.
	for _, e := range slices.Backward(dirs) {
		if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(e.Path)), e.Mode.Perm()); err != nil {
			return st, fmt.Errorf("staging clone: %w", err)
		}
	}
	if progress != nil && total == 0 {
		progress(0, 0)
	}
	return st, nil
}
