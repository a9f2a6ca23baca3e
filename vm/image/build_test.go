package image

import (
	"bytes"
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/vm"
)

func TestBuildOptionsValidation(t *testing.T) {
	_, err := Build(context.Background(), BuildOptions{Name: "../x", Arch: "riscv64"})
	for _, want := range []string{"no home directory", "image name", "unknown arch", "no guest binary"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
}

// fakeDebian is a fake apt serving a cloud kernel package (a bzImage with
// an LZ4 payload and the modules of cloudTree) and busybox-static.
func fakeDebian(t *testing.T) *fakeApt {
	vmlinux := pvhVmlinux(t)
	ktree := map[string][]byte{
		"boot/vmlinuz-6.1.0-99-cloud-amd64": fakeBzImage(27, lz4Legacy(t, vmlinux), len(vmlinux)),
	}
	for p, f := range cloudTree(t) {
		ktree[p] = f.Data
	}
	return &fakeApt{native: "amd64", pkgs: map[string]fakePkg{
		"linux-image-cloud-amd64":          {version: "6.1.999-1", depends: "linux-image-6.1.0-99-cloud-amd64 (= 6.1.999-1)", deb: []byte("meta deb")},
		"linux-image-6.1.0-99-cloud-amd64": {version: "6.1.999-1", deb: []byte("kernel deb"), tree: ktree},
		"busybox-static":                   {version: "1:1.35.0-4", deb: []byte("busybox deb"), tree: map[string][]byte{"bin/busybox": staticExe(t, elf.EM_X86_64)}},
	}}
}

func TestBuildFake(t *testing.T) {
	f := fakeDebian(t)
	home := t.TempDir()
	guest := filepath.Join(t.TempDir(), "airlock-guest")
	os.WriteFile(guest, staticExe(t, elf.EM_X86_64), 0o755)
	var steps []Step
	opts := BuildOptions{Home: home, Arch: vm.AMD64, GuestBinary: guest, Progress: func(p Progress) {
		if len(steps) == 0 || steps[len(steps)-1] != p.Step {
			steps = append(steps, p.Step)
		}
	}}
	build := func() *Image {
		t.Helper()
		b, err := newBuilder(opts)
		if err != nil {
			t.Fatal(err)
		}
		f.install(b.apt)
		im, err := b.build(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return im
	}
	im := build()
	wantSteps := []Step{StepCheck, StepResolve, StepDownload, StepExtract, StepKernel, StepModules, StepInitramfs, StepInstall, StepDone}
	if diff := cmp.Diff(wantSteps, steps); diff != "" {
		t.Errorf("progress steps (-want +got):\n%s", diff)
	}
	if im.Dir != filepath.Join(home, "images", "minimal", "amd64") || im.Cmdline != DefaultCmdline {
		t.Errorf("image %+v", im)
	}
	if k, _ := os.ReadFile(im.Kernel); !bytes.Equal(k, pvhVmlinux(t)) {
		t.Error("kernel is not the vmlinux from the bzImage")
	}
	m := im.Meta
	if m.Kernel.Package != "linux-image-6.1.0-99-cloud-amd64" || m.Kernel.Version != "6.1.999-1" ||
		m.Kernel.Release != "6.1.0-99-cloud-amd64" || m.Kernel.Format != FormatVmlinuxPVH ||
		m.Kernel.MetaPackage != "linux-image-cloud-amd64 6.1.999-1" || m.Busybox.Version != "1:1.35.0-4" {
		t.Errorf("meta %+v", m)
	}
	if !slices.Equal(m.MissingModules[:2], []string{"9pnet_virtio", "9p"}) || len(m.Modules) != 19 {
		t.Errorf("modules %v missing %v", m.Modules, m.MissingModules)
	}
	// Docker's modules this kernel has, with their dependencies, are in
	// the initramfs to load later; those it lacks are named as missing.
	if !slices.Equal(m.DockerModules, []string{"llc", "stp", "bridge", "veth", "br_netfilter"}) ||
		!slices.Contains(m.MissingModules, "nf_tables") || slices.Contains(m.MissingModules, "bridge") {
		t.Errorf("Docker's modules %v, missing %v", m.DockerModules, m.MissingModules)
	}
	if err := im.Verify(); err != nil {
		t.Error(err)
	}
	if st, err := os.Stat(im.Dir); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("image dir: %v, %v; want mode 0755", st.Mode(), err)
	}
	first, _ := os.ReadFile(im.Initrd)

	// A second build uses the cache, replaces the first image and makes the
	// same initramfs.
	f.downloads = nil
	im2 := build()
	if len(f.downloads) != 0 {
		t.Errorf("second build downloaded %v", f.downloads)
	}
	second, _ := os.ReadFile(im2.Initrd)
	if !bytes.Equal(first, second) {
		t.Error("two builds from the same inputs made different initramfs files")
	}
	left, _ := os.ReadDir(filepath.Join(home, "images", "minimal"))
	if len(left) != 1 {
		t.Errorf("images/minimal holds %v, want only amd64", left)
	}
}

func TestBuildFailureKeepsOldImage(t *testing.T) {
	f := fakeDebian(t)
	home := t.TempDir()
	old := writeTestImage(t, home, "minimal", vm.AMD64)
	guest := filepath.Join(t.TempDir(), "airlock-guest")
	os.WriteFile(guest, staticExe(t, elf.EM_X86_64), 0o755)
	// A kernel without PVH fails the build after everything was unpacked.
	p := f.pkgs["linux-image-6.1.0-99-cloud-amd64"]
	noPVH := testELF{typ: elf.ET_EXEC, machine: elf.EM_X86_64}.bytes(t)
	p.tree["boot/vmlinuz-6.1.0-99-cloud-amd64"] = fakeBzImage(27, gzipped(t, noPVH), len(noPVH))
	b, err := newBuilder(BuildOptions{Home: home, Arch: vm.AMD64, GuestBinary: guest})
	if err != nil {
		t.Fatal(err)
	}
	f.install(b.apt)
	_, err = b.build(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no PVH entry point") || !strings.Contains(err.Error(), "build image minimal/amd64") {
		t.Fatalf("error %v", err)
	}
	got, err := Load(home, "minimal", vm.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(old, got); diff != "" {
		t.Errorf("old image changed (-old +now):\n%s", diff)
	}
	left, _ := os.ReadDir(filepath.Join(home, "images", "minimal"))
	if len(left) != 1 {
		t.Errorf("a failed build left %v behind", left)
	}
}

func TestBuildRejectsDynamicGuest(t *testing.T) {
	guest := filepath.Join(t.TempDir(), "airlock-guest")
	os.WriteFile(guest, testELF{typ: elf.ET_DYN, machine: elf.EM_X86_64, interp: "/lib64/ld-linux-x86-64.so.2"}.bytes(t), 0o755)
	_, err := Build(context.Background(), BuildOptions{Home: t.TempDir(), Arch: vm.AMD64, GuestBinary: guest})
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("error %v", err)
	}
}

// TestBuildDebian builds the minimal image from real Debian packages with
// the host's apt: the amd64 image always, the arm64 one when dpkg offers
// arm64 packages (scripts/setup-debian enables them). Downloaded packages
// are kept in $AIRLOCK_TEST_HOME/cache/debs when that is set.
func TestBuildDebian(t *testing.T) {
	if testing.Short() {
		t.Skip("builds images from downloaded Debian packages; skipped with -short")
	}
	cache := t.TempDir()
	if h := os.Getenv("AIRLOCK_TEST_HOME"); h != "" {
		cache = filepath.Join(h, "cache", "debs")
	}
	for _, arch := range []vm.Arch{vm.AMD64, vm.ARM64} {
		t.Run(string(arch), func(t *testing.T) {
			if arch != vm.Arch(runtime.GOARCH) {
				out, err := exec.Command("dpkg", "--print-foreign-architectures").Output()
				if err == nil && !slices.Contains(strings.Fields(string(out)), string(arch)) {
					t.Skipf("dpkg does not offer %s packages on this host (dpkg --print-foreign-architectures: %q); scripts/setup-debian enables them", arch, strings.TrimSpace(string(out)))
				}
			}
			testBuildDebian(t, arch, cache)
		})
	}
}

func testBuildDebian(t *testing.T, arch vm.Arch, cache string) {
	guest := standInGuest(t, arch)
	home := t.TempDir()
	ctx := context.Background()
	opts := BuildOptions{Home: home, Arch: arch, GuestBinary: guest, CacheDir: cache}
	start := time.Now()
	im, err := Build(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s in %s", arch, time.Since(start).Round(time.Millisecond))
	kernel, err := os.ReadFile(im.Kernel)
	if err != nil {
		t.Fatal(err)
	}
	initrd, err := os.ReadFile(im.Initrd)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel %s %s (%s): %d bytes; initrd %d bytes; modules %v; built in %v; missing %v",
		im.Meta.Kernel.Package, im.Meta.Kernel.Version, im.Meta.Kernel.Format, len(kernel), len(initrd),
		im.Meta.Modules, im.Meta.BuiltinModules, im.Meta.MissingModules)

	switch arch {
	case vm.AMD64:
		if err := checkPVH(kernel); err != nil {
			t.Error(err)
		}
	case vm.ARM64:
		if !isARM64Image(kernel) {
			t.Error("kernel is not an arm64 Image")
		}
	}
	if !strings.HasPrefix(im.Meta.Kernel.Package, "linux-image-") || !strings.Contains(im.Meta.Kernel.Package, "-cloud-"+string(arch)) {
		t.Errorf("kernel package %q", im.Meta.Kernel.Package)
	}

	// The initramfs: /init is the guest, every module of modules.order is
	// there and comes after its dependencies.
	recs := map[string]newcRecord{}
	for _, r := range parseNewc(t, initrd) {
		recs[r.Name] = r
	}
	want, _ := os.ReadFile(guest)
	if recs["init"].Data != string(want) || recs["init"].Mode != modeReg|0o755 {
		t.Error("/init is not the guest binary, mode 0755")
	}
	if r := recs["bin/busybox"]; checkStaticELF("busybox", arch, []byte(r.Data)) != nil || r.Mode != modeReg|0o755 {
		t.Error("/bin/busybox is not a static executable, mode 0755")
	}
	if r := recs["dev/console"]; r.Mode != modeChar|0o600 || r.RdevMajor != 5 || r.RdevMinor != 1 {
		t.Errorf("/dev/console: %+v", r)
	}
	var order []*kmod
	for _, line := range strings.Split(strings.TrimSuffix(recs["lib/modules/airlock/modules.order"].Data, "\n"), "\n") {
		r, ok := recs[strings.TrimPrefix(line, "/")]
		if !ok {
			t.Fatalf("modules.order lists %s, which is not in the initramfs", line)
		}
		m, err := parseModinfo([]byte(r.Data))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		order = append(order, m)
	}
	checkOrder(t, order)
	if diff := cmp.Diff(im.Meta.Modules, names(order)); diff != "" {
		t.Errorf("modules.order differs from image.toml (-toml +order):\n%s", diff)
	}
	for _, w := range MinimalModules(arch) {
		if w.Required && !slices.Contains(im.Meta.Modules, w.Name) && !slices.Contains(im.Meta.BuiltinModules, w.Name) {
			t.Errorf("required module %s is neither in the image nor built in", w.Name)
		}
	}

	// Built again from the cache, the initramfs is byte for byte the same.
	start = time.Now()
	im2, err := Build(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rebuilt %s from the cache in %s", arch, time.Since(start).Round(time.Millisecond))
	if im2.Meta.Initrd != im.Meta.Initrd || im2.Meta.Kernel.FileMeta != im.Meta.Kernel.FileMeta {
		t.Errorf("a rebuild from the same packages differs: initrd %v vs %v, kernel %v vs %v",
			im.Meta.Initrd, im2.Meta.Initrd, im.Meta.Kernel.FileMeta, im2.Meta.Kernel.FileMeta)
	}
	if err := im2.Verify(); err != nil {
		t.Error(err)
	}
}

// standInGuest builds a small static Go program for arch to stand in for
// airlock-guest.
func standInGuest(t *testing.T, arch vm.Arch) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() { println(\"stand-in guest\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "airlock-guest")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+string(arch), "GOWORK=off", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build stand-in guest: %v\n%s", err, b)
	}
	return out
}
