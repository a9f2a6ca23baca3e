package transfer

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
)

// validName checks a path inside a tree as manifest.ValidPath does,
// allowing elements inside .git when allowGit is set.
func validName(p string, allowGit bool) error {
	if !allowGit {
		return manifest.ValidPath(p)
	}
	elems := strings.Split(p, "/")
	for i, e := range elems {
		switch e {
		case "", ".", "..":
			return manifest.ValidPath(p) // reports the element
		}
		elems[i] = "x" + e // hides a .git element from the .git rule only
	}
	return manifest.ValidPath(strings.Join(elems, "/"))
}

// ExtractOptions configures Extract.
type ExtractOptions struct {
	// AllowGit accepts paths inside .git.
	AllowGit bool
}

// Extract reads a tar stream written by Push and recreates it under dir,
// which must be empty or absent. It is the guest's `untar` subcommand. It
// accepts only directories, regular files and symbolic links, with clean
// relative paths (see manifest.ValidPath), each parent a directory this
// stream created (so nothing is ever written through a symlink), no
// duplicates, and permission bits only (setuid, setgid and sticky are
// dropped). Directory modes are applied last, so read-only directories
// can be filled first.
func Extract(ctx context.Context, dir string, r io.Reader, opts ExtractOptions) (Stats, error) {
	var st Stats
	if err := ensureEmptyDir(dir); err != nil {
		return st, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return st, fmt.Errorf("untar %s: %w", dir, err)
	}
	defer root.Close()
	types := make(map[string]manifest.Type)
	type dirMode struct {
		name string
		mode fs.FileMode
	}
	var dirs []dirMode
	tr := tar.NewReader(r)
	buf := make([]byte, 256<<10)
	for {
		if err := ctx.Err(); err != nil {
			return st, fmt.Errorf("untar %s: %w", dir, err)
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, fmt.Errorf("untar %s: %w", dir, err)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if err := validName(name, opts.AllowGit); err != nil {
			return st, fmt.Errorf("untar %s: %w", dir, err)
		}
		if _, dup := types[name]; dup {
			return st, fmt.Errorf("untar %s: %s: duplicate entry", dir, name)
		}
		if parent := path.Dir(name); parent != "." && types[parent] != manifest.Dir {
			return st, fmt.Errorf("untar %s: %s: parent %s is not a directory of this stream", dir, name, parent)
		}
		mode := fs.FileMode(hdr.Mode) & fs.ModePerm
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.Mkdir(name, 0o700); err != nil {
				return st, fmt.Errorf("untar %s: %w", dir, err)
			}
			types[name] = manifest.Dir
			dirs = append(dirs, dirMode{name, mode})
			st.Dirs++
		case tar.TypeReg:
			n, err := extractFile(root, name, mode, tr, buf)
			if err != nil {
				return st, fmt.Errorf("untar %s: %s: %w", dir, name, err)
			}
			types[name] = manifest.File
			st.Files++
			st.Bytes += n
		case tar.TypeSymlink:
			if hdr.Linkname == "" || strings.IndexByte(hdr.Linkname, 0) >= 0 {
				return st, fmt.Errorf("untar %s: %s: bad link target %q", dir, name, hdr.Linkname)
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return st, fmt.Errorf("untar %s: %w", dir, err)
			}
			types[name] = manifest.Symlink
			st.Symlinks++
		default:
			return st, fmt.Errorf("untar %s: %s: tar type %q is not a file, directory or symlink", dir, name, hdr.Typeflag)
		}
	}
	for _, d := range slices.Backward(dirs) {
		if err := root.Chmod(d.name, d.mode); err != nil {
			return st, fmt.Errorf("untar %s: %w", dir, err)
		}
	}
	return st, nil
}

func extractFile(root *os.Root, name string, mode fs.FileMode, r io.Reader, buf []byte) (int64, error) {
	// O_EXCL: never opens what is already there, a symlink included.
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.CopyBuffer(onlyWriter{f}, r, buf)
	if err != nil {
		f.Close()
		return n, err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return n, err
	}
	return n, f.Close()
}

// onlyWriter hides ReadFrom so that CopyBuffer uses the buffer.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }

// ensureEmptyDir creates dir, or checks that it is an empty directory.
func ensureEmptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err != nil && err != io.EOF {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	if len(names) > 0 {
		return fmt.Errorf("write into %s: %w (holds %s)", dir, ErrNotEmpty, names[0])
	}
	return nil
}

// WriteFiles writes a tar stream of regular files under dir to w: the
// paths are read from names, NUL-separated, relative to dir. It is the
// guest's `tar` subcommand, which Pull runs. A path that is not a regular
// file (a symlink, a directory, a fifo) or that changes while it is read
// is an error: Pull asks only for files the guest's manifest listed.
func WriteFiles(ctx context.Context, dir string, names io.Reader, w io.Writer) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("tar %s: %w", dir, err)
	}
	defer root.Close()
	bw := bufio.NewWriterSize(w, 256<<10)
	tw := tar.NewWriter(bw)
	sc := bufio.NewScanner(names)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	sc.Split(splitNUL)
	buf := make([]byte, 256<<10)
	for sc.Scan() {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("tar %s: %w", dir, err)
		}
		name := sc.Text()
		if err := validName(name, true); err != nil {
			return fmt.Errorf("tar %s: %w", dir, err)
		}
		if err := writeFile(root, name, tw, buf); err != nil {
			return fmt.Errorf("tar %s: %s: %w", dir, name, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("tar %s: read names: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("tar %s: %w", dir, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("tar %s: %w", dir, err)
	}
	return nil
}

func writeFile(root *os.Root, name string, tw *tar.Writer, buf []byte) error {
	before, err := root.Lstat(name)
	if err != nil {
		return err
	}
	if !before.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", before.Mode().Type())
	}
	f, err := root.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !os.SameFile(before, info) {
		return errors.New("replaced while being read")
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(info.Mode().Perm()), Size: info.Size(), Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := io.CopyBuffer(onlyWriter{tw}, io.LimitReader(f, info.Size()), buf); err != nil {
		return err
	}
	return nil // a file that shrank fails in tw's next WriteHeader or Close
}

func splitNUL(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// writeTree writes the tar stream Push sends: every entry of m in order,
// file contents from store.
func writeTree(ctx context.Context, w io.Writer, m *manifest.Manifest, store *objects.Store, report func(n int64, file bool)) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	tw := tar.NewWriter(bw)
	buf := make([]byte, 256<<10)
	for _, e := range m.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr := &tar.Header{Name: e.Path, Mode: int64(e.Mode.Perm()), Format: tar.FormatPAX}
		switch e.Type {
		case manifest.Dir:
			hdr.Typeflag = tar.TypeDir
		case manifest.Symlink:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Target
		case manifest.File:
			hdr.Typeflag, hdr.Size = tar.TypeReg, e.Size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", e.Path, err)
		}
		if e.Type != manifest.File {
			report(0, false)
			continue
		}
		if err := copyObject(tw, store, e, buf); err != nil {
			return err
		}
		report(e.Size, true)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// copyObject copies the stored content of file e to w.
func copyObject(w io.Writer, store *objects.Store, e manifest.Entry, buf []byte) error {
	rc, err := store.Open(e.SHA256)
	if err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	defer rc.Close()
	n, err := io.CopyBuffer(onlyWriter{w}, io.LimitReader(rc, e.Size), buf)
	if err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	if n != e.Size {
		return fmt.Errorf("%s: stored object %s is %d bytes, manifest says %d: %w", e.Path, e.SHA256, n, e.Size, objects.ErrMismatch)
	}
	return nil
}
