// Package objects is Airlock's content-addressed store: a directory of
// files named by the SHA-256 of their content (objects/ab/cdef…), written
// atomically and read-only once written. It keeps snapshot baselines,
// files pulled from sandboxes and apply backups safe from later edits of
// the real project.
//
// It knows nothing of VMs, the guest, review or the GUI: it must not
// import anything of Airlock's but sync/manifest (for SnapshotTree; never
// the other way round), nor fyne.
package objects

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/airlock-dev/airlock/internal/ctxio"
)

// Errors callers branch on.
var (
	// ErrInvalidSum means a string is not a lower-case hex SHA-256 (64
	// characters): it is never turned into a path.
	ErrInvalidSum = errors.New("invalid sha256")
	// ErrNotFound means the store has no object with that sum. It matches
	// fs.ErrNotExist too.
	ErrNotFound = fmt.Errorf("object not found: %w", fs.ErrNotExist)
	// ErrMismatch means content did not hash to the expected sum.
	ErrMismatch = errors.New("content does not match its sha256")
)

// objectMode is the mode of a stored object: read-only, so a hard link to
// it cannot be edited in place by mistake, and readable by its owner
// only: a project's 0600 file stays the user's once stored.
const objectMode = 0o400

// dirMode is the mode of the store's directories: only the owner can list
// or enter them, which also keeps objects written 0444 by older versions
// out of other users' reach.
const dirMode = 0o700

// Store is a content-addressed directory. Its methods are safe for
// concurrent use, by several processes too.
type Store struct {
	dir string
}

// Open opens (creating if needed) the store in dir.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open object store %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Join(abs, "tmp"), dirMode); err != nil {
		return nil, fmt.Errorf("open object store %s: %w", dir, err)
	}
	// A store made before it was private: tighten its top directory once,
	// which puts every object in it out of reach without touching them.
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("open object store %s: %w", dir, err)
	}
	if perm := fi.Mode().Perm(); perm&^dirMode != 0 {
		if err := os.Chmod(abs, perm&dirMode); err != nil {
			return nil, fmt.Errorf("open object store %s: it is %#o, readable by other users, and cannot be made %#o: %w", dir, perm, perm&dirMode, err)
		}
	}
	return &Store{dir: abs}, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// ValidSum returns nil when sum is 64 lower-case hex digits, and an error
// wrapping ErrInvalidSum otherwise.
func ValidSum(sum string) error {
	if len(sum) != 64 {
		return fmt.Errorf("%w: %q is %d characters, want 64", ErrInvalidSum, clip(sum), len(sum))
	}
	for i := 0; i < len(sum); i++ {
		if c := sum[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("%w: %q has %q at %d, want lower-case hex", ErrInvalidSum, sum, c, i)
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// Path returns where the object sum lives (it may not exist yet), for
// reading or hard-linking. The file must not be written.
func (s *Store) Path(sum string) (string, error) {
	if err := ValidSum(sum); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, sum[:2], sum[2:]), nil
}

// objectPath is Path of a sum known to be valid (one just computed).
func (s *Store) objectPath(sum string) string { return filepath.Join(s.dir, sum[:2], sum[2:]) }

// Has reports whether the object sum is stored. An invalid sum is never
// stored.
func (s *Store) Has(sum string) bool {
	p, err := s.Path(sum)
	if err != nil {
		return false
	}
	info, err := os.Lstat(p)
	return err == nil && info.Mode().IsRegular()
}

// Open opens the object sum for reading.
func (s *Store) Open(sum string) (io.ReadCloser, error) {
	p, err := s.Path(sum)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open object %s: %w", sum, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open object %s: %w", sum, err)
	}
	return f, nil
}

// Put stores the content of r and returns its SHA-256 and size. Storing
// content that is already there changes nothing.
func (s *Store) Put(r io.Reader) (sum string, size int64, err error) {
	return s.put(context.Background(), r, "", -1)
}

// PutExpect stores the content of r, which must hash to sum and be size
// bytes long (size < 0: any size), as content pulled from an untrusted
// source must. On a mismatch nothing is stored and the error wraps
// ErrMismatch.
func (s *Store) PutExpect(r io.Reader, sum string, size int64) error {
	if err := ValidSum(sum); err != nil {
		return err
	}
	_, _, err := s.put(context.Background(), r, sum, size)
	return err
}

// PutFile stores the content of the regular file at path.
func (s *Store) PutFile(path string) (sum string, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("store %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", 0, fmt.Errorf("store %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return "", 0, fmt.Errorf("store %s: not a regular file (%s)", path, info.Mode().Type())
	}
	sum, size, err = s.Put(f)
	if err != nil {
		return "", 0, fmt.Errorf("store %s: %w", path, err)
	}
	return sum, size, nil
}

// put writes r to a temporary file in the store, fsyncs it, checks it
// against want (when set) and renames it into place.
func (s *Store) put(ctx context.Context, r io.Reader, want string, wantSize int64) (sum string, size int64, err error) {
	t, err := s.writeTemp(ctx, r, want, wantSize, true)
	if err != nil || t.path == "" {
		return t.sum, t.size, err
	}
	if err := s.commit(t); err != nil {
		return "", 0, err
	}
	if err := syncDir(filepath.Dir(s.objectPath(t.sum))); err != nil {
		return "", 0, fmt.Errorf("put object %s: %w", t.sum, err)
	}
	return t.sum, t.size, nil
}

// temp is content written to the store's tmp directory and checked, not
// yet in place; path is empty when the store had it already.
type temp struct {
	path, sum string
	size      int64
}

// writeTemp writes r to a temporary file in the store, fsynced when sync
// is set, and checks it against want (when set) and wantSize (>= 0).
func (s *Store) writeTemp(ctx context.Context, r io.Reader, want string, wantSize int64, sync bool) (t temp, err error) {
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "put-*")
	if err != nil {
		return temp{}, fmt.Errorf("put object: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	src := r
	if wantSize >= 0 {
		src = io.LimitReader(r, wantSize+1) // one more byte shows a longer stream
	}
	size, err := io.CopyBuffer(io.MultiWriter(tmp, h), ctxio.Reader(ctx, src), make([]byte, 256<<10))
	if err != nil {
		return temp{}, fmt.Errorf("put object: %w", err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if want != "" && sum != want {
		return temp{}, fmt.Errorf("put object: got sha256 %s, want %s: %w", sum, want, ErrMismatch)
	}
	if wantSize >= 0 && size != wantSize {
		return temp{}, fmt.Errorf("put object %s: got %d bytes, want %d: %w", sum, size, wantSize, ErrMismatch)
	}
	if info, err := os.Lstat(s.objectPath(sum)); err == nil && info.Mode().IsRegular() && info.Size() == size {
		tmp.Close()
		os.Remove(tmp.Name())
		return temp{sum: sum, size: size}, nil // already stored
	}
	if err := tmp.Chmod(objectMode); err != nil {
		return temp{}, fmt.Errorf("put object %s: %w", sum, err)
	}
	if sync {
		if err := tmp.Sync(); err != nil {
			return temp{}, fmt.Errorf("put object %s: %w", sum, err)
		}
	}
	if err := tmp.Close(); err != nil {
		return temp{}, fmt.Errorf("put object %s: %w", sum, err)
	}
	return temp{path: tmp.Name(), sum: sum, size: size}, nil
}

// commit renames a checked temporary file into place (its directory is
// not synced).
func (s *Store) commit(t temp) error {
	dst := s.objectPath(t.sum)
	if err := os.MkdirAll(filepath.Dir(dst), dirMode); err != nil {
		os.Remove(t.path)
		return fmt.Errorf("put object %s: %w", t.sum, err)
	}
	if err := os.Rename(t.path, dst); err != nil {
		os.Remove(t.path)
		return fmt.Errorf("put object %s: %w", t.sum, err)
	}
	return nil
}

// Verify re-hashes the object sum and returns an error wrapping
// ErrMismatch if the stored bytes no longer match.
func (s *Store) Verify(sum string) error {
	rc, err := s.Open(sum)
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		return fmt.Errorf("verify object %s: %w", sum, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("verify object %s: stored bytes hash to %s: %w", sum, got, ErrMismatch)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
