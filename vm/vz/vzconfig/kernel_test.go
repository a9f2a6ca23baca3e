package vzconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/vm"
)

// header returns n zero bytes with magic written at off.
func header(n, off int, magic string) []byte {
	b := make([]byte, n)
	copy(b[off:], magic)
	return b
}

func TestCheckKernelHeader(t *testing.T) {
	arm64Image := header(0x40, 0x38, "ARM\x64")
	copy(arm64Image, "MZ") // an Image with the EFI stub starts with MZ too
	zboot := header(0x40, 0, "MZ")
	copy(zboot[4:], "zimg")
	tests := []struct {
		name string
		arch vm.Arch
		head []byte
		want string // "" means accepted
	}{
		{"arm64 Image", vm.ARM64, arm64Image, ""},
		{"arm64 Image, bare header", vm.ARM64, header(0x3c, 0x38, "ARM\x64"), ""},
		{"gzip", vm.ARM64, header(0x40, 0, "\x1f\x8b\x08"), "gzip-compressed"},
		{"zstd", vm.ARM64, header(0x40, 0, "\x28\xb5\x2f\xfd"), "zstd-compressed"},
		{"xz", vm.ARM64, header(0x40, 0, "\xfd7zXZ\x00"), "xz-compressed"},
		{"lz4", vm.ARM64, header(0x40, 0, "\x02\x21\x4c\x18"), "lz4-compressed"},
		{"EFI zboot", vm.ARM64, zboot, "EFI zboot"},
		{"ELF vmlinux on arm64", vm.ARM64, header(0x40, 0, "\x7fELF"), "ELF vmlinux"},
		{"magic at the wrong offset", vm.ARM64, header(0x40, 0x30, "ARM\x64"), "no ARM\\x64 magic at offset 0x38"},
		{"short file", vm.ARM64, []byte("ARM"), "no ARM\\x64 magic"},
		{"empty file", vm.ARM64, nil, "no ARM\\x64 magic"},
		{"x86 bzImage", vm.AMD64, header(0x240, 0x202, "HdrS"), ""},
		{"x86 ELF vmlinux", vm.AMD64, header(0x240, 0, "\x7fELF"), "vz on an Intel Mac needs the bzImage"},
		{"x86 garbage", vm.AMD64, header(0x240, 0, "junk"), "no HdrS magic"},
		{"arm64 Image as amd64", vm.AMD64, arm64Image, "no HdrS magic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkKernelHeader(tt.head, tt.arch)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrKernelFormat) {
				t.Errorf("error %q: want %q wrapping ErrKernelFormat", err, tt.want)
			}
		})
	}
}

func TestCheckKernelFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "Image")
	os.WriteFile(good, header(4096, 0x38, "ARM\x64"), 0o644)
	if err := CheckKernel(good, vm.ARM64); err != nil {
		t.Errorf("Image: %v", err)
	}
	gz := filepath.Join(dir, "vmlinuz")
	os.WriteFile(gz, header(4096, 0, "\x1f\x8b"), 0o644)
	if err := CheckKernel(gz, vm.ARM64); err == nil || !strings.Contains(err.Error(), gz) {
		t.Errorf("vmlinuz: %v, want an error naming the file", err)
	}
	if err := CheckKernel(filepath.Join(dir, "missing"), vm.ARM64); err == nil {
		t.Error("missing kernel accepted")
	}
}
