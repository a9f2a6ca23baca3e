package disk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/airlock-dev/airlock/testkit/testenv"

	"github.com/google/go-cmp/cmp"
)

func TestCloneFallbackOrder(t *testing.T) {
	fail := func(m Method) cloner {
		return cloner{method: m, format: Raw, clone: func(_ context.Context, _, dst string) error {
			os.WriteFile(dst, []byte("half"), 0o644) // a failed attempt's leftovers
			return errors.New("not here")
		}}
	}
	ok := func(m Method, format string) cloner {
		return cloner{method: m, format: format, clone: func(_ context.Context, src, dst string) error {
			return os.WriteFile(dst, []byte("clone"), 0o644)
		}}
	}
	tests := []struct {
		name    string
		plan    []cloner
		want    Result
		wantErr bool
	}{
		{"first works", []cloner{ok(MethodReflink, Raw), ok(MethodOverlay, QCOW2)}, Result{MethodReflink, Raw}, false},
		{"falls back", []cloner{fail(MethodReflink), ok(MethodOverlay, QCOW2)}, Result{MethodOverlay, QCOW2}, false},
		{"none works", []cloner{fail(MethodReflink), fail(MethodOverlay)}, Result{}, true},
		{"nothing to try", nil, Result{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "base.img"), filepath.Join(dir, "clone.img")
			if err := os.WriteFile(src, []byte("base"), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := cloneWith(context.Background(), src, dst, tt.plan)
			if tt.wantErr {
				if !errors.Is(err, ErrNoClone) {
					t.Fatalf("err = %v, want ErrNoClone", err)
				}
				if _, err := os.Lstat(dst); err == nil {
					t.Error("a failed clone left its file behind")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCloneRefusesExisting(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(src, []byte("a"), 0o644)
	os.WriteFile(dst, []byte("b"), 0o644)
	if _, err := Clone(context.Background(), src, dst, Options{Overlay: true}); err == nil {
		t.Fatal("Clone overwrote an existing file")
	}
	if b, _ := os.ReadFile(dst); string(b) != "b" {
		t.Errorf("dst changed to %q", b)
	}
}

func TestPlanOrder(t *testing.T) {
	var got []Method
	for _, c := range plan(Options{Overlay: true}) {
		got = append(got, c.method)
	}
	want := []Method{MethodOverlay}
	switch runtime.GOOS {
	case "linux":
		want = []Method{MethodReflink, MethodOverlay}
	case "darwin":
		want = []Method{MethodClone, MethodOverlay}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	for _, c := range plan(Options{}) {
		if c.method == MethodOverlay {
			t.Error("overlay planned though not allowed")
		}
	}
}

func TestOverlayArgs(t *testing.T) {
	got := OverlayArgs("/h/images/full/amd64/rootfs.img", "/h/sandboxes/x/root.img")
	want := []string{"create", "-q", "-f", "qcow2", "-F", "raw", "-b", "/h/images/full/amd64/rootfs.img", "/h/sandboxes/x/root.img"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
}

// TestCloneIsCopyOnWrite clones a 64 MiB image with written data on this
// host's file system (a reflink where it can, a qcow2 overlay otherwise)
// and checks the clone reads the same and takes a small fraction of the
// base's blocks.
func TestCloneIsCopyOnWrite(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		testenv.Skip(t, testenv.QEMUImg, "qemu-img not installed (scripts/setup-debian installs QEMU)")
	}
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "base.img"), filepath.Join(dir, "clone.img")
	data := make([]byte, 64<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Clone(context.Background(), src, dst, Options{Overlay: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cloned by %s (%s)", res.Method, res.Format)
	if f, err := Format(dst); err != nil || f != res.Format {
		t.Errorf("Format(clone) = %q, %v; want %q", f, err, res.Format)
	}
	if f, err := Format(src); err != nil || f != Raw {
		t.Errorf("Format(base) = %q, %v; want raw", f, err)
	}
	if res.Format == QCOW2 {
		out, err := exec.Command("qemu-img", "compare", "-f", "raw", "-F", "qcow2", src, dst).CombinedOutput()
		if err != nil {
			t.Fatalf("qemu-img compare: %v\n%s", err, out)
		}
	} else {
		b, err := os.ReadFile(dst)
		if err != nil || string(b) != string(data) {
			t.Fatalf("the clone reads differently (%v)", err)
		}
	}
	base, clone := allocatedBytes(t, src), allocatedBytes(t, dst)
	t.Logf("allocated: base %d, clone %d bytes", base, clone)
	if res.Method != MethodReflink && clone*10 > base {
		t.Errorf("the clone takes %d bytes of the host's disk, the base %d: not copy-on-write", clone, base)
	}
}

// allocatedBytes is the bytes of the host's disk a file takes (st_blocks).
func allocatedBytes(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return Allocated(fi)
}

// TestKeepAndCloneAnOverlay: a qcow2 overlay is kept as a copy of itself,
// and a clone of the kept overlay is an overlay on it that reads the same.
func TestKeepAndCloneAnOverlay(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		testenv.Skip(t, testenv.QEMUImg, "qemu-img not installed")
	}
	dir := t.TempDir()
	base := filepath.Join(dir, "base.img")
	if err := os.WriteFile(base, bytes.Repeat([]byte("base"), 1<<16), 0o644); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(dir, "first.img")
	if _, err := cloneWith(t.Context(), base, first, plan(Options{Overlay: true})[len(plan(Options{Overlay: true}))-1:]); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("qemu-io", "-f", "qcow2", "-c", "write -P 0x61 0 4096", first).CombinedOutput(); err != nil {
		testenv.Skip(t, testenv.QEMUImg, fmt.Sprintf("qemu-io: %v %s", err, out))
	}
	kept := filepath.Join(dir, "kept.img")
	res, err := Keep(t.Context(), first, kept)
	if err != nil || res.Format != QCOW2 {
		t.Fatalf("Keep = %+v, %v", res, err)
	}
	clone := filepath.Join(dir, "clone.img")
	res, err = Clone(t.Context(), kept, clone, Options{Overlay: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Method == MethodOverlay {
		if out, err := exec.Command("qemu-img", "info", clone).CombinedOutput(); err != nil || !bytes.Contains(out, []byte("backing file format: qcow2")) {
			t.Errorf("clone of an overlay: %v\n%s", err, out)
		}
	}
	if out, err := exec.Command("qemu-img", "compare", first, clone).CombinedOutput(); err != nil {
		t.Errorf("the clone of the kept overlay differs from the overlay: %v\n%s", err, out)
	}
}

// TestBacking reads an overlay's backing file as qemu-img wrote it, and
// refuses a header naming more than qcow2 allows.
func TestBacking(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		testenv.Skip(t, testenv.QEMUImg, "qemu-img not installed (scripts/setup-debian installs QEMU)")
	}
	dir := t.TempDir()
	base, over := filepath.Join(dir, "base.img"), filepath.Join(dir, "over.qcow2")
	if err := os.WriteFile(base, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("qemu-img", OverlayArgs(base, over)...).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v\n%s", err, out)
	}
	if b, err := Backing(over); err != nil || b != base {
		t.Errorf("Backing(overlay) = %q, %v; want %q", b, err, base)
	}
	if b, err := Backing(base); err != nil || b != "" {
		t.Errorf("Backing(raw) = %q, %v; want none", b, err)
	}
	// A header claiming a 64 KiB name is not QEMU's.
	f, err := os.OpenFile(over, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0, 1, 0, 0}, 16)
	f.Close()
	if b, err := Backing(over); err == nil {
		t.Errorf("Backing(forged header) = %q, want an error", b)
	}
}
