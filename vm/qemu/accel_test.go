package qemu

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/vm"
)

func TestChooseAccel(t *testing.T) {
	denied := &fs.PathError{Op: "open", Path: "/dev/kvm", Err: fs.ErrPermission}
	tests := []struct {
		name     string
		override Accel
		facts    KVMFacts
		want     Choice
	}{
		{"intel", "", KVMFacts{GuestArch: vm.AMD64, HostArch: vm.AMD64, Modules: []string{"kvm_intel"}},
			Choice{Accel: KVM, Why: "kvm_intel driver"}},
		{"amd", "", KVMFacts{GuestArch: vm.AMD64, HostArch: vm.AMD64, Modules: []string{"kvm_amd"}},
			Choice{Accel: KVM, Why: "kvm_amd driver"}},
		{"no /dev/kvm", "", KVMFacts{GuestArch: vm.AMD64, HostArch: vm.AMD64, DevErr: &fs.PathError{Op: "open", Path: "/dev/kvm", Err: fs.ErrNotExist}},
			Choice{Accel: TCG, Why: "/dev/kvm: file does not exist"}},
		{"permission denied", "", KVMFacts{GuestArch: vm.AMD64, HostArch: vm.AMD64, DevErr: denied, Modules: []string{"kvm_intel"}},
			Choice{Accel: TCG, Why: "/dev/kvm: permission denied"}},
		{"pvm needs a probe", "", KVMFacts{GuestArch: vm.AMD64, HostArch: vm.AMD64, Modules: []string{"kvm_pvm"}},
			Choice{Accel: TCG, Why: "kvm_pvm driver", NeedProbe: true}},
		{"pvm probe passed", "", KVMFacts{GuestArch: vm.AMD64, HostArch: vm.AMD64, Modules: []string{"kvm_pvm"}, Probe: &ProbeResult{OK: true}},
			Choice{Accel: KVM, Why: "kvm_pvm driver, probe boot passed"}},
		{"pvm probe failed", "", KVMFacts{GuestArch: vm.AMD64, HostArch: vm.AMD64, Modules: []string{"kvm_pvm"}, Probe: &ProbeResult{Why: "no answer from the guest in time"}},
			Choice{Accel: TCG, Why: "kvm_pvm driver, probe boot failed: no answer from the guest in time"}},
		{"no module named", "", KVMFacts{GuestArch: vm.AMD64, HostArch: vm.AMD64},
			Choice{Accel: TCG, Why: "an unknown driver", NeedProbe: true}},
		{"arm64 host builtin", "", KVMFacts{GuestArch: vm.ARM64, HostArch: vm.ARM64},
			Choice{Accel: KVM, Why: "/dev/kvm usable"}},
		{"cross arch", "", KVMFacts{GuestArch: vm.ARM64, HostArch: vm.AMD64, Modules: []string{"kvm_intel"}},
			Choice{Accel: TCG, Why: "arm64 guests on amd64 hosts can only be emulated"}},
		{"forced tcg", TCG, KVMFacts{GuestArch: vm.AMD64, HostArch: vm.AMD64, Modules: []string{"kvm_intel"}},
			Choice{Accel: TCG, Why: "forced by configuration"}},
		{"forced kvm", KVM, KVMFacts{GuestArch: vm.AMD64, HostArch: vm.AMD64, Modules: []string{"kvm_pvm"}},
			Choice{Accel: KVM, Why: "forced by configuration"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ChooseAccel(tt.override, tt.facts)); diff != "" {
				t.Errorf("ChooseAccel (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTCGNotice(t *testing.T) {
	got := TCGNotice(ChooseAccel("", KVMFacts{GuestArch: vm.AMD64, HostArch: vm.AMD64, Modules: []string{"kvm_pvm"}, Probe: &ProbeResult{}}))
	want := "KVM is not usable here (kvm_pvm driver, probe boot failed); running under TCG, about 10x slower"
	if got != want {
		t.Errorf("notice\n got %q\nwant %q", got, want)
	}
}

func TestHostKVMFacts(t *testing.T) {
	root := t.TempDir()
	mkfile(t, filepath.Join(root, "dev/kvm"), "")
	os.MkdirAll(filepath.Join(root, "sys/module/kvm_pvm"), 0o755)
	os.MkdirAll(filepath.Join(root, "sys/module/kvm"), 0o755)
	f := hostKVMFacts(root, vm.AMD64, vm.AMD64)
	if f.DevErr != nil || !cmp.Equal(f.Modules, []string{"kvm_pvm"}) {
		t.Errorf("facts = %+v, want usable /dev/kvm and [kvm_pvm]", f)
	}
	if hostVsock(root) {
		t.Error("hostVsock: true without dev/vhost-vsock")
	}
	f = hostKVMFacts(t.TempDir(), vm.AMD64, vm.AMD64)
	if f.DevErr == nil {
		t.Error("no dev/kvm: DevErr is nil")
	}
}

// fakeQEMU writes a qemu-system-x86_64 that only prints a version.
func fakeQEMU(t *testing.T, version string) string {
	dir := t.TempDir()
	mkfile(t, filepath.Join(dir, "qemu-system-x86_64"), "#!/bin/sh\necho 'QEMU emulator version "+version+"'\n")
	os.Chmod(filepath.Join(dir, "qemu-system-x86_64"), 0o755)
	return dir
}

func mkfile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestProbeCache(t *testing.T) {
	root := t.TempDir()
	mkfile(t, filepath.Join(root, "dev/kvm"), "")
	os.MkdirAll(filepath.Join(root, "sys/module/kvm_pvm"), 0o755)
	kernel := filepath.Join(t.TempDir(), "vmlinux")
	mkfile(t, kernel, "kernel")
	qemuDir := fakeQEMU(t, "7.2.22")
	cache := t.TempDir()
	spec := vm.Spec{Arch: vm.AMD64, Kernel: kernel}

	probes := 0
	verdict := ProbeResult{Why: "no answer from the guest in time"}
	var notices []string
	newBackend := func() *Backend {
		b := New(Config{QEMUDir: qemuDir, CacheDir: cache,
			Probe: func(ctx context.Context, s vm.Spec) ProbeResult {
				probes++
				if _, ok := ctx.Deadline(); !ok {
					t.Error("probe context has no deadline")
				}
				return verdict
			},
			Notice: func(s string) { notices = append(notices, s) },
		})
		b.root = root
		return b
	}
	prog := filepath.Join(qemuDir, "qemu-system-x86_64")
	ctx := t.Context()

	b := newBackend()
	if c := b.accel(ctx, prog, spec); c.Accel != TCG || probes != 1 {
		t.Fatalf("first: %+v after %d probes, want TCG after 1", c, probes)
	}
	if c := newBackend().accel(ctx, prog, spec); c.Accel != TCG || probes != 1 {
		t.Fatalf("cached: %+v after %d probes, want TCG after 1", c, probes)
	}

	// A new guest kernel is probed again.
	verdict = ProbeResult{OK: true}
	later := time.Now().Add(time.Hour)
	os.Chtimes(kernel, later, later)
	if c := newBackend().accel(ctx, prog, spec); c.Accel != KVM || probes != 2 {
		t.Fatalf("new kernel: %+v after %d probes, want KVM after 2", c, probes)
	}
	// So is a new QEMU.
	verdict = ProbeResult{Why: "boom"}
	b2 := newBackend()
	b2.cfg.QEMUDir = fakeQEMU(t, "9.0.0")
	if c := b2.accel(ctx, filepath.Join(b2.cfg.QEMUDir, "qemu-system-x86_64"), spec); c.Accel != TCG || probes != 3 {
		t.Fatalf("new qemu: %+v after %d probes, want TCG after 3", c, probes)
	}

	// The override skips the probe.
	b3 := newBackend()
	b3.cfg.Accel = TCG
	if c := b3.accel(ctx, prog, spec); c.Accel != TCG || probes != 3 {
		t.Fatalf("override: %+v after %d probes", c, probes)
	}

	// Describe recalls the newest verdict for this QEMU and host kernel.
	r, err := newBackend().Describe(ctx, vm.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	if r.Accelerator != "kvm" || r.Hypervisor == "" || r.Link != vm.LinkSerial {
		t.Errorf("Describe = %+v", r)
	}

	// Notices are said once per backend.
	b.notice("x")
	b.notice("x")
	if !cmp.Equal(notices, []string{"x"}) {
		t.Errorf("notices = %q", notices)
	}
}

func TestValidate(t *testing.T) {
	b := New(Config{QEMUDir: t.TempDir()})
	b.root = t.TempDir()
	err := b.Validate(t.Context(), vm.Spec{Kernel: "/nonexistent/vmlinux", Initrd: "/nonexistent/initrd",
		StateDir: "/nonexistent/state", MemoryMiB: 10, Link: vm.Link{Kind: vm.LinkVsock, Port: 1}})
	if err == nil {
		t.Fatal("Validate: nil")
	}
	for _, want := range []string{"below the 64 MiB", "sudo apt-get install qemu-system-x86", "kernel:", "initrd:", "state dir:", "/dev/vhost-vsock"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error does not mention %q:\n%v", want, err)
		}
	}
	if !errors.Is(err, vm.ErrHypervisorMissing) || !errors.Is(err, vm.ErrNotSupported) {
		t.Errorf("Validate error is not ErrHypervisorMissing and ErrNotSupported: %v", err)
	}
}
