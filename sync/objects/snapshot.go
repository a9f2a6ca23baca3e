package objects

import (
	"context"
	"errors"
	"fmt"
	"os"

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
func SnapshotTree(ctx context.Context, root string, m *manifest.Manifest, s *Store) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", root, err)
	}
	defer r.Close()
	for _, e := range m.Entries {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("snapshot %s: %w", root, err)
		}
		if e.Type != manifest.File || s.Has(e.SHA256) {
			continue
		}
		if err := snapshotFile(ctx, r, e, s); err != nil {
			return err
		}
	}
	return nil
}

func snapshotFile(ctx context.Context, r *os.Root, e manifest.Entry, s *Store) error {
	f, err := r.Open(e.Path)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", e.Path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", e.Path, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("snapshot %s: now a %s: %w", e.Path, info.Mode().Type(), ErrChanged)
	}
	if err := ValidSum(e.SHA256); err != nil {
		return fmt.Errorf("snapshot %s: %w", e.Path, err)
	}
	if _, _, err := s.put(ctx, f, e.SHA256, e.Size); err != nil {
		if errors.Is(err, ErrMismatch) {
			return fmt.Errorf("snapshot %s: %w (%w)", e.Path, ErrChanged, err)
		}
		return fmt.Errorf("snapshot %s: %w", e.Path, err)
	}
	return nil
}
