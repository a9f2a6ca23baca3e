package image

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/cavaliergopher/cpio"
	"github.com/google/go-cmp/cmp"
)

// newcRecord is one record of a newc archive, every header field decoded.
type newcRecord struct {
	Name                 string
	Ino, Mode, UID, GID  uint32
	Nlink, Mtime         uint32
	DevMajor, DevMinor   uint32
	RdevMajor, RdevMinor uint32
	Check                uint32
	Data                 string
}

// parseNewc decodes a newc archive independently of the writer, checking
// alignment and the trailer, and returns its records without the trailer.
func parseNewc(t testing.TB, b []byte) []newcRecord {
	t.Helper()
	var recs []newcRecord
	off := 0
	for {
		if off+110 > len(b) {
			t.Fatalf("archive ends at %d without a trailer", off)
		}
		h := b[off : off+110]
		if string(h[:6]) != "070701" {
			t.Fatalf("bad magic %q at %d", h[:6], off)
		}
		var f [13]uint32
		for i := range f {
			v, err := strconv.ParseUint(string(h[6+8*i:14+8*i]), 16, 32)
			if err != nil {
				t.Fatalf("header field %d at %d: %v", i, off, err)
			}
			f[i] = uint32(v)
		}
		namesize, size := int(f[11]), int(f[6])
		nameEnd := off + 110 + namesize
		if nameEnd > len(b) || b[nameEnd-1] != 0 {
			t.Fatalf("name at %d is not NUL-terminated", off)
		}
		name := string(b[off+110 : nameEnd-1])
		dataOff := nameEnd + pad4(110+namesize)
		if dataOff%4 != 0 {
			t.Fatalf("%s: data at unaligned offset %d", name, dataOff)
		}
		for _, z := range b[nameEnd:dataOff] {
			if z != 0 {
				t.Fatalf("%s: non-zero name padding", name)
			}
		}
		if name == "TRAILER!!!" {
			if dataOff != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-dataOff)
			}
			return recs
		}
		r := newcRecord{
			Name: name, Ino: f[0], Mode: f[1], UID: f[2], GID: f[3], Nlink: f[4], Mtime: f[5],
			DevMajor: f[7], DevMinor: f[8], RdevMajor: f[9], RdevMinor: f[10], Check: f[12],
			Data: string(b[dataOff : dataOff+size]),
		}
		recs = append(recs, r)
		off = dataOff + size + pad4(size)
	}
}

func TestArchive(t *testing.T) {
	var a archive
	for _, err := range []error{
		a.File("/usr/local/bin/tool", 0o755, []byte("#!/bin/sh\n")),
		a.File("etc/motd", 0o644, []byte("hello")),
		a.Dir("/tmp", 0o1777),
		a.Dir("/usr", 0o700), // an implicit parent made explicit
		a.CharDev("/dev/console", 0o600, 5, 1),
		a.Symlink("/bin/sh", "busybox"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	n, err := a.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Errorf("WriteTo says %d bytes, wrote %d", n, buf.Len())
	}
	got := parseNewc(t, buf.Bytes())
	want := []newcRecord{
		{Name: "bin", Mode: modeDir | 0o755, Nlink: 2},
		{Name: "bin/sh", Mode: modeLink | 0o777, Nlink: 1, Data: "busybox"},
		{Name: "dev", Mode: modeDir | 0o755, Nlink: 2},
		{Name: "dev/console", Mode: modeChar | 0o600, Nlink: 1, RdevMajor: 5, RdevMinor: 1},
		{Name: "etc", Mode: modeDir | 0o755, Nlink: 2},
		{Name: "etc/motd", Mode: modeReg | 0o644, Nlink: 1, Data: "hello"},
		{Name: "tmp", Mode: modeDir | 0o1777, Nlink: 2},
		{Name: "usr", Mode: modeDir | 0o700, Nlink: 2},
		{Name: "usr/local", Mode: modeDir | 0o755, Nlink: 2},
		{Name: "usr/local/bin", Mode: modeDir | 0o755, Nlink: 2},
		{Name: "usr/local/bin/tool", Mode: modeReg | 0o755, Nlink: 1, Data: "#!/bin/sh\n"},
	}
	for i := range want {
		want[i].Ino = uint32(i + 1)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}

	// A second reader agrees.
	r := cpio.NewReader(bytes.NewReader(buf.Bytes()))
	var names []string
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if len(names) != len(want) {
		t.Errorf("cavaliergopher/cpio reads %d entries, want %d: %v", len(names), len(want), names)
	}
}

func TestArchiveConflicts(t *testing.T) {
	tests := []struct {
		name string
		add  func(a *archive) error
		want string
	}{
		{"file twice", func(a *archive) error {
			a.File("/a", 0o644, nil)
			return a.File("/a", 0o644, nil)
		}, "added twice"},
		{"file under a file", func(a *archive) error {
			a.File("/a", 0o644, nil)
			return a.File("/a/b", 0o644, nil)
		}, "not a directory"},
		{"file over an implicit dir", func(a *archive) error {
			a.File("/a/b", 0o644, nil)
			return a.File("/a", 0o644, nil)
		}, "added twice"},
		{"bad symlink target", func(a *archive) error { return a.Symlink("/a", "") }, "bad target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a archive
			if err := tt.add(&a); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCleanPath(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"/init", "init", true},
		{"init", "init", true},
		{"/lib/modules/airlock/virtio.ko", "lib/modules/airlock/virtio.ko", true},
		{"a b/c-d_e.f", "a b/c-d_e.f", true},
		{"", "", false},
		{"/", "", false},
		{"//etc", "", false},
		{"/etc/", "", false},
		{"a//b", "", false},
		{".", "", false},
		{"/./etc", "", false},
		{"..", "", false},
		{"/etc/../../x", "", false},
		{"a/..", "", false},
		{"a\x00b", "", false},
		{strings.Repeat("a", 4095), strings.Repeat("a", 4095), true},
		{strings.Repeat("a", 4096), "", false},
	}
	for _, tt := range tests {
		got, err := cleanPath(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("cleanPath(%.20q) = %q, %v; want %q, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// FuzzArchivePath adds arbitrary paths to an archive: a path is either
// rejected, or the archive holds it and every parent, reads back, and no
// name in it can climb out of the root.
func FuzzArchivePath(f *testing.F) {
	for _, s := range []string{"/init", "a/b/c", "../x", "/a/./b", "a\x00", "", "//", "a/b/", "\xff/\xfe"} {
		f.Add(s, "x/y")
	}
	f.Fuzz(func(t *testing.T, p1, p2 string) {
		var a archive
		var added []string
		for _, p := range []string{p1, p2} {
			if err := a.File(p, 0o644, []byte(p)); err == nil {
				added = append(added, strings.TrimPrefix(p, "/"))
			}
		}
		var buf bytes.Buffer
		if _, err := a.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		recs := parseNewc(t, buf.Bytes())
		have := map[string]newcRecord{}
		for i, r := range recs {
			if i > 0 && recs[i-1].Name >= r.Name {
				t.Fatalf("records out of order: %q then %q", recs[i-1].Name, r.Name)
			}
			for _, el := range strings.Split(r.Name, "/") {
				if el == "" || el == "." || el == ".." {
					t.Fatalf("record name %q has a %q element", r.Name, el)
				}
			}
			if strings.ContainsRune(r.Name, 0) {
				t.Fatalf("record name %q has a NUL", r.Name)
			}
			if dir := parentDir(r.Name); dir != "" {
				pr, ok := have[dir]
				if !ok || pr.Mode&^modePerm != modeDir {
					t.Fatalf("%q has no directory record for its parent %q before it", r.Name, dir)
				}
			}
			have[r.Name] = r
		}
		for _, p := range added {
			if r, ok := have[p]; !ok || r.Data != "/"+p && r.Data != p {
				t.Fatalf("added %q, archive has %+v", p, r)
			}
		}
		rd := cpio.NewReader(bytes.NewReader(buf.Bytes()))
		for {
			if _, err := rd.Next(); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("cavaliergopher/cpio: %v", err)
			}
		}
	})
}
