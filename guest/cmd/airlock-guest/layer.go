package main

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// layerCommand writes to stdout the OCI layer (an uncompressed tar) of the
// overlay upper directory dir: what a provisioning step changed. Overlay
// whiteouts (character devices 0/0) become .wh.NAME entries and opaque
// directories (trusted.overlay.opaque=y) get a .wh..wh..opq entry; hard
// links within the layer stay links; extended attributes other than
// overlay's own go along as PAX records.
func layerCommand(args []string) error {
	if len(args) != 1 || !filepath.IsAbs(args[0]) {
		return errors.New("usage: airlock-guest layer UPPERDIR (absolute)")
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	if err := writeLayer(w, args[0], osXattrs{}); err != nil {
		return err
	}
	return w.Flush()
}

// xattrReader reads a file's extended attributes without following a
// link.
type xattrReader interface {
	List(path string) ([]string, error)
	Get(path, name string) ([]byte, error)
}

func writeLayer(w io.Writer, root string, xr xattrReader) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{} // (dev, inode) → first name
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		name := filepath.ToSlash(rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if fi.Mode()&fs.ModeCharDevice != 0 && st != nil && st.Rdev == 0 {
			return writeEmpty(tw, path.Join(path.Dir(name), ".wh."+path.Base(name)), fi)
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		h.Name = name
		h.Format = tar.FormatPAX
		h.Uname, h.Gname = "", ""
		if st != nil {
			h.Uid, h.Gid = int(st.Uid), int(st.Gid)
		}
		if fi.IsDir() {
			h.Name += "/"
		}
		if fi.Mode().IsRegular() && st != nil && st.Nlink > 1 {
			key := [2]uint64{uint64(st.Dev), st.Ino}
			if first, ok := links[key]; ok {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
			} else {
				links[key] = name
			}
		}
		opaque := false
		names, _ := xr.List(p)
		for _, x := range names {
			v, err := xr.Get(p, x)
			if err != nil {
				continue
			}
			if x == "trusted.overlay.opaque" {
				opaque = fi.IsDir() && string(v) == "y"
				continue
			}
			if strings.HasPrefix(x, "trusted.overlay.") {
				continue
			}
			if h.PAXRecords == nil {
				h.PAXRecords = map[string]string{}
			}
			h.PAXRecords["SCHILY.xattr."+x] = string(v)
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if h.Typeflag == tar.TypeReg && h.Size > 0 {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.CopyN(tw, f, h.Size)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		if opaque {
			return writeEmpty(tw, name+"/.wh..wh..opq", fi)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// writeEmpty writes an empty regular file name, a whiteout marker.
func writeEmpty(tw *tar.Writer, name string, fi fs.FileInfo) error {
	return tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, ModTime: fi.ModTime(), Format: tar.FormatPAX})
}
