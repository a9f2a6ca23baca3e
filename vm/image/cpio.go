package image

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
)

// File type bits of a cpio mode (as in stat's st_mode).
const (
	modeDir  = 0o040000
	modeReg  = 0o100000
	modeChar = 0o020000
	modeLink = 0o120000
	modePerm = 0o7777
)

// cpioMaxName bounds an entry's path (the kernel's PATH_MAX, NUL included).
const cpioMaxName = 4096

// cpioEntry is one record of an archive.
type cpioEntry struct {
	path  string // relative, slash-separated, no leading '/'
	mode  uint32 // type and permission bits
	data  []byte // regular file content or symlink target
	major uint32 // device number of a character device
	minor uint32
}

// archive is a reproducible newc ("070701") cpio archive being assembled:
// entries are written sorted by path with owner 0:0, mtime 0 and inode
// numbers given in that order, and every parent directory gets a record
// (0755 unless added explicitly), so the same entries always give the same
// bytes. The zero value is empty and ready to use.
type archive struct {
	entries map[string]*cpioEntry
}

// cleanPath checks a path given to the archive and returns it without a
// leading '/'. It rejects empty paths, NUL bytes, "." and ".." elements,
// empty elements ("a//b", a trailing '/') and paths too long for the
// kernel to unpack.
func cleanPath(p string) (string, error) {
	rel := strings.TrimPrefix(p, "/")
	switch {
	case rel == "":
		return "", fmt.Errorf("cpio path %q: empty", p)
	case strings.IndexByte(rel, 0) >= 0:
		return "", fmt.Errorf("cpio path %q: contains a NUL byte", p)
	case len(rel)+1 > cpioMaxName:
		return "", fmt.Errorf("cpio path %.40q…: longer than %d bytes", p, cpioMaxName-1)
	}
	for _, el := range strings.Split(rel, "/") {
		switch el {
		case "":
			return "", fmt.Errorf("cpio path %q: empty element", p)
		case ".", "..":
			return "", fmt.Errorf("cpio path %q: %q element", p, el)
		}
	}
	return rel, nil
}

func (a *archive) add(e *cpioEntry) error {
	rel, err := cleanPath(e.path)
	if err != nil {
		return err
	}
	e.path = rel
	if a.entries == nil {
		a.entries = make(map[string]*cpioEntry)
	}
	if old, ok := a.entries[rel]; ok {
		// An implicit parent directory may be made explicit (to set its
		// mode); anything else added twice is a bug in the caller.
		if old.mode&^modePerm == modeDir && e.mode&^modePerm == modeDir {
			old.mode = e.mode
			return nil
		}
		return fmt.Errorf("cpio path %q: added twice", "/"+rel)
	}
	// Parents must be directories.
	for dir := parentDir(rel); dir != ""; dir = parentDir(dir) {
		if p, ok := a.entries[dir]; ok && p.mode&^modePerm != modeDir {
			return fmt.Errorf("cpio path %q: parent %q is not a directory", "/"+rel, "/"+dir)
		}
	}
	a.entries[rel] = e
	for dir := parentDir(rel); dir != ""; dir = parentDir(dir) {
		if _, ok := a.entries[dir]; ok {
			break
		}
		a.entries[dir] = &cpioEntry{path: dir, mode: modeDir | 0o755}
	}
	return nil
}

func parentDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ""
	}
	return p[:i]
}

// File adds a regular file with permission bits perm.
func (a *archive) File(path string, perm uint32, data []byte) error {
	return a.add(&cpioEntry{path: path, mode: modeReg | perm&modePerm, data: data})
}

// Dir adds a directory with permission bits perm.
func (a *archive) Dir(path string, perm uint32) error {
	return a.add(&cpioEntry{path: path, mode: modeDir | perm&modePerm})
}

// CharDev adds a character device node.
func (a *archive) CharDev(path string, perm, major, minor uint32) error {
	return a.add(&cpioEntry{path: path, mode: modeChar | perm&modePerm, major: major, minor: minor})
}

// Symlink adds a symbolic link to target.
func (a *archive) Symlink(path, target string) error {
	if target == "" || strings.IndexByte(target, 0) >= 0 || len(target)+1 > cpioMaxName {
		return fmt.Errorf("cpio symlink %q: bad target %q", path, target)
	}
	return a.add(&cpioEntry{path: path, mode: modeLink | 0o777, data: []byte(target)})
}

// WriteTo writes the archive, trailer included, to w.
func (a *archive) WriteTo(w io.Writer) (int64, error) {
	paths := make([]string, 0, len(a.entries))
	for p := range a.entries {
		paths = append(paths, p)
	}
	// A path sorts after each of its parents, which are its prefixes.
	sort.Strings(paths)
	cw := &countWriter{w: bufio.NewWriterSize(w, 1<<16)}
	for i, p := range paths {
		e := a.entries[p]
		nlink := uint32(1)
		if e.mode&^modePerm == modeDir {
			nlink = 2
		}
		writeNewc(cw, newcHeader{
			ino: uint32(i + 1), mode: e.mode, nlink: nlink,
			rdevMajor: e.major, rdevMinor: e.minor,
		}, p, e.data)
	}
	writeNewc(cw, newcHeader{nlink: 1}, "TRAILER!!!", nil)
	if cw.err == nil {
		cw.err = cw.w.(*bufio.Writer).Flush()
	}
	return cw.n, cw.err
}

type newcHeader struct {
	ino, mode, nlink     uint32
	rdevMajor, rdevMinor uint32
}

// writeNewc writes one newc record: the 110-byte header, the NUL-terminated
// name padded to a multiple of 4, and the data padded to a multiple of 4.
func writeNewc(w *countWriter, h newcHeader, name string, data []byte) {
	if len(data) > 0xffffffff {
		w.fail(fmt.Errorf("cpio %q: %d bytes is too large for newc", name, len(data)))
		return
	}
	fmt.Fprintf(w, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		h.ino, h.mode, 0, 0, h.nlink, 0, len(data),
		0, 0, h.rdevMajor, h.rdevMinor, len(name)+1, 0)
	io.WriteString(w, name)
	w.Write(zeros[:1+pad4(110+len(name)+1)])
	w.Write(data)
	w.Write(zeros[:pad4(len(data))])
}

var zeros [4]byte

func pad4(n int) int { return (4 - n%4) % 4 }

// countWriter counts bytes and keeps the first error, so that a record can
// be written without checking every call.
type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

func (c *countWriter) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}
