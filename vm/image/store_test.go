package image

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/vm"
)

// writeTestImage puts an image with the given kernel and initrd bytes in
// the store under home, as Build would.
func writeTestImage(t *testing.T, home, name string, arch vm.Arch) *Image {
	t.Helper()
	dir := Dir(home, name, arch)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	kernel, initrd := []byte("kernel "+name), []byte("initrd "+name)
	os.WriteFile(filepath.Join(dir, KernelFile), kernel, 0o644)
	os.WriteFile(filepath.Join(dir, InitrdFile), initrd, 0o644)
	meta := Meta{
		Format: MetaFormat, Name: name, Arch: arch,
		Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Cmdline: DefaultCmdline,
		Kernel: KernelMeta{MetaPackage: "linux-image-cloud-amd64 1", Package: "linux-image-x", Version: "1",
			Release: "6.1.0-1-cloud-amd64", Format: FormatVmlinuxPVH, FileMeta: hashBytes(kernel)},
		Initrd:         hashBytes(initrd),
		Busybox:        PackageMeta{Package: "busybox-static", Version: "1:1"},
		Guest:          hashBytes([]byte("guest")),
		Modules:        []string{"virtio", "virtio_blk"},
		MissingModules: []string{"9p"},
	}
	if err := writeMeta(filepath.Join(dir, MetaFile), meta); err != nil {
		t.Fatal(err)
	}
	return &Image{Name: name, Arch: arch, Dir: dir, Kernel: filepath.Join(dir, KernelFile),
		Initrd: filepath.Join(dir, InitrdFile), Cmdline: DefaultCmdline, Meta: meta}
}

func TestLoad(t *testing.T) {
	home := t.TempDir()
	want := writeTestImage(t, home, "minimal", vm.AMD64)
	got, err := Load(home, "minimal", vm.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := got.Verify(); err != nil {
		t.Error(err)
	}
	os.WriteFile(got.Initrd, []byte("initrd MINIMAL"), 0o644) // same size, other bytes
	if err := got.Verify(); err == nil || !strings.Contains(err.Error(), "rebuild it with `airlock image build --arch amd64 minimal`") {
		t.Errorf("Verify of a changed initrd: %v", err)
	}
}

func TestLoadNotFound(t *testing.T) {
	_, err := Load(t.TempDir(), "minimal", vm.ARM64)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("error %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), "`airlock image build --arch arm64 minimal`") {
		t.Errorf("error %q does not name the build command", err)
	}
}

func TestLoadBroken(t *testing.T) {
	tests := []struct {
		name    string
		breakIt func(im *Image)
		wantErr string
	}{
		{"kernel missing", func(im *Image) { os.Remove(im.Kernel) }, "no such file"},
		{"initrd truncated", func(im *Image) { os.WriteFile(im.Initrd, []byte("x"), 0o644) }, "image.toml says"},
		{"meta damaged", func(im *Image) { os.WriteFile(filepath.Join(im.Dir, MetaFile), []byte("name = ["), 0o644) }, "is damaged"},
		{"meta of another image", func(im *Image) {
			b, _ := os.ReadFile(filepath.Join(im.Dir, MetaFile))
			os.WriteFile(filepath.Join(im.Dir, MetaFile), []byte(strings.Replace(string(b), `name = "minimal"`, `name = "full"`, 1)), 0o644)
		}, "describes full/amd64"},
		{"newer format", func(im *Image) {
			b, _ := os.ReadFile(filepath.Join(im.Dir, MetaFile))
			os.WriteFile(filepath.Join(im.Dir, MetaFile), []byte(strings.Replace(string(b), "format = 1", "format = 99", 1)), 0o644)
		}, "format 99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			tt.breakIt(writeTestImage(t, home, "minimal", vm.AMD64))
			_, err := Load(home, "minimal", vm.AMD64)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "airlock image build --arch amd64 minimal") {
				t.Fatalf("error %v, want %q and the build command", err, tt.wantErr)
			}
			if errors.Is(err, ErrNotFound) {
				t.Error("a broken image is not ErrNotFound")
			}
		})
	}
}

func TestLoadRejectsBadNames(t *testing.T) {
	for _, name := range []string{"", "..", "../x", "a/b", ".hidden", "-x", "UPPER", strings.Repeat("a", 65)} {
		if _, err := Load(t.TempDir(), name, vm.AMD64); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Load(%q): %v", name, err)
		}
	}
	if _, err := Load(t.TempDir(), "minimal", "riscv64"); err == nil || !strings.Contains(err.Error(), "unknown arch") {
		t.Errorf("Load riscv64: %v", err)
	}
}

func TestList(t *testing.T) {
	home := t.TempDir()
	if got, err := List(home); err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v, %v", got, err)
	}
	writeTestImage(t, home, "minimal", vm.ARM64)
	writeTestImage(t, home, "full", vm.AMD64)
	writeTestImage(t, home, "minimal", vm.AMD64)
	broken := writeTestImage(t, home, "broken", vm.AMD64)
	os.Remove(broken.Kernel)
	os.MkdirAll(filepath.Join(home, "images", "minimal", ".amd64.build-123"), 0o755) // a build in progress
	os.WriteFile(filepath.Join(home, "images", "stray-file"), nil, 0o644)
	got, err := List(home)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, im := range got {
		ids = append(ids, im.Name+"/"+string(im.Arch))
	}
	if diff := cmp.Diff([]string{"full/amd64", "minimal/amd64", "minimal/arm64"}, ids); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestInstallReplaces(t *testing.T) {
	parent := t.TempDir()
	dst := filepath.Join(parent, "amd64")
	for i, content := range []string{"first", "second"} {
		tmp, err := os.MkdirTemp(parent, ".amd64.build-")
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(tmp, "f"), []byte(content), 0o644)
		if i == 1 {
			os.WriteFile(filepath.Join(dst, "only-in-old"), nil, 0o644)
		}
		if err := install(tmp, dst); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(dst, "f")); string(b) != content {
			t.Fatalf("after install %d: %q", i, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "only-in-old")); !errors.Is(err, os.ErrNotExist) {
		t.Error("the old image's files survived")
	}
	left, _ := os.ReadDir(parent)
	if len(left) != 1 {
		t.Errorf("left behind: %v", left)
	}
}

func TestFind(t *testing.T) {
	home, bundle := t.TempDir(), t.TempDir()
	shipped := writeTestImage(t, bundle, "minimal", vm.ARM64)
	writeTestImage(t, bundle, "minimal", vm.AMD64)
	roots := []string{home, bundle}

	// The home has no image: the bundle's is used.
	got, err := Find(roots, "minimal", vm.ARM64)
	if err != nil {
		t.Fatal(err)
	}
	if got.Dir != shipped.Dir {
		t.Errorf("found %s, want the bundle's %s", got.Dir, shipped.Dir)
	}

	// One built in the home wins over the bundle's.
	built := writeTestImage(t, home, "minimal", vm.ARM64)
	if got, err := Find(roots, "minimal", vm.ARM64); err != nil || got.Dir != built.Dir {
		t.Errorf("Find = %v, %v; want the home's %s", got, err, built.Dir)
	}

	// A damaged image in the home is reported, not silently replaced.
	os.Remove(built.Kernel)
	if _, err := Find(roots, "minimal", vm.ARM64); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Find with a damaged home image: %v, want the damage reported", err)
	}

	// Nowhere: the home's error, naming the build command.
	_, err = Find(roots, "full", vm.ARM64)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), filepath.Join(home, "images", "full")) {
		t.Errorf("Find of a missing image: %v, want ErrNotFound about the home", err)
	}
	if _, err := Find(nil, "minimal", vm.ARM64); err == nil {
		t.Error("Find with no roots succeeded")
	}
}

func TestListAll(t *testing.T) {
	home, bundle := t.TempDir(), t.TempDir()
	writeTestImage(t, bundle, "minimal", vm.ARM64)
	writeTestImage(t, bundle, "minimal", vm.AMD64)
	mine := writeTestImage(t, home, "minimal", vm.AMD64)
	writeTestImage(t, home, "alpha", vm.AMD64)
	ims, err := ListAll([]string{home, bundle, filepath.Join(bundle, "absent")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, im := range ims {
		got = append(got, im.Name+"/"+string(im.Arch)+" "+im.Dir)
	}
	want := []string{
		"alpha/amd64 " + Dir(home, "alpha", vm.AMD64),
		"minimal/amd64 " + mine.Dir,
		"minimal/arm64 " + Dir(bundle, "minimal", vm.ARM64),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
