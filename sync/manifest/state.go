package manifest

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// State is what a walker keeps between two walks of one tree: the
// manifest it last reported (or was seeded with) under the name ID, and
// a HashCache of that tree. With it the next walk reads only the files
// whose stat data changed, and reports only the Delta against Manifest.
// The guest keeps one per collected directory, readable by root only.
type State struct {
	ID       string
	Manifest *Manifest
	Cache    *HashCache
}

// stateMagic starts a state file; the digit is the format version.
const stateMagic = "airlock-manifest-state 1\n"

// errState: a state file that is not one, or is cut short.
var errState = errors.New("not a manifest state file")

// WriteStateFile writes s to path atomically (a temporary file in the same
// directory, then rename), readable by its owner only.
func WriteStateFile(path string, s *State) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".state-*")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	defer os.Remove(f.Name()) // after a successful rename, a no-op
	bw := bufio.NewWriterSize(f, 256<<10)
	werr := s.encode(bw)
	if werr == nil {
		werr = bw.Flush()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		return fmt.Errorf("write state %s: %w", path, werr)
	}
	return nil
}

// ReadStateFile reads a state written by WriteStateFile. A missing file
// is an error wrapping fs.ErrNotExist.
func ReadStateFile(path string) (*State, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	defer f.Close()
	s, err := decodeState(bufio.NewReaderSize(f, 256<<10))
	if err != nil {
		return nil, fmt.Errorf("read state %s: %w", path, err)
	}
	return s, nil
}

// The binary form, after stateMagic: the ID and the entry count, then per
// entry its path, type, mode, and by type the size and SHA-256 (files) or
// the target (symlinks), then for files whether the cache holds their stat
// data, and that data. Strings are length-prefixed, numbers varints.
const (
	tagFile    = 'f'
	tagDir     = 'd'
	tagSymlink = 'l'
)

func (s *State) encode(w *bufio.Writer) error {
	var cache map[string]cachedFile
	if s.Cache != nil {
		s.Cache.mu.Lock()
		defer s.Cache.mu.Unlock()
		cache = s.Cache.files
	}
	buf := make([]byte, 0, 512)
	buf = append(buf, stateMagic...)
	buf = appendString(buf, s.ID)
	buf = binary.AppendUvarint(buf, uint64(len(s.Manifest.Entries)))
	for _, e := range s.Manifest.Entries {
		buf = appendString(buf, e.Path)
		switch e.Type {
		case File:
			buf = append(buf, tagFile)
		case Dir:
			buf = append(buf, tagDir)
		case Symlink:
			buf = append(buf, tagSymlink)
		default:
			return fmt.Errorf("entry %q: unknown type %q", e.Path, e.Type)
		}
		buf = binary.AppendUvarint(buf, uint64(e.Mode))
		switch e.Type {
		case File:
			sum, err := hex.DecodeString(e.SHA256)
			if err != nil || len(sum) != 32 {
				return fmt.Errorf("entry %q: sha256 %q", e.Path, e.SHA256)
			}
			buf = binary.AppendVarint(buf, e.Size)
			buf = append(buf, sum...)
			c, ok := cache[e.Path]
			if ok && c.sum == e.SHA256 {
				buf = append(buf, 1)
				buf = binary.AppendVarint(buf, c.stat.size)
				buf = binary.AppendVarint(buf, c.stat.mtime)
				buf = binary.AppendVarint(buf, c.stat.ctime)
				buf = binary.AppendUvarint(buf, c.stat.ino)
				buf = binary.AppendUvarint(buf, c.stat.dev)
			} else {
				buf = append(buf, 0)
			}
		case Symlink:
			buf = appendString(buf, e.Target)
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		buf = buf[:0]
	}
	_, err := w.Write(buf)
	return err
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func decodeState(r *bufio.Reader) (*State, error) {
	magic := make([]byte, len(stateMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != stateMagic {
		return nil, errState
	}
	id, err := readString(r)
	if err != nil {
		return nil, err
	}
	n, err := binary.ReadUvarint(r)
	if err != nil || n > 1<<26 {
		return nil, errState
	}
	s := &State{ID: id, Manifest: &Manifest{Entries: make([]Entry, 0, n)}, Cache: &HashCache{files: make(map[string]cachedFile, n)}}
	var sum [32]byte
	for range n {
		var e Entry
		if e.Path, err = readString(r); err != nil {
			return nil, err
		}
		tag, err := r.ReadByte()
		if err != nil {
			return nil, errState
		}
		mode, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, errState
		}
		e.Mode = fs.FileMode(mode)
		switch tag {
		case tagFile:
			e.Type = File
			if e.Size, err = binary.ReadVarint(r); err != nil {
				return nil, errState
			}
			if _, err := io.ReadFull(r, sum[:]); err != nil {
				return nil, errState
			}
			e.SHA256 = hex.EncodeToString(sum[:])
			has, err := r.ReadByte()
			if err != nil {
				return nil, errState
			}
			if has == 1 {
				var st fileStat
				var err1, err2, err3, err4, err5 error
				st.size, err1 = binary.ReadVarint(r)
				st.mtime, err2 = binary.ReadVarint(r)
				st.ctime, err3 = binary.ReadVarint(r)
				st.ino, err4 = binary.ReadUvarint(r)
				st.dev, err5 = binary.ReadUvarint(r)
				if errors.Join(err1, err2, err3, err4, err5) != nil {
					return nil, errState
				}
				s.Cache.files[e.Path] = cachedFile{st, e.SHA256}
			}
		case tagDir:
			e.Type = Dir
		case tagSymlink:
			e.Type = Symlink
			if e.Target, err = readString(r); err != nil {
				return nil, err
			}
		default:
			return nil, errState
		}
		s.Manifest.Entries = append(s.Manifest.Entries, e)
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return nil, errState
	}
	return s, nil
}

func readString(r *bufio.Reader) (string, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil || n > 1<<16 {
		return "", errState
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", errState
	}
	return string(b), nil
}

// Seed fills c from m, a manifest of the tree at root that the caller
// vouches for (the host that has just written the tree from it): each
// regular file of m found under root with m's size is remembered with m's
// hash and its stat data now, so that the next Walk with c reads none of
// them. Files changed within two seconds of the seeding are left out, as
// by Walk. It reads no content, follows no link, and replaces what c
// held.
func (c *HashCache) Seed(ctx context.Context, root string, m *Manifest) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return fmt.Errorf("seed hash cache: %w", err)
	}
	defer r.Close()
	start := c.clock()
	files := make(map[string]cachedFile)
	for _, e := range m.Entries {
		if e.Type != File {
			continue
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("seed hash cache: %w", err)
		}
		info, err := r.Lstat(e.Path)
		if err != nil || !info.Mode().IsRegular() || info.Size() != e.Size {
			continue // the next walk hashes it
		}
		if st, ok := statOf(info); ok {
			files[e.Path] = cachedFile{st, e.SHA256}
		}
	}
	c.replace(files, start)
	return nil
}
