package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/airlock-dev/airlock/guest"
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

// layer -zstd writes the same tar as layer, compressed with a window a
// decoder bounded to twice guest.LayerZstdWindow (the host's) accepts.
func TestLayerZstd(t *testing.T) {
	up := t.TempDir()
	for i := range 50 {
		// Files larger than the window, so the stream has many blocks.
		b := bytes.Repeat([]byte(fmt.Sprintf("file %d of the layer\n", i)), 40000)
		if err := os.WriteFile(filepath.Join(up, fmt.Sprint("f", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var plain, packed bytes.Buffer
	if err := layerTo(&plain, []string{up}); err != nil {
		t.Fatal(err)
	}
	if err := layerTo(&packed, []string{"-zstd", up}); err != nil {
		t.Fatal(err)
	}
	dec, err := zstd.NewReader(&packed, zstd.WithDecoderMaxWindow(2*guest.LayerZstdWindow), zstd.WithDecoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	got, err := io.ReadAll(dec)
	if err != nil {
		t.Fatal(err)
	}
	// The same entries and contents (reading a file in the first run
	// moves its access time, which the second one records).
	if a, b := tarEntries(t, got), tarEntries(t, plain.Bytes()); a != b {
		t.Errorf("layer -zstd decompresses to\n%s\nlayer writes\n%s", a, b)
	}
	if packed.Len() == 0 || packed.Len() > plain.Len()/10 {
		t.Errorf("compressed %d bytes to %d", plain.Len(), packed.Len())
	}
	if err := layerTo(io.Discard, []string{"-zstd", "relative"}); err == nil {
		t.Error("layer -zstd took a relative directory")
	}
}

// tarEntries lists a tar's entries: name, type, mode, size and contents.
func tarEntries(t *testing.T, b []byte) string {
	t.Helper()
	var out strings.Builder
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "%s %c %o %d %x\n", h.Name, h.Typeflag, h.Mode, h.Size, sha256.Sum256(data))
	}
}
