package image

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/ocitest"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/oci"
)

// fakeBoot is a minimal image with made-up kernel and initramfs files.
func fakeBoot(t *testing.T, home string) *Image {
	t.Helper()
	dir := Dir(home, DefaultName, vm.AMD64)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := Meta{Format: MetaFormat, Name: DefaultName, Arch: vm.AMD64, Cmdline: "panic=-1"}
	for f, body := range map[string]string{KernelFile: "kernel", InitrdFile: "initrd"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	meta.Kernel.FileMeta, meta.Initrd = hashBytes([]byte("kernel")), hashBytes([]byte("initrd"))
	if err := writeMeta(filepath.Join(dir, MetaFile), meta); err != nil {
		t.Fatal(err)
	}
	im, err := Load(home, DefaultName, vm.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	return im
}

func TestFromOCI(t *testing.T) {
	home := t.TempDir()
	boot := fakeBoot(t, home)
	reg := ocitest.NewRegistry(t)
	ref := reg.Push(t, "team/app:1", ocitest.Image(t, "amd64", []string{"PATH=/bin"},
		ocitest.Layer(t, ocitest.Entry{Name: "etc/os-release", Body: "ID=test\n"})))
	st := oci.Store{Dir: filepath.Join(home, "oci")}
	ctx := context.Background()
	pulled, err := st.Pull(ctx, ref, oci.PullOptions{Arch: vm.AMD64})
	if err != nil {
		t.Fatal(err)
	}
	im, err := FromOCI(ctx, home, OCIOptions{Name: "app", Boot: boot, Store: st, Image: pulled, UpperSize: 64 << 20, User: "dev", Label: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if im.Lower == "" || im.Rootfs == "" || im.User() != "dev" || im.Meta.OCI.Digest != pulled.Digest || im.Meta.OCI.Label != "test" {
		t.Fatalf("image %+v", im)
	}
	if !strings.Contains(im.Cmdline, "panic=-1 airlock.root=vda airlock.lower=vdb") {
		t.Errorf("command line %q", im.Cmdline)
	}
	if err := im.Verify(); err != nil {
		t.Error(err)
	}
	first := im.Meta.Rootfs.SHA256

	// A layer on top (a provisioning layer, kept in the store) makes
	// another lower disk, and another identity for the upper layer: a
	// sandbox's upper layer belongs to the lower disk it was made on.
	layer := filepath.Join(t.TempDir(), "layer.tar")
	if err := os.WriteFile(layer, ocitest.Tar(t, ocitest.Entry{Name: "etc/added", Body: "x"}), 0o644); err != nil {
		t.Fatal(err)
	}
	d, _, err := st.Adopt(layer)
	if err != nil {
		t.Fatal(err)
	}
	im2, err := FromOCI(ctx, home, OCIOptions{Name: "app", Boot: boot, Store: st, Image: pulled, Extra: []string{d.String()}, UpperSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if im2.Meta.Rootfs.SHA256 == first || len(im2.Meta.OCI.Extra) != 1 {
		t.Errorf("the provisioned image: %+v", im2.Meta)
	}
	// A layer that is not in the store is an error, and the image stays.
	_, err = FromOCI(ctx, home, OCIOptions{Name: "app", Boot: boot, Store: st, Image: pulled, Extra: []string{"sha256:" + strings.Repeat("0", 64)}})
	if err == nil || !strings.Contains(err.Error(), "not in the content store") {
		t.Errorf("a missing layer: %v", err)
	}
	if again, err := Load(home, "app", vm.AMD64); err != nil || again.Meta.Rootfs.SHA256 != im2.Meta.Rootfs.SHA256 {
		t.Errorf("a failed build touched the image: %v", err)
	}
	// An image that cannot fit is refused before anything is written.
	huge := *pulled
	huge.Layers = append([]oci.Layer{}, pulled.Layers...)
	huge.Layers[0].Size = 1 << 60
	_, err = FromOCI(ctx, home, OCIOptions{Name: "huge", Boot: boot, Store: st, Image: &huge})
	if err == nil || !strings.Contains(err.Error(), "MB free") {
		t.Errorf("an image larger than the free disk: %v", err)
	}
}
