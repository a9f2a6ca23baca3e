package launch

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/testkit/testenv"

	"github.com/airlock-dev/airlock/vm/disk"
	"github.com/airlock-dev/airlock/vm/image"
)

// TestRootDisk clones an image's root disk once, boots the same clone
// again later (a sandbox's next round), and refuses an overlay whose
// image was rebuilt since.
func TestRootDisk(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		testenv.Skip(t, testenv.QEMUImg, "qemu-img not installed (scripts/setup-debian installs it)")
	}
	dir := t.TempDir()
	img := &image.Image{Name: "full", Rootfs: filepath.Join(dir, "rootfs.img"),
		Meta: image.Meta{Rootfs: &image.RootfsMeta{FileMeta: image.FileMeta{SHA256: "aaaa"}}}}
	if err := os.WriteFile(img.Rootfs, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(dir, "sandbox", "root.img")
	os.MkdirAll(filepath.Dir(clone), 0o700)
	log := slog.New(slog.DiscardHandler)
	d, err := rootDisk(context.Background(), img, clone, log)
	if err != nil {
		t.Fatal(err)
	}
	if d.Path != clone || (d.Format != disk.Raw && d.Format != disk.QCOW2) {
		t.Fatalf("first boot: %+v", d)
	}
	again, err := rootDisk(context.Background(), img, clone, log)
	if err != nil || again != d {
		t.Fatalf("second boot: %+v, %v; want %+v", again, err, d)
	}
	if d.Format == disk.QCOW2 {
		img.Meta.Rootfs.SHA256 = "bbbb" // the image was rebuilt
		if _, err := rootDisk(context.Background(), img, clone, log); err == nil || !strings.Contains(err.Error(), "was rebuilt since this clone was made") {
			t.Errorf("rebuilt image: %v", err)
		}
	}
}

// TestRootDiskRealBacking: an overlay on an image reached through a
// linked directory (a test home's images, linked to the shared store)
// is backed by the image's real path, so that a warm snapshot kept from
// it outlives the home it was made in.
func TestRootDiskRealBacking(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		testenv.Skip(t, testenv.QEMUImg, "qemu-img not installed (scripts/setup-debian installs it)")
	}
	store, home := t.TempDir(), t.TempDir()
	real := filepath.Join(store, "rootfs.img")
	if err := os.WriteFile(real, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(store, filepath.Join(home, "images")); err != nil {
		t.Fatal(err)
	}
	img := &image.Image{Name: "full", Rootfs: filepath.Join(home, "images", "rootfs.img"),
		Meta: image.Meta{Rootfs: &image.RootfsMeta{FileMeta: image.FileMeta{SHA256: "aaaa"}}}}
	clone := filepath.Join(home, "root.img")
	d, err := rootDisk(context.Background(), img, clone, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if d.Format != disk.QCOW2 {
		t.Skipf("the root disk is a %s clone, no overlay", d.Format)
	}
	out, err := exec.Command("qemu-img", "info", "--output=json", clone).Output()
	if err != nil {
		t.Fatal(err)
	}
	realStore, _ := filepath.EvalSymlinks(store)
	if want := `"backing-filename": "` + filepath.Join(realStore, "rootfs.img") + `"`; !strings.Contains(string(out), want) {
		t.Errorf("the overlay's backing file is not the image's real path (%s):\n%s", want, out)
	}
}
