package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// FakeImage puts an image of made-up files named name into home, for
// tests that plan runs without booting them: its kernel and initramfs
// are a few bytes, and users is its account table (user name to "UID:GID",
// Meta.Users), which a baseline disk's owner is read from.
func FakeImage(t testing.TB, home, name string, arch vm.Arch, users map[string]string) *image.Image {
	t.Helper()
	dir := image.Dir(home, name, arch)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := image.Meta{Format: image.MetaFormat, Name: name, Arch: arch, Users: users}
	meta.Kernel.Size, meta.Initrd.Size = 6, 6
	for file, data := range map[string]string{image.KernelFile: "kernel", image.InitrdFile: "initrd"} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(filepath.Join(dir, image.MetaFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := toml.NewEncoder(f).Encode(meta); err != nil {
		t.Fatal(err)
	}
	im, err := image.Load(home, name, arch)
	if err != nil {
		t.Fatal(err)
	}
	return im
}
