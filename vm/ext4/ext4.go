// Package ext4 writes ext4 file systems on the host in pure Go, the same
// on macOS and Linux, without mkfs or root: Format makes an empty one,
// sparse, for a disk the guest writes (an overlay's upper layer).
//
// It is plain files and go-diskfs: it must not import app, guest, sync,
// review, the hypervisor packages (vm/qemu, vm/vz), fyne or vz.
package ext4

import (
	"bytes"
	"fmt"
	"os"

	"github.com/diskfs/go-diskfs/backend"
	diskfs "github.com/diskfs/go-diskfs/filesystem/ext4"
)

// Format makes path a new, empty ext4 file system of size bytes,
// labelled label, in pure Go (go-diskfs): no mkfs on the host, the same
// on macOS and Linux. The file is sparse: only the blocks that hold
// something other than zeros are written (about 400 KiB for 8 GiB).
func Format(path string, size int64, label string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		_, err = diskfs.Create(&sparseStorage{File: f, written: map[int64]bool{}}, size, 0, 512, &diskfs.Params{VolumeName: label,
			// Hashed directories: a project's large directories
			// (node_modules) are looked up in a tree, not a list.
			Features: []diskfs.FeatureOpt{diskfs.WithFeatureDirectoryIndices(true)}})
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("format %s as ext4: %w", path, err)
	}
	return nil
}

// sparseStorage is a new, all-zero file as go-diskfs's storage: a write of
// zeros where nothing was written yet changes nothing, so it is skipped
// and the file keeps its holes.
type sparseStorage struct {
	*os.File
	written map[int64]bool // 4 KiB blocks written with data
}

const sparseBlock = 4096

func (s *sparseStorage) Sys() (*os.File, error)                  { return s.File, nil }
func (s *sparseStorage) Writable() (backend.WritableFile, error) { return s, nil }
func (s *sparseStorage) Path() string                            { return s.Name() }

func (s *sparseStorage) WriteAt(p []byte, off int64) (int, error) {
	// Block by block: a large write (an inode table) is mostly zeros.
	done := 0
	for done < len(p) {
		at := off + int64(done)
		n := min(len(p)-done, int(sparseBlock-at%sparseBlock))
		chunk := p[done : done+n]
		b := at / sparseBlock
		if s.written[b] || !allZero(chunk) {
			if _, err := s.File.WriteAt(chunk, at); err != nil {
				return done, err
			}
			s.written[b] = true
		}
		done += n
	}
	return done, nil
}

func allZero(p []byte) bool {
	var zero [sparseBlock]byte
	for len(p) > 0 {
		n := min(len(p), len(zero))
		if !bytes.Equal(p[:n], zero[:n]) {
			return false
		}
		p = p[n:]
	}
	return true
}
