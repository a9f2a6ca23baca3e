package oci

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Store is the content store: blobs by digest under Dir/blobs/sha256, each
// written once, verified before it is kept, read-only after.
type Store struct {
	Dir string
}

// Path is where the blob with digest d is kept.
func (s Store) Path(d v1.Hash) string {
	return filepath.Join(s.Dir, "blobs", d.Algorithm, d.Hex)
}

// Has says whether the blob with digest d is in the store.
func (s Store) Has(d v1.Hash) bool {
	fi, err := os.Stat(s.Path(d))
	return err == nil && fi.Mode().IsRegular()
}

// Open opens the blob with digest d.
func (s Store) Open(d v1.Hash) (*os.File, error) {
	if err := checkDigest(d); err != nil {
		return nil, err
	}
	f, err := os.Open(s.Path(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blob %s is not in the content store %s: pull the image again", d, s.Dir)
	}
	return f, err
}

// Put keeps what r reads as the blob with digest d: it is written to a
// temporary file, its digest checked, then renamed into place, so that a
// blob in the store is always whole and right. A blob already there is not
// read again (r is left unread). size is the expected size, -1 when
// unknown.
func (s Store) Put(d v1.Hash, size int64, r io.Reader) error {
	if err := checkDigest(d); err != nil {
		return err
	}
	if s.Has(d) {
		return nil
	}
	dst := s.Path(d)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+d.Hex+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), r)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write blob %s: %w", short(d), err)
	}
	if size >= 0 && n != size {
		return fmt.Errorf("blob %s: the registry sent %d bytes, the manifest says %d", short(d), n, size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != d.Hex {
		return fmt.Errorf("blob %s: the registry sent content whose digest is sha256:%s", short(d), got)
	}
	if err := os.Chmod(tmp.Name(), 0o400); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// NewBlob starts a blob made here (a provisioning step's layer, from a
// guest), whose digest is known once it is written: it is hashed as it is
// written, so keeping it reads nothing again. Commit keeps it; Abort, or
// a Commit that fails, leaves nothing.
func (s Store) NewBlob() (*BlobWriter, error) {
	dir := filepath.Join(s.Dir, "blobs", "sha256")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".new-*")
	if err != nil {
		return nil, err
	}
	return &BlobWriter{s: s, f: f, h: sha256.New()}, nil
}

// BlobWriter is a blob being written (Store.NewBlob).
type BlobWriter struct {
	s Store
	f *os.File
	h hash.Hash
	n int64
}

func (w *BlobWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.h.Write(p[:n])
	w.n += int64(n)
	return n, err
}

// Commit keeps what was written as the blob of its digest and returns
// the digest and size. A blob already there is kept as it was.
func (w *BlobWriter) Commit() (v1.Hash, int64, error) {
	tmp := w.f.Name()
	defer os.Remove(tmp)
	err := w.f.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return v1.Hash{}, 0, fmt.Errorf("write blob: %w", err)
	}
	d := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(w.h.Sum(nil))}
	if w.s.Has(d) {
		return d, w.n, nil
	}
	if err := os.Chmod(tmp, 0o400); err != nil {
		return v1.Hash{}, 0, err
	}
	return d, w.n, os.Rename(tmp, w.s.Path(d))
}

// Abort drops what was written.
func (w *BlobWriter) Abort() {
	w.f.Close()
	os.Remove(w.f.Name())
}

// checkDigest refuses a digest this store cannot verify or that would make
// a path of anything but its hex.
func checkDigest(d v1.Hash) error {
	if d.Algorithm != "sha256" || len(d.Hex) != 64 || strings.Trim(d.Hex, "0123456789abcdef") != "" {
		return fmt.Errorf("digest %q: only sha256 digests are supported", d.String())
	}
	return nil
}

// short is a digest as people read it: sha256:0123456789ab.
func short(d v1.Hash) string {
	if len(d.Hex) < 12 {
		return d.String()
	}
	return d.Algorithm + ":" + d.Hex[:12]
}
