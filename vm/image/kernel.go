package image

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/pierrec/lz4/v4"

	"github.com/airlock-dev/airlock/vm"
)

// maxKernelSize bounds a decompressed kernel, so a damaged or hostile
// payload cannot fill the disk.
const maxKernelSize = 512 << 20

// Kernel formats recorded in KernelMeta.Format.
const (
	FormatVmlinuxPVH = "vmlinux-pvh"
	FormatARM64Image = "arm64-image"
)

// bootKernel turns the vmlinuz a Debian kernel package ships into the
// kernel Airlock boots: for amd64 the uncompressed vmlinux ELF inside the
// bzImage, which must have a PVH entry point (QEMU boots it directly); for
// arm64 the uncompressed Image inside the gzip file
// (Virtualization.framework boots only uncompressed Images). It returns the
// kernel and its format.
func bootKernel(arch vm.Arch, vmlinuz []byte) ([]byte, string, error) {
	switch arch {
	case vm.AMD64:
		k, err := vmlinuxFromBzImage(vmlinuz)
		return k, FormatVmlinuxPVH, err
	case vm.ARM64:
		k, err := arm64Image(vmlinuz)
		return k, FormatARM64Image, err
	}
	return nil, "", fmt.Errorf("kernel for %q: %w", arch, vm.ErrNotSupported)
}

// vmlinuxFromBzImage extracts and decompresses the vmlinux ELF that an x86
// bzImage carries, and checks it has a PVH entry.
func vmlinuxFromBzImage(bz []byte) ([]byte, error) {
	// The boot protocol's setup header (Documentation/arch/x86/boot.rst).
	const (
		offSetupSects   = 0x1f1
		offHeaderMagic  = 0x202
		offVersion      = 0x206
		offPayloadOff   = 0x248
		offPayloadLen   = 0x24c
		minVersionForPL = 0x208 // payload_offset/length appeared in 2.08
	)
	if len(bz) < offPayloadLen+4 || string(bz[offHeaderMagic:offHeaderMagic+4]) != "HdrS" {
		if bytes.HasPrefix(bz, []byte(elf.ELFMAG)) {
			return nil, errors.New("the kernel is already an ELF, not a bzImage; expected boot/vmlinuz-* from a Debian kernel package")
		}
		return nil, errors.New("not an x86 bzImage (no \"HdrS\" setup header at 0x202)")
	}
	if v := binary.LittleEndian.Uint16(bz[offVersion:]); v < minVersionForPL {
		return nil, fmt.Errorf("bzImage boot protocol %d.%02d is older than 2.08 and has no payload fields", v>>8, v&0xff)
	}
	setupSects := int(bz[offSetupSects])
	if setupSects == 0 {
		setupSects = 4
	}
	pm := (setupSects + 1) * 512
	off := int64(binary.LittleEndian.Uint32(bz[offPayloadOff:]))
	n := int64(binary.LittleEndian.Uint32(bz[offPayloadLen:]))
	start := int64(pm) + off
	if n == 0 || start+n > int64(len(bz)) {
		return nil, fmt.Errorf("bzImage payload [%d, +%d) lies outside the %d-byte file", start, n, len(bz))
	}
	payload := bz[start : start+n]
	vmlinux, err := decompress(payload)
	if err != nil {
		return nil, fmt.Errorf("bzImage payload: %w", err)
	}
	if err := checkPVH(vmlinux); err != nil {
		return nil, err
	}
	return vmlinux, nil
}

// Magic numbers of the compressors a kernel payload may use.
var (
	magicGzip      = []byte{0x1f, 0x8b}
	magicLZ4Legacy = []byte{0x02, 0x21, 0x4c, 0x18}
	magicXZ        = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	magicZstd      = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicLZMA      = []byte{0x5d, 0x00, 0x00}
	magicBzip2     = []byte{'B', 'Z', 'h'}
	magicLZO       = []byte{0x89, 'L', 'Z', 'O'}
)

// decompress decompresses a kernel payload by its magic number. The kernel
// build appends the uncompressed size after the compressed stream; both
// readers stop at the end of their stream and ignore it.
func decompress(p []byte) ([]byte, error) {
	var r io.Reader
	switch {
	case bytes.HasPrefix(p, magicLZ4Legacy):
		r = lz4.NewReader(bytes.NewReader(p))
	case bytes.HasPrefix(p, magicGzip):
		zr, err := gzip.NewReader(bytes.NewReader(p))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		zr.Multistream(false)
		r = zr
	default:
		name := "an unknown format"
		switch {
		case bytes.HasPrefix(p, magicXZ):
			name = "xz"
		case bytes.HasPrefix(p, magicZstd):
			name = "zstd"
		case bytes.HasPrefix(p, magicLZMA):
			name = "lzma"
		case bytes.HasPrefix(p, magicBzip2):
			name = "bzip2"
		case bytes.HasPrefix(p, magicLZO):
			name = "lzo"
		}
		return nil, fmt.Errorf("compressed with %s (magic % x); Airlock decompresses only LZ4 (legacy) and gzip kernels: use a kernel built with one of those", name, p[:min(len(p), 6)])
	}
	var out bytes.Buffer
	n, err := io.Copy(&out, io.LimitReader(r, maxKernelSize+1))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	if n > maxKernelSize {
		return nil, fmt.Errorf("decompressed kernel is larger than %d MiB", maxKernelSize>>20)
	}
	return out.Bytes(), nil
}

// Xen ELF note type of the 32-bit PVH entry point (xen/include/public/elfnote.h).
const xenElfNotePhys32Entry = 18

// checkPVH checks that b is an x86-64 ELF with a XEN_ELFNOTE_PHYS32_ENTRY
// note, the entry point QEMU uses to boot a vmlinux directly.
func checkPVH(b []byte) error {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("decompressed kernel is not an ELF vmlinux: %w", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 || f.Class != elf.ELFCLASS64 {
		return fmt.Errorf("vmlinux is a %s %s ELF, want x86-64", f.Class, f.Machine)
	}
	var notes [][]byte
	for _, p := range f.Progs {
		if p.Type == elf.PT_NOTE {
			d, err := io.ReadAll(p.Open())
			if err != nil {
				return fmt.Errorf("vmlinux notes: %w", err)
			}
			notes = append(notes, d)
		}
	}
	if len(notes) == 0 {
		for _, s := range f.Sections {
			if s.Type == elf.SHT_NOTE {
				d, err := s.Data()
				if err != nil {
					return fmt.Errorf("vmlinux notes: %w", err)
				}
				notes = append(notes, d)
			}
		}
	}
	for _, d := range notes {
		if hasNote(d, f.ByteOrder, "Xen", xenElfNotePhys32Entry) {
			return nil
		}
	}
	return errors.New("vmlinux has no PVH entry point (Xen ELF note XEN_ELFNOTE_PHYS32_ENTRY); QEMU cannot boot it directly: use a kernel built with CONFIG_PVH=y (Debian's cloud kernels are)")
}

// hasNote reports whether the ELF note data d holds a note named name of
// type typ.
func hasNote(d []byte, bo binary.ByteOrder, name string, typ uint32) bool {
	for len(d) >= 12 {
		namesz := int(bo.Uint32(d[0:]))
		descsz := int(bo.Uint32(d[4:]))
		t := bo.Uint32(d[8:])
		d = d[12:]
		nlen := namesz + pad4(namesz)
		dlen := descsz + pad4(descsz)
		if namesz < 0 || descsz < 0 || nlen > len(d) || nlen+dlen > len(d) {
			return false
		}
		n := string(bytes.TrimRight(d[:namesz], "\x00"))
		if n == name && t == typ {
			return true
		}
		d = d[nlen+dlen:]
	}
	return false
}

// arm64ImageMagic is the arm64 Image header's magic at offset 0x38
// (Documentation/arch/arm64/booting.rst).
const arm64ImageMagic = "ARM\x64"

// arm64Image decompresses a gzip'd arm64 Image (Debian's vmlinuz) and
// checks the Image header. An Image that is already uncompressed is
// accepted as it is.
func arm64Image(vmlinuz []byte) ([]byte, error) {
	img := vmlinuz
	switch {
	case isARM64Image(vmlinuz):
	case bytes.HasPrefix(vmlinuz, magicGzip):
		var err error
		img, err = decompress(vmlinuz)
		if err != nil {
			return nil, fmt.Errorf("arm64 vmlinuz: %w", err)
		}
	case len(vmlinuz) >= 8 && string(vmlinuz[:2]) == "MZ" && string(vmlinuz[4:8]) == "zimg":
		return nil, errors.New("arm64 vmlinuz is an EFI zboot image; Virtualization.framework needs an uncompressed Image: use a kernel built without CONFIG_EFI_ZBOOT")
	default:
		return nil, fmt.Errorf("arm64 vmlinuz is neither a gzip'd nor an uncompressed arm64 Image (starts % x)", vmlinuz[:min(len(vmlinuz), 8)])
	}
	if !isARM64Image(img) {
		return nil, fmt.Errorf("decompressed arm64 kernel has no Image header (want magic %q at 0x38)", arm64ImageMagic)
	}
	return img, nil
}

func isARM64Image(b []byte) bool {
	return len(b) >= 0x40 && string(b[0x38:0x3c]) == arm64ImageMagic
}
