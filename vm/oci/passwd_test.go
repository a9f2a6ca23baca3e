package oci

import (
	"archive/tar"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlock-dev/airlock/testkit/ocitest"
	"github.com/airlock-dev/airlock/vm"
)

func TestParsePasswd(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		want map[string][2]int
	}{
		{"debian", "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\nagent:x:1000:1000::/home/agent:/bin/bash\n",
			map[string][2]int{"root": {0, 0}, "daemon": {1, 1}, "agent": {1000, 1000}}},
		{"empty", "", nil},
		{"no newline at the end: the last line may be cut short", "agent:x:1000:1000::/home/agent:/bin/bash\nbob:x:10", map[string][2]int{"agent": {1000, 1000}}},
		{"hostile lines", strings.Join([]string{
			"too:few:fields",
			"noid:x::1::/:/bin/sh",
			"neg:x:-1:1::/:/bin/sh",
			"plus:x:+5:1::/:/bin/sh",
			"hex:x:0x10:1::/:/bin/sh",
			"space:x: 5:1::/:/bin/sh",
			"big:x:2147483648:1::/:/bin/sh",
			"huge:x:99999999999999999999:1::/:/bin/sh",
			"biggid:x:1:4294967295::/:/bin/sh",
			"Upper:x:1:1::/:/bin/sh",
			"has space:x:1:1::/:/bin/sh",
			"../etc:x:1:1::/:/bin/sh",
			"-dash:x:1:1::/:/bin/sh",
			"1digit:x:1:1::/:/bin/sh",
			"+nis:x:1:1::/:/bin/sh",
			"#comment:x:1:1::/:/bin/sh",
			strings.Repeat("a", 33) + ":x:1:1::/:/bin/sh",
			"ünï:x:1:1::/:/bin/sh",
			"nul\x00:x:1:1::/:/bin/sh",
			"",
			":x:1:1::/:/bin/sh",
			"max:x:2147483647:2147483647::/:/bin/sh",
			"dup:x:5:6::/:/bin/sh",
			"dup:x:7:8::/:/bin/sh",
			"_apt:x:42:65534::/nonexistent:/usr/sbin/nologin",
			"crlf:x:9:9::/:/bin/sh\r",
		}, "\n") + "\n", map[string][2]int{"max": {2147483647, 2147483647}, "dup": {5, 6}, "_apt": {42, 65534}, "crlf": {9, 9}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, ParsePasswd([]byte(c.in))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// At most maxUsers accounts, however long the file.
	var b strings.Builder
	for i := range maxUsers + 100 {
		fmt.Fprintf(&b, "u%d:x:%d:%d::/:/bin/sh\n", i, i, i)
	}
	if got := ParsePasswd([]byte(b.String())); len(got) != maxUsers {
		t.Errorf("%d accounts, want at most %d", len(got), maxUsers)
	}
}

// TestWriteRootfsReadsPasswd: the accounts come from the etc/passwd the
// flattened image ends up with (the top layer's), read within bounds.
func TestWriteRootfsReadsPasswd(t *testing.T) {
	long := "agent:x:1000:1001::/home/agent:/bin/bash\n" + strings.Repeat("#", maxPasswd) + "\nlate:x:5:5::/:/bin/sh\n"
	for _, c := range []struct {
		name   string
		layers [][]ocitest.Entry
		want   map[string][2]int
	}{
		{"top layer wins", [][]ocitest.Entry{
			{{Name: "etc/", Type: tar.TypeDir}, {Name: "etc/passwd", Body: "root:x:0:0::/root:/bin/sh\nold:x:1:1::/:/bin/sh\n"}},
			{{Name: "./etc/passwd", Body: "root:x:0:0::/root:/bin/sh\nagent:x:1000:1001::/home/agent:/bin/bash\n"}},
		}, map[string][2]int{"root": {0, 0}, "agent": {1000, 1001}}},
		{"whited out", [][]ocitest.Entry{
			{{Name: "etc/", Type: tar.TypeDir}, {Name: "etc/passwd", Body: "old:x:1:1::/:/bin/sh\n"}},
			{{Name: "etc/.wh.passwd"}},
		}, nil},
		{"a symlink is not followed", [][]ocitest.Entry{
			{{Name: "etc/", Type: tar.TypeDir}, {Name: "etc/real", Body: "old:x:1:1::/:/bin/sh\n"}, {Name: "etc/passwd", Type: tar.TypeSymlink, Linkname: "real"}},
		}, nil},
		{"only the first MiB is read", [][]ocitest.Entry{
			{{Name: "etc/", Type: tar.TypeDir}, {Name: "etc/passwd", Body: long}},
		}, map[string][2]int{"agent": {1000, 1001}}},
		{"elsewhere", [][]ocitest.Entry{
			{{Name: "home/", Type: tar.TypeDir}, {Name: "home/etc/", Type: tar.TypeDir}, {Name: "home/etc/passwd", Body: "x:x:1:1::/:/bin/sh\n"}},
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := ocitest.NewRegistry(t)
			var layers []v1.Layer
			for _, l := range c.layers {
				layers = append(layers, ocitest.Layer(t, l...))
			}
			ref := reg.Push(t, "team/users:1", ocitest.Image(t, "amd64", nil, layers...))
			s := Store{Dir: t.TempDir()}
			im, err := s.Pull(context.Background(), ref, PullOptions{Arch: vm.AMD64, Insecure: true})
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "lower.img")
			res, err := s.WriteRootfs(context.Background(), im, dst)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, res.Users); diff != "" {
				t.Errorf("users (-want +got):\n%s", diff)
			}
			if c.name == "only the first MiB is read" {
				// The file itself is written whole.
				if got := debugfs(t, dst, "cat /etc/passwd"); got != long {
					t.Errorf("etc/passwd on the disk is %d bytes, want %d", len(got), len(long))
				}
			}
		})
	}
}
