package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// fakeXattrs marks one directory opaque and gives one file a capability.
type fakeXattrs map[string]map[string]string

func (f fakeXattrs) List(p string) ([]string, error) {
	var out []string
	for k := range f[p] {
		out = append(out, k)
	}
	return out, nil
}

func (f fakeXattrs) Get(p, name string) ([]byte, error) {
	v, ok := f[p][name]
	if !ok {
		return nil, errors.New("no attribute")
	}
	return []byte(v), nil
}

func TestWriteLayer(t *testing.T) {
	up := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(up, "usr/bin"), 0o755))
	must(os.MkdirAll(filepath.Join(up, "opt/tool"), 0o755))
	must(os.WriteFile(filepath.Join(up, "usr/bin/go"), []byte("binary"), 0o755))
	must(os.Link(filepath.Join(up, "usr/bin/go"), filepath.Join(up, "usr/bin/go-again")))
	must(os.Symlink("go", filepath.Join(up, "usr/bin/golang")))
	must(os.WriteFile(filepath.Join(up, "opt/tool/new"), []byte("new"), 0o644))
	root := os.Getuid() == 0
	if root {
		// An overlay whiteout: a character device 0/0.
		must(syscall.Mknod(filepath.Join(up, "usr/bin/removed"), syscall.S_IFCHR|0o000, 0))
	}
	xr := fakeXattrs{
		filepath.Join(up, "opt/tool"):   {"trusted.overlay.opaque": "y"},
		filepath.Join(up, "usr/bin/go"): {"security.capability": "cap", "trusted.overlay.origin": "x"},
	}
	var buf bytes.Buffer
	if err := writeLayer(&buf, up, xr); err != nil {
		t.Fatal(err)
	}
	got := map[string]*tar.Header{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
	}
	for name, want := range map[string]byte{
		"usr/": tar.TypeDir, "usr/bin/": tar.TypeDir, "usr/bin/go": tar.TypeReg, "usr/bin/go-again": tar.TypeLink,
		"usr/bin/golang": tar.TypeSymlink, "opt/tool/": tar.TypeDir, "opt/tool/.wh..wh..opq": tar.TypeReg, "opt/tool/new": tar.TypeReg,
	} {
		h, ok := got[name]
		if !ok {
			t.Errorf("no %s in the layer; it has %v", name, keys(got))
			continue
		}
		if h.Typeflag != want {
			t.Errorf("%s: type %c, want %c", name, h.Typeflag, want)
		}
	}
	if h := got["usr/bin/go-again"]; h != nil && h.Linkname != "usr/bin/go" {
		t.Errorf("hard link to %q", h.Linkname)
	}
	if h := got["usr/bin/go"]; h != nil {
		if h.PAXRecords["SCHILY.xattr.security.capability"] != "cap" {
			t.Errorf("capability lost: %v", h.PAXRecords)
		}
		if _, ok := h.PAXRecords["SCHILY.xattr.trusted.overlay.origin"]; ok {
			t.Error("overlay's own attribute went into the layer")
		}
	}
	if root {
		if _, ok := got["usr/bin/.wh.removed"]; !ok {
			t.Errorf("the whiteout is not a .wh. entry: %v", keys(got))
		}
		if _, ok := got["usr/bin/removed"]; ok {
			t.Error("the whiteout device itself went into the layer")
		}
	}
}

func keys(m map[string]*tar.Header) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
