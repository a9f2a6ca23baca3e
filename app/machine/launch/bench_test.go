package launch_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cavaliergopher/cpio"

	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
)

// BenchmarkBootToReady compares `airlock exec -- true` (process start to
// exit: boot, module loading, first contact, SSH, the command, power-off)
// with a bare boot of the same kernel under the same QEMU settings to a
// trivial init that powers off at once. scripts/bench-boot prints the ratio.
func BenchmarkBootToReady(b *testing.B) {
	im := testenv.Image(b, vm.AMD64)
	home := testenv.Home(b)

	b.Run("bare", func(b *testing.B) {
		initrd := filepath.Join(b.TempDir(), "bare.cpio")
		if err := writeBareInitrd(initrd); err != nil {
			b.Skipf("no trivial init: %v", err)
		}
		be := backend(&testing.T{}, home)
		for b.Loop() {
			dir, err := os.MkdirTemp(filepath.Join(home, "run"), "bench")
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			m, err := be.Start(ctx, vm.Spec{
				Name: "bench-bare", Arch: vm.AMD64, Kernel: im.Kernel, Initrd: initrd,
				Cmdline: im.Cmdline, StateDir: dir,
			})
			if err != nil {
				cancel()
				b.Fatal(err)
			}
			if err := m.Wait(); err != nil {
				b.Fatalf("bare boot: %v\n%s", err, vm.TailConsole(m.ConsoleLog(), 10))
			}
			cancel()
			os.RemoveAll(dir)
		}
	})

	b.Run("exec-true", func(b *testing.B) {
		bin := filepath.Join(b.TempDir(), "airlock")
		build := exec.Command("go", "build", "-o", bin, "./app")
		build.Dir = testenv.RepoRoot(b)
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("build airlock: %v\n%s", err, out)
		}
		for b.Loop() {
			cmd := exec.Command(bin, "exec", "-q", "--cold", "--", "true")
			cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+home)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("airlock exec -- true: %v\n%s", err, out)
			}
		}
	})
}

// writeBareInitrd writes an initramfs whose /init is a busybox shell script
// that powers the machine off immediately. It needs the host's static
// busybox (Debian: busybox-static).
func writeBareInitrd(path string) error {
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	w := cpio.NewWriter(&buf)
	add := func(name string, mode cpio.FileMode, data []byte) error {
		if err := w.WriteHeader(&cpio.Header{Name: name, Mode: mode, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err := w.Write(data)
		return err
	}
	script := []byte("#!/bin/busybox sh\n/bin/busybox poweroff -f\n")
	for _, e := range []struct {
		name string
		mode cpio.FileMode
		data []byte
	}{
		{"bin", cpio.TypeDir | 0o755, nil},
		{"bin/busybox", cpio.TypeReg | 0o755, bb},
		{"dev", cpio.TypeDir | 0o755, nil},
		{"init", cpio.TypeReg | 0o755, script},
	} {
		if err := add(e.name, e.mode, e.data); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
