package image

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/pierrec/lz4/v4"

	"github.com/airlock-dev/airlock/vm"
)

// fakeBzImage wraps payload in an x86 boot setup header the way the kernel
// build does: setup sectors, then the protected-mode code with the payload
// at payload_offset, and the uncompressed size appended to the payload.
func fakeBzImage(setupSects byte, payload []byte, uncompressed int) []byte {
	sects := int(setupSects)
	if sects == 0 {
		sects = 4
	}
	pm := (sects + 1) * 512
	const payloadOff = 0x3c0
	p := binary.LittleEndian.AppendUint32(append([]byte(nil), payload...), uint32(uncompressed))
	bz := make([]byte, pm+payloadOff+len(p)+100)
	bz[0x1f1] = setupSects
	copy(bz[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(bz[0x206:], 0x020f)
	binary.LittleEndian.PutUint32(bz[0x248:], payloadOff)
	binary.LittleEndian.PutUint32(bz[0x24c:], uint32(len(p)))
	copy(bz[pm+payloadOff:], p)
	return bz
}

func lz4Legacy(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	if err := w.Apply(lz4.LegacyOption(true)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(buf.Bytes(), magicLZ4Legacy) {
		t.Fatalf("lz4 legacy writer wrote magic % x", buf.Bytes()[:4])
	}
	return buf.Bytes()
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestVmlinuxFromBzImage(t *testing.T) {
	vmlinux := pvhVmlinux(t)
	// A vmlinux larger than one lz4 block (4 MiB), so multi-block frames are covered.
	big := append(append([]byte(nil), vmlinux...), bytes.Repeat([]byte("kernel text "), 500_000)...)
	noPVH := testELF{typ: elf.ET_EXEC, machine: elf.EM_X86_64, notes: elfNote("GNU", 3, []byte("x"))}.bytes(t)
	arm := testELF{typ: elf.ET_EXEC, machine: elf.EM_AARCH64, notes: elfNote("Xen", 18, []byte{1, 2, 3, 4})}.bytes(t)

	tests := []struct {
		name    string
		bz      []byte
		want    []byte
		wantErr string
	}{
		{"lz4", fakeBzImage(27, lz4Legacy(t, vmlinux), len(vmlinux)), vmlinux, ""},
		{"lz4 big", fakeBzImage(30, lz4Legacy(t, big), len(big)), big, ""},
		{"gzip", fakeBzImage(27, gzipped(t, vmlinux), len(vmlinux)), vmlinux, ""},
		{"setup_sects 0 means 4", fakeBzImage(0, gzipped(t, vmlinux), len(vmlinux)), vmlinux, ""},
		{"xz", fakeBzImage(27, append(append([]byte(nil), magicXZ...), 1, 2, 3), 10), nil, "compressed with xz"},
		{"zstd", fakeBzImage(27, append(append([]byte(nil), magicZstd...), 1, 2, 3), 10), nil, "compressed with zstd"},
		{"unknown", fakeBzImage(27, []byte("hello world"), 10), nil, "unknown format"},
		{"no PVH note", fakeBzImage(27, gzipped(t, noPVH), len(noPVH)), nil, "no PVH entry point"},
		{"not x86", fakeBzImage(27, gzipped(t, arm), len(arm)), nil, "want x86-64"},
		{"not ELF", fakeBzImage(27, gzipped(t, []byte("just bytes")), 10), nil, "not an ELF vmlinux"},
		{"not a bzImage", make([]byte, 4096), nil, "not an x86 bzImage"},
		{"already ELF", vmlinux, nil, "already an ELF"},
		{"short", []byte("MZ"), nil, "not an x86 bzImage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, format, err := bootKernel(vm.AMD64, tt.bz)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if format != FormatVmlinuxPVH {
				t.Errorf("format %q", format)
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("got %d bytes, want the %d-byte vmlinux", len(got), len(tt.want))
			}
		})
	}
}

func TestBzImagePayloadOutOfBounds(t *testing.T) {
	bz := fakeBzImage(27, gzipped(t, pvhVmlinux(t)), 1)
	binary.LittleEndian.PutUint32(bz[0x24c:], 1<<30)
	if _, err := vmlinuxFromBzImage(bz); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("error %v, want payload outside the file", err)
	}
	binary.LittleEndian.PutUint16(bz[0x206:], 0x0206)
	if _, err := vmlinuxFromBzImage(bz); err == nil || !strings.Contains(err.Error(), "older than 2.08") {
		t.Fatalf("error %v, want old boot protocol", err)
	}
}

// fakeARM64Image is an arm64 Image header followed by some code.
func fakeARM64Image() []byte {
	img := make([]byte, 0x40+1000)
	copy(img[0x38:], arm64ImageMagic)
	for i := 0x40; i < len(img); i++ {
		img[i] = byte(i)
	}
	return img
}

func TestARM64Image(t *testing.T) {
	img := fakeARM64Image()
	zboot := append([]byte("MZ\x00\x00zimg"), make([]byte, 100)...)
	tests := []struct {
		name    string
		in      []byte
		want    []byte
		wantErr string
	}{
		{"gzip", gzipped(t, img), img, ""},
		{"uncompressed", img, img, ""},
		{"gzip of something else", gzipped(t, make([]byte, 200)), nil, "no Image header"},
		{"zboot", zboot, nil, "EFI zboot"},
		{"bzImage", fakeBzImage(27, gzipped(t, pvhVmlinux(t)), 1), nil, "neither"},
		{"empty", nil, nil, "neither"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, format, err := bootKernel(vm.ARM64, tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if format != FormatARM64Image || !bytes.Equal(got, tt.want) {
				t.Errorf("got format %q and %d bytes", format, len(got))
			}
		})
	}
}

func TestHasNoteTruncated(t *testing.T) {
	n := elfNote("Xen", 18, []byte{1, 2, 3, 4})
	for i := range n {
		if hasNote(n[:i], binary.LittleEndian, "Xen", 18) {
			t.Fatalf("a note truncated to %d bytes was found", i)
		}
	}
	if !hasNote(n, binary.LittleEndian, "Xen", 18) {
		t.Fatal("note not found")
	}
}
