package launch

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/airlock-dev/airlock/vm"
)

func TestAttachSpec(t *testing.T) {
	spec := vm.Spec{Cmdline: "panic=-1 quiet"}
	args := attach(&spec, []Share{{Share: vm.Share{Tag: "workspace", HostPath: "/s/staging"}, Mount: "/workspace"}}, nil)
	want := vm.Spec{Cmdline: "panic=-1 quiet airlock.virtiofs=workspace:/workspace",
		Shares: []vm.Share{{Tag: "workspace", HostPath: "/s/staging"}}}
	if diff := cmp.Diff(want, spec, cmpopts.EquateEmpty()); diff != "" || len(args) != 0 {
		t.Errorf("spec (-want +got):\n%s; disk args %q", diff, args)
	}

	// Disks follow the spec's own: here the image's root disk is vda. The
	// mounts are returned, for the kernel command line or the first contact.
	spec = vm.Spec{Cmdline: "quiet", Disks: []vm.Disk{{Path: "/img/rootfs.img", ReadOnly: true}}}
	args = attach(&spec, nil, []Disk{{Path: "/s/disk.img", Mount: "/workspace"}})
	want = vm.Spec{Cmdline: "quiet",
		Disks: []vm.Disk{{Path: "/img/rootfs.img", ReadOnly: true}, {Path: "/s/disk.img", Format: "raw"}}}
	if diff := cmp.Diff(want, spec, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("spec with a disk (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"vdb:/workspace"}, args); diff != "" {
		t.Errorf("disk args (-want +got):\n%s", diff)
	}
}

func TestStale(t *testing.T) {
	base := WarmRecord{Version: warmVersion,
		Shape:  WarmShape{Image: "minimal", Arch: vm.AMD64, CPUs: 2, MemoryMiB: 2048, Cmdline: "quiet", DiskSizes: []int64{8 << 30}},
		Kernel: FileStamp{Path: "/img/vmlinux", Size: 10, ModTime: 1, SHA256: "k"},
		Initrd: FileStamp{Path: "/img/initrd", Size: 20, ModTime: 2, SHA256: "i"},
		Guest:  "g", Backend: "qemu", Hypervisor: "QEMU emulator version 7.2.19 (qemu-system-x86_64)", Accelerator: "tcg"}
	if r := Stale(&base, base); r != "" {
		t.Errorf("same record: stale because %q", r)
	}
	if r := Stale(nil, base); !strings.Contains(r, "no warm snapshot") {
		t.Errorf("no snapshot: %q", r)
	}
	// A snapshot of the previous format (QEMU's RAM in the state) is
	// stale: a cold boot replaces it.
	old := base
	old.Version = 1
	if r := Stale(&old, base); !strings.Contains(r, "format is 1") {
		t.Errorf("previous format: %q", r)
	}
	for _, tt := range []struct {
		name   string
		change func(*WarmRecord)
		want   string
	}{
		{"format", func(r *WarmRecord) { r.Version = 0 }, "format"},
		{"memory", func(r *WarmRecord) { r.Shape.MemoryMiB = 1024 }, "another machine"},
		{"cpus", func(r *WarmRecord) { r.Shape.CPUs = 1 }, "another machine"},
		{"disk size", func(r *WarmRecord) { r.Shape.DiskSizes = []int64{4 << 30} }, "another machine"},
		{"no disk", func(r *WarmRecord) { r.Shape.DiskSizes = nil }, "another machine"},
		{"cmdline", func(r *WarmRecord) { r.Shape.Cmdline = "quiet airlock.debug" }, "another machine"},
		{"kernel rewritten", func(r *WarmRecord) { r.Kernel.ModTime = 3 }, "kernel changed"},
		{"initrd grown", func(r *WarmRecord) { r.Initrd.Size = 21 }, "initrd changed"},
		{"image rebuilt", func(r *WarmRecord) { r.Initrd.SHA256 = "j" }, "initrd changed"},
		{"guest agent", func(r *WarmRecord) { r.Guest = "h" }, "guest agent changed"},
		{"qemu upgraded", func(r *WarmRecord) { r.Hypervisor = "QEMU emulator version 8.2.0 (qemu-system-x86_64)" }, "hypervisor changed"},
		{"kvm now", func(r *WarmRecord) { r.Accelerator = "kvm" }, "accelerator changed"},
		{"backend", func(r *WarmRecord) { r.Backend = "vz" }, "saved by"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := base
			now.Shape.DiskSizes = append([]int64(nil), base.Shape.DiskSizes...)
			tt.change(&now)
			if r := Stale(&base, now); !strings.Contains(r, tt.want) {
				t.Errorf("Stale = %q, want it to say %q", r, tt.want)
			}
		})
	}
}

func TestShapeKey(t *testing.T) {
	a := WarmShape{Image: "minimal", Arch: vm.AMD64, CPUs: 2, MemoryMiB: 2048}
	b := a
	b.DiskSizes = []int64{8 << 30}
	if a.key() == b.key() || a.key() != (WarmShape{Image: "minimal", Arch: vm.AMD64, CPUs: 2, MemoryMiB: 2048}).key() {
		t.Errorf("shape keys: %s %s", a.key(), b.key())
	}
	if s := b.String(); !strings.Contains(s, "8 GiB") || !strings.Contains(s, "2048 MiB") {
		t.Errorf("shape string %q", s)
	}
}
