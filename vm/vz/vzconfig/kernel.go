package vzconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/airlock-dev/airlock/vm"
)

// Magic numbers of the kernel formats told apart by CheckKernel.
var (
	arm64Magic = []byte("ARM\x64") // arm64 Image header, offset 0x38
	bzMagic    = []byte("HdrS")    // x86 boot protocol header, offset 0x202
	gzipMagic  = []byte{0x1f, 0x8b}
	zstdMagic  = []byte{0x28, 0xb5, 0x2f, 0xfd}
	elfMagic   = []byte("\x7fELF")
	xzMagic    = []byte{0xfd, '7', 'z', 'X', 'Z', 0}
	lz4Magic   = []byte{0x02, 0x21, 0x4c, 0x18}
)

const (
	arm64MagicOff = 0x38
	bzMagicOff    = 0x202
	headerLen     = 0x240 // enough for every magic above
)

// ErrKernelFormat is wrapped by CheckKernel's errors: the kernel file is
// not in a format Virtualization.framework boots.
var ErrKernelFormat = errors.New("kernel image format not bootable by Virtualization.framework")

// CheckKernel reads the start of the kernel at path and reports whether
// vz can boot it for arch. An arm64 guest needs an uncompressed Image:
// given a compressed one, vz starts a VM that hangs without a word.
func CheckKernel(path string, arch vm.Arch) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("vz: kernel: %w", err)
	}
	defer f.Close()
	head := make([]byte, headerLen)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("vz: kernel %s: %w", path, err)
	}
	if err := checkKernelHeader(head[:n], arch); err != nil {
		return fmt.Errorf("vz: kernel %s: %w", path, err)
	}
	return nil
}

// checkKernelHeader is CheckKernel on the first bytes of the file.
func checkKernelHeader(h []byte, arch vm.Arch) error {
	at := func(off int, magic []byte) bool {
		return len(h) >= off+len(magic) && bytes.Equal(h[off:off+len(magic)], magic)
	}
	compressed := func(what string) error {
		return fmt.Errorf("%w: it is %s; vz boots only an uncompressed %s kernel (%s)", ErrKernelFormat, what, arch, wants(arch))
	}
	switch arch {
	case vm.ARM64:
		switch {
		case at(arm64MagicOff, arm64Magic):
			return nil
		case at(0, gzipMagic):
			return compressed("gzip-compressed (a vmlinuz; gunzip it)")
		case at(0, zstdMagic):
			return compressed("zstd-compressed")
		case at(0, xzMagic):
			return compressed("xz-compressed")
		case at(0, lz4Magic):
			return compressed("lz4-compressed")
		case at(0, []byte("MZ")) && at(4, []byte("zimg")):
			return compressed("an EFI zboot image (CONFIG_EFI_ZBOOT: a compressed kernel behind an EFI stub)")
		case at(0, elfMagic):
			return fmt.Errorf("%w: it is an ELF vmlinux; vz needs the %s", ErrKernelFormat, wants(arch))
		}
		return fmt.Errorf("%w: not an arm64 Linux Image (no ARM\\x64 magic at offset 0x38); vz needs the %s", ErrKernelFormat, wants(arch))
	case vm.AMD64:
		switch {
		case at(bzMagicOff, bzMagic):
			return nil
		case at(0, elfMagic):
			return fmt.Errorf("%w: it is an ELF vmlinux (what QEMU boots with PVH); vz on an Intel Mac needs the %s", ErrKernelFormat, wants(arch))
		}
		return fmt.Errorf("%w: not an x86 Linux bzImage (no HdrS magic at offset 0x202); vz needs the %s", ErrKernelFormat, wants(arch))
	}
	return fmt.Errorf("%w: unknown guest architecture %q", vm.ErrNotSupported, arch)
}

// wants names the kernel file vz needs for arch.
func wants(arch vm.Arch) string {
	if arch == vm.AMD64 {
		return "bzImage (arch/x86/boot/bzImage)"
	}
	return "uncompressed Image (arch/arm64/boot/Image)"
}
