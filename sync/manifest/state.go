package manifest

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
	// Skipped is what the walk that made Manifest left out for the user
	// to hear of (the reasons Noteworthy keeps, not capped), so that a
	// Rewalk can report it again.
	Skipped []Exclusion
	// Rules names the rules of the walk that made Manifest (the caller's
	// fingerprint of its WalkOptions), "" for a manifest a seed vouched
	// for: a Rewalk from it is only right under the same rules.
	Rules string
}

// stateMagic starts a state file; the digit is the format version.
const stateMagic = "airlock-manifest-state 5\n"

// errState: a state file that is not one, or is cut short.
var errState = errors.New("not a manifest state file")

// WriteStateFile writes s to path atomically (a temporary file in the same
// directory, then rename), readable by its owner only.
// Unlike internal/atomicfile it streams the encoding and does not fsync:
// the guest keeps its states in memory (/run), they die with the VM, and
// a state of 100,000 entries is not worth a second copy in memory.
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
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	s, err := decodeState(string(data))
	if err != nil {
		return nil, fmt.Errorf("read state %s: %w", path, err)
	}
	return s, nil
}

// The binary form, after stateMagic: the ID, the rules and the entry count, then per
// entry its path, type, mode, and by type the size and hex SHA-256 (files) or
// the target (symlinks), then for files whether the cache holds their stat
// data, and that data; then the count of Skipped and per exclusion its
// path, whether it is a directory, reason, rule and size. Strings are
// length-prefixed, numbers varints.
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
	buf = appendString(buf, s.Rules)
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
			if !validSum(e.SHA256) {
				return fmt.Errorf("entry %q: sha256 %q", e.Path, e.SHA256)
			}
			buf = binary.AppendVarint(buf, e.Size)
			buf = append(buf, e.SHA256...) // hex: decoded without an allocation
			c, ok := cache[e.Path]
			if ok && c.sum == e.SHA256 {
				buf = append(buf, 1)
				buf = binary.AppendVarint(buf, c.stat.size)
				buf = binary.AppendVarint(buf, c.stat.mtime)
				buf = binary.AppendVarint(buf, c.stat.ctime)
				buf = binary.AppendUvarint(buf, c.stat.ino)
				buf = binary.AppendUvarint(buf, c.stat.dev)
				buf = binary.AppendUvarint(buf, uint64(c.stat.mode))
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
	buf = binary.AppendUvarint(buf, uint64(len(s.Skipped)))
	for _, x := range s.Skipped {
		buf = appendString(buf, x.Path)
		if x.Dir {
			buf = append(buf, 1)
		} else {
			buf = append(buf, 0)
		}
		buf = appendString(buf, string(x.Reason))
		buf = appendString(buf, x.Rule)
		buf = binary.AppendVarint(buf, x.Size)
	}
	_, err := w.Write(buf)
	return err
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// stateReader decodes the binary form. Strings it returns are slices of
// the one string holding the file, so decoding 100,000 paths makes no
// allocation per path.
type stateReader struct {
	data string
	off  int
	err  bool
}

func (r *stateReader) uvarint() uint64 {
	var x uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if r.off >= len(r.data) {
			r.err = true
			return 0
		}
		b := r.data[r.off]
		r.off++
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return x
		}
	}
	r.err = true
	return 0
}

func (r *stateReader) varint() int64 {
	u := r.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (r *stateReader) bytes(n uint64) string {
	if r.err || n > uint64(len(r.data)-r.off) {
		r.err = true
		return ""
	}
	s := r.data[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

func (r *stateReader) string() string {
	n := r.uvarint()
	if n > 1<<16 {
		r.err = true
	}
	return r.bytes(n)
}

func (r *stateReader) byte() byte {
	if b := r.bytes(1); b != "" {
		return b[0]
	}
	return 0
}

func decodeState(data string) (*State, error) {
	if !strings.HasPrefix(data, stateMagic) {
		return nil, errState
	}
	r := &stateReader{data: data, off: len(stateMagic)}
	id := r.string()
	rules := r.string()
	n := r.uvarint()
	if r.err || n > uint64(len(data)) { // every entry takes bytes
		return nil, errState
	}
	s := &State{ID: id, Rules: rules, Manifest: &Manifest{Entries: make([]Entry, 0, n)}, Cache: &HashCache{files: make(map[string]cachedFile, n)}}
	for range n {
		e := Entry{Path: r.string()}
		tag := r.byte()
		e.Mode = fs.FileMode(r.uvarint())
		switch tag {
		case tagFile:
			e.Type = File
			e.Size = r.varint()
			e.SHA256 = r.bytes(64)
			if r.byte() == 1 {
				var st fileStat
				st.size = r.varint()
				st.mtime = r.varint()
				st.ctime = r.varint()
				st.ino = r.uvarint()
				st.dev = r.uvarint()
				st.mode = uint32(r.uvarint())
				s.Cache.files[e.Path] = cachedFile{st, e.SHA256}
			}
		case tagDir:
			e.Type = Dir
		case tagSymlink:
			e.Type = Symlink
			e.Target = r.string()
		default:
			return nil, errState
		}
		if r.err {
			return nil, errState
		}
		s.Manifest.Entries = append(s.Manifest.Entries, e)
	}
	n = r.uvarint()
	if r.err || n > uint64(len(data)) {
		return nil, errState
	}
	for range n {
		x := Exclusion{Path: r.string(), Dir: r.byte() == 1, Reason: Reason(r.string()), Rule: r.string(), Size: r.varint()}
		if r.err {
			return nil, errState
		}
		s.Skipped = append(s.Skipped, x)
	}
	if r.off != len(data) {
		return nil, errState
	}
	return s, nil
}

// Seed fills c from m, a manifest of the tree at root that the caller
// vouches for (the host that has just written the tree from it): each
// regular file of m found under root with m's size is remembered with m's
// hash and its stat data now, so that the next Walk with c reads none of
// them. Files changed within two seconds of the seeding are left out, as
// by Walk. It reads no content, follows no link, and replaces what c
// held.
func (c *HashCache) Seed(ctx context.Context, root string, m *Manifest) error {
	_, err := c.SeedExact(ctx, root, m)
	return err
}

// SeedExact is Seed, and reports whether every file of m was found under
// root as a regular file of m's size (the tree is, as far as stat data
// tells, what m says).
func (c *HashCache) SeedExact(ctx context.Context, root string, m *Manifest) (bool, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return false, fmt.Errorf("seed hash cache: %w", err)
	}
	defer r.Close()
	start := c.clock()
	files := make(map[string]cachedFile)
	exact := true
	for _, e := range m.Entries {
		if e.Type != File {
			continue
		}
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("seed hash cache: %w", err)
		}
		info, err := r.Lstat(e.Path)
		if err != nil || !info.Mode().IsRegular() || info.Size() != e.Size {
			exact = false
			continue // the next walk hashes it
		}
		if st, ok := statOf(info); ok {
			files[e.Path] = cachedFile{st, e.SHA256}
		}
	}
	c.replace(files, start)
	return exact, nil
}
