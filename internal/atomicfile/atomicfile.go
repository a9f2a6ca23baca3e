// Package atomicfile writes a file so that a reader sees its old content
// or its new one, never a mix, and a crash leaves one or the other: the
// data goes to a temporary file in the same directory, is synced, renamed
// over the target, and the directory is synced. Airlock's state files
// (sandbox.json, review decisions, apply journals, the trust store, a
// guest's manifest state, checkpoint and warm snapshot records, saved
// machine descriptions, a supervisor's spec and identity, an image's
// kernel and image.toml, the KVM probe verdict, vz identities) all go
// through it.
//
// It uses the standard library only, so any package may import it; it
// must not import anything of Airlock's.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile writes data to path atomically and durably, with permission
// bits perm. The temporary file is removed if anything fails.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// SyncDir makes a rename or removal in dir durable. File systems that
// cannot sync a directory (EINVAL, ENOTSUP) are not an error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
