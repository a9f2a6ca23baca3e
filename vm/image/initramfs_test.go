package image

import (
	"bytes"
	"debug/elf"
	"io"
	"strings"
	"testing"

	"github.com/cavaliergopher/cpio"
	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/vm"
)

func testContents(t *testing.T) initramfsContents {
	return initramfsContents{
		guest:   []byte("guest agent binary"),
		busybox: []byte("busybox binary!\x00[\x00[[\x00sh\x00\x00"),
		modules: []moduleFile{
			{name: "virtio_ring", data: testModule(t, "name=virtio_ring")},
			{name: "virtio", data: testModule(t, "name=virtio", "depends=virtio_ring")},
			{name: "virtio_blk", data: testModule(t, "name=virtio_blk", "depends=virtio,virtio_ring")},
		},
		// Docker's list shares a module with the boot list: its file is
		// written once, and both lists name it.
		docker: []moduleFile{
			{name: "virtio_ring", data: testModule(t, "name=virtio_ring")},
			{name: "bridge", data: testModule(t, "name=bridge", "depends=virtio_ring")},
		},
	}
}

func TestInitramfsReproducible(t *testing.T) {
	var a, b bytes.Buffer
	if _, err := writeInitramfs(&a, testContents(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := writeInitramfs(&b, testContents(t)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two initramfs builds from the same inputs differ")
	}
	c := testContents(t)
	c.busybox = []byte("another busybox")
	var d bytes.Buffer
	if _, err := writeInitramfs(&d, c); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Bytes(), d.Bytes()) {
		t.Fatal("different inputs gave the same initramfs")
	}
}

// entry is what a test checks about one initramfs record.
type entry struct {
	Mode uint32
	Data string
	Rdev [2]uint32
}

func TestInitramfsContents(t *testing.T) {
	c := testContents(t)
	var buf bytes.Buffer
	if _, err := writeInitramfs(&buf, c); err != nil {
		t.Fatal(err)
	}
	got := map[string]entry{}
	var order []string
	for _, r := range parseNewc(t, buf.Bytes()) {
		if r.UID != 0 || r.GID != 0 || r.Mtime != 0 || r.DevMajor != 0 || r.DevMinor != 0 || r.Check != 0 {
			t.Errorf("%s: owner %d:%d mtime %d dev %d,%d check %d; want all 0", r.Name, r.UID, r.GID, r.Mtime, r.DevMajor, r.DevMinor, r.Check)
		}
		if r.Ino != uint32(len(order)+1) {
			t.Errorf("%s: inode %d, want %d", r.Name, r.Ino, len(order)+1)
		}
		got[r.Name] = entry{Mode: r.Mode, Data: r.Data, Rdev: [2]uint32{r.RdevMajor, r.RdevMinor}}
		order = append(order, r.Name)
	}
	dir := func(perm uint32) entry { return entry{Mode: modeDir | perm} }
	file := func(perm uint32, data string) entry { return entry{Mode: modeReg | perm, Data: data} }
	want := map[string]entry{
		"bin":                                dir(0o755),
		"bin/busybox":                        file(0o755, "busybox binary!\x00[\x00[[\x00sh\x00\x00"),
		"bin/[":                              {Mode: modeLink | 0o777, Data: "busybox"},
		"bin/[[":                             {Mode: modeLink | 0o777, Data: "busybox"},
		"bin/sh":                             {Mode: modeLink | 0o777, Data: "busybox"},
		"usr/bin/env":                        {Mode: modeLink | 0o777, Data: "/bin/busybox"},
		"dev":                                dir(0o755),
		"dev/console":                        {Mode: modeChar | 0o600, Rdev: [2]uint32{5, 1}},
		"dev/pts":                            dir(0o755),
		"etc":                                dir(0o755),
		"etc/group":                          file(0o644, "root:x:0:\n"),
		"etc/hostname":                       file(0o644, "airlock\n"),
		"etc/passwd":                         file(0o644, "root:x:0:0:root:/root:/bin/sh\n"),
		"init":                               file(0o755, "guest agent binary"),
		"lib":                                dir(0o755),
		"lib/modules":                        dir(0o755),
		"lib/modules/airlock":                dir(0o755),
		"lib/modules/airlock/modules.order":  file(0o644, "/lib/modules/airlock/virtio_ring.ko\n/lib/modules/airlock/virtio.ko\n/lib/modules/airlock/virtio_blk.ko\n"),
		"lib/modules/airlock/docker.order":   file(0o644, "/lib/modules/airlock/virtio_ring.ko\n/lib/modules/airlock/bridge.ko\n"),
		"lib/modules/airlock/bridge.ko":      file(0o644, string(c.docker[1].data)),
		"lib/modules/airlock/virtio.ko":      file(0o644, string(c.modules[1].data)),
		"lib/modules/airlock/virtio_blk.ko":  file(0o644, string(c.modules[2].data)),
		"lib/modules/airlock/virtio_ring.ko": file(0o644, string(c.modules[0].data)),
		"proc":                               dir(0o555),
		"root":                               dir(0o700),
		"run":                                dir(0o755),
		"sbin":                               dir(0o755),
		"sys":                                dir(0o555),
		"tmp":                                dir(0o1777),
		"usr":                                dir(0o755),
		"usr/bin":                            dir(0o755),
		"usr/sbin":                           dir(0o755),
		"workspace":                          dir(0o755),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("initramfs (-want +got):\n%s", diff)
	}
	// Every record's parent directory has a record before it.
	seen := map[string]bool{}
	for _, name := range order {
		if p := parentDir(name); p != "" && !seen[p] {
			t.Errorf("%s comes before (or without) its parent %s", name, p)
		}
		seen[name] = true
	}

	// cavaliergopher/cpio reads it the same way.
	r := cpio.NewReader(bytes.NewReader(buf.Bytes()))
	n := 0
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		w, ok := want[h.Name]
		if !ok {
			t.Errorf("unexpected %s", h.Name)
			continue
		}
		if uint32(h.Mode) != w.Mode {
			t.Errorf("%s: mode %o, want %o", h.Name, h.Mode, w.Mode)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if h.Linkname != "" { // the reader takes a link's target as its name
			data = []byte(h.Linkname)
		}
		if string(data) != w.Data {
			t.Errorf("%s: %d bytes, want %d", h.Name, len(data), len(w.Data))
		}
	}
	if n != len(want) {
		t.Errorf("cavaliergopher/cpio read %d entries, want %d", n, len(want))
	}
}

func TestCheckStaticELF(t *testing.T) {
	tests := []struct {
		name    string
		arch    vm.Arch
		b       []byte
		wantErr string
	}{
		{"amd64", vm.AMD64, staticExe(t, elf.EM_X86_64), ""},
		{"arm64", vm.ARM64, staticExe(t, elf.EM_AARCH64), ""},
		{"wrong arch", vm.ARM64, staticExe(t, elf.EM_X86_64), "GOARCH=arm64"},
		{"dynamic", vm.AMD64, testELF{typ: elf.ET_DYN, machine: elf.EM_X86_64, interp: "/lib64/ld-linux-x86-64.so.2"}.bytes(t), "dynamically linked (needs /lib64/ld-linux-x86-64.so.2)"},
		{"object", vm.AMD64, testModule(t, "name=x"), "not an executable"},
		{"script", vm.AMD64, []byte("#!/bin/sh\n"), "not a Linux executable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkStaticELF("guest", tt.arch, tt.b)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestBusyboxApplets(t *testing.T) {
	bin := []byte("\x7fELF junk\x00[\x00[[\x00acpid\x00ash\x00busybox\x00sh\x00../x\x00a/b\x00\x00more junk")
	got := busyboxApplets(bin)
	want := []string{"[", "[[", "acpid", "ash", "sh"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("applets (-want +got):\n%s", diff)
	}
	if got := busyboxApplets([]byte("no table here")); got != nil {
		t.Errorf("applets of a binary without a table = %v, want none", got)
	}
}
