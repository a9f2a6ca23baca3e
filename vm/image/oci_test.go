package image

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/testkit/ocitest"
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
	bw, err := st.NewBlob()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bw.Write(ocitest.Tar(t, ocitest.Entry{Name: "etc/added", Body: "x"})); err != nil {
		t.Fatal(err)
	}
	d, _, err := bw.Commit()
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

// TestFromOCIRecordsUsers: the accounts of the image's etc/passwd go into
// image.toml, so a sandbox's files can be owned by its user before the
// image boots.
func TestFromOCIRecordsUsers(t *testing.T) {
	home := t.TempDir()
	boot := fakeBoot(t, home)
	reg := ocitest.NewRegistry(t)
	ref := reg.Push(t, "team/app:1", ocitest.Image(t, "amd64", nil, ocitest.Layer(t,
		ocitest.Entry{Name: "etc/", Type: '5'},
		ocitest.Entry{Name: "etc/passwd", Body: "root:x:0:0:root:/root:/bin/bash\n" +
			"dev:x:1001:1002::/home/dev:/bin/bash\n" +
			"evil:x:-1:0::/:/bin/sh\n" +
			"Evil:x:5:5::/:/bin/sh\n"})))
	st := oci.Store{Dir: filepath.Join(home, "oci")}
	ctx := context.Background()
	pulled, err := st.Pull(ctx, ref, oci.PullOptions{Arch: vm.AMD64})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromOCI(ctx, home, OCIOptions{Name: "app", Boot: boot, Store: st, Image: pulled, UpperSize: 64 << 20, User: "dev"}); err != nil {
		t.Fatal(err)
	}
	im, err := Load(home, "app", vm.AMD64) // read back from image.toml
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"root": "0:0", "dev": "1001:1002"}; !maps.Equal(im.Meta.Users, want) {
		t.Errorf("users %v, want %v", im.Meta.Users, want)
	}
	if uid, gid, ok := im.Owner(im.User()); !ok || uid != 1001 || gid != 1002 {
		t.Errorf("Owner(%q) = %d, %d, %t; want 1001, 1002", im.User(), uid, gid, ok)
	}
	for _, u := range []string{"evil", "Evil", "nobody"} {
		if _, _, ok := im.Owner(u); ok {
			t.Errorf("Owner(%q) is known", u)
		}
	}
	// The boot image's table (none here) is not carried over, nor an old
	// one: an image without etc/passwd has none.
	ref2 := reg.Push(t, "team/bare:1", ocitest.Image(t, "amd64", nil, ocitest.Layer(t, ocitest.Entry{Name: "x", Body: "x"})))
	pulled2, err := st.Pull(ctx, ref2, oci.PullOptions{Arch: vm.AMD64})
	if err != nil {
		t.Fatal(err)
	}
	bare, err := FromOCI(ctx, home, OCIOptions{Name: "app", Boot: boot, Store: st, Image: pulled2, UpperSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if bare.Meta.Users != nil {
		t.Errorf("an image without etc/passwd has users %v", bare.Meta.Users)
	}
}

func TestOwner(t *testing.T) {
	im := &Image{Meta: Meta{Users: map[string]string{
		"agent": "1000:1000", "other": "1001:50", "bad": "x:1", "half": "7", "neg": "-1:-1", "big": "2147483648:1",
	}}}
	for _, c := range []struct {
		user     string
		uid, gid int
		ok       bool
	}{
		{"", 0, 0, true},
		{"root", 0, 0, true},
		{"agent", 1000, 1000, true},
		{"other", 1001, 50, true},
		{"1234", 1234, 1234, true},
		{"1234:99", 1234, 99, true},
		{"0:0", 0, 0, true},
		{"2147483647:2147483647", 2147483647, 2147483647, true},
		{"2147483648", 0, 0, false},
		{"1:", 0, 0, false},
		{":1", 0, 0, false},
		{"1:2:3", 0, 0, false},
		{"+1", 0, 0, false},
		{"-1", 0, 0, false},
		{" 1", 0, 0, false},
		{"0x10", 0, 0, false},
		{"nobody", 0, 0, false},
		{"bad", 0, 0, false},
		{"half", 0, 0, false},
		{"neg", 0, 0, false},
		{"big", 0, 0, false},
	} {
		uid, gid, ok := im.Owner(c.user)
		if uid != c.uid || gid != c.gid || ok != c.ok {
			t.Errorf("Owner(%q) = %d, %d, %t; want %d, %d, %t", c.user, uid, gid, ok, c.uid, c.gid, c.ok)
		}
	}
	// A full image from before the table: its user and UID.
	old := &Image{Meta: Meta{Rootfs: &RootfsMeta{User: "agent", UID: 1000}}}
	if uid, gid, ok := old.Owner("agent"); !ok || uid != 1000 || gid != 1000 {
		t.Errorf("Owner(agent) on an older full image = %d, %d, %t", uid, gid, ok)
	}
	if _, _, ok := old.Owner("other"); ok {
		t.Error("an older full image knows another user")
	}
	ociNoTable := &Image{Meta: Meta{Rootfs: &RootfsMeta{User: "dev"}}}
	if _, _, ok := ociNoTable.Owner("dev"); ok {
		t.Error("an image that recorded no uid for its user knows it")
	}
	var none *Image
	if _, _, ok := none.Owner("agent"); ok {
		t.Error("a nil image knows agent")
	}
	if uid, gid, ok := none.Owner("root"); !ok || uid != 0 || gid != 0 {
		t.Error("a nil image does not know root")
	}
}
