package qemu

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
)

// Real-VM tests boot the minimal image's kernel and initramfs (built once
// per run by testkit/testenv), or AIRLOCK_TEST_KERNEL (an uncompressed
// amd64 vmlinux) with AIRLOCK_TEST_INITRD when set, plus an appended cpio
// holding the test's own /init. The initrd must provide /bin/busybox and, for the link and
// power-button tests, the virtio_pci, virtio_console, button and evdev
// modules under /lib/modules (or built in).

// initPrologue mounts the basics, loads the modules and powers the guest
// off when the ACPI power button is pressed (QMP system_powerdown).
const initPrologue = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t devtmpfs dev /dev; mount -t proc proc /proc; mount -t sysfs sys /sys
for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_console button evdev; do
  f=$(find /lib/modules -name "$m.ko*" | head -n 1); [ -n "$f" ] && insmod "$f"
done
for p in /sys/class/virtio-ports/*; do [ "$(cat $p/name 2>/dev/null)" = airlock.link ] && port=/dev/${p##*/}; done
`

// powerButton powers the guest off on a power button press. The device is
// opened before the script goes on, so no press after it is missed.
const powerButton = `for e in /sys/class/input/event*; do
  if grep -q "Power Button" $e/device/name 2>/dev/null; then
    exec 4</dev/input/${e##*/}
    (dd of=/dev/null bs=64 count=1 <&4 2>/dev/null && echo POWER-BUTTON && poweroff -f) &
  fi
done
`

// Guest programs for the tests.
const (
	initPowerOff = initPrologue + "echo HELLO-INIT\npoweroff -f\n"
	// initEcho says READY on the link, then echoes it back. A read of the
	// port while the host is not connected is end of file, so cat ends
	// when the host hangs up between two of its reads: it starts again.
	initEcho = initPrologue + powerButton + `echo "HELLO-ECHO $port"
exec 3<>$port; echo READY >&3; while :; do cat <&3 >&3; sleep 1; done
`
	// initDeaf says READY on the link and ignores the power button.
	initDeaf = initPrologue + `exec 3<>$port; echo READY >&3; while :; do sleep 3600; done
`
	initPanic = initPrologue + "echo c > /proc/sysrq-trigger\n"
	initSleep = initPrologue + "echo HELLO-SLEEP\nwhile :; do sleep 3600; done\n"
	initProbe = initPrologue + "grep -q airlock.probe /proc/cmdline && echo " + ProbeMarker + "\npoweroff -f\n"
)

type testVM struct {
	arch           vm.Arch
	kernel, initrd string
}

// needVM returns the amd64 test kernel and initrd, or skips.
func needVM(t testing.TB) testVM {
	t.Helper()
	v := needVMArch(t, "AIRLOCK_TEST_KERNEL", "AIRLOCK_TEST_INITRD", vm.AMD64)
	if runtime.GOARCH != "amd64" {
		testenv.Skip(t, testenv.AMD64, "the lifecycle tests boot an amd64 kernel; this host is "+runtime.GOARCH)
	}
	return v
}

func needVMArch(t testing.TB, kernelEnv, initrdEnv string, arch vm.Arch) testVM {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a real VM; skipped with -short")
	}
	k, i := os.Getenv(kernelEnv), os.Getenv(initrdEnv)
	if k == "" || i == "" {
		// The minimal image's initramfs has busybox and the modules; the
		// tests' appended /init replaces the guest agent.
		if ok, why := testenv.ForeignArchReady(arch); !ok {
			testenv.Skip(t, testenv.ForeignArch, why)
		}
		im := testenv.Image(t, arch)
		k, i = im.Kernel, im.Initrd
	}
	return testVM{arch: arch, kernel: k, initrd: i}
}

// spec is a Spec booting init, with a fresh state dir.
func (v testVM) spec(t testing.TB, init string) vm.Spec {
	t.Helper()
	dir := t.TempDir()
	initrd := filepath.Join(dir, "initrd")
	base, err := os.ReadFile(v.initrd)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.Write(base)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	writeCpio(&b, "init", 0o100755, []byte(init))
	if err := os.WriteFile(initrd, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return vm.Spec{Name: t.Name(), Arch: v.arch, Kernel: v.kernel, Initrd: initrd,
		Cmdline: "panic=-1", MemoryMiB: 256, StateDir: dir, Link: vm.Link{Kind: vm.LinkSerial}}
}

// writeCpio appends a newc archive of one file and the trailer.
func writeCpio(w *bytes.Buffer, name string, mode uint32, data []byte) {
	entry := func(name string, mode uint32, data []byte) {
		fmt.Fprintf(w, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			1, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
		w.WriteString(name + "\x00")
		for w.Len()%4 != 0 {
			w.WriteByte(0)
		}
		w.Write(data)
		for w.Len()%4 != 0 {
			w.WriteByte(0)
		}
	}
	entry(name, mode, data)
	entry("TRAILER!!!", 0, nil)
}

// testAccel is AIRLOCK_TEST_ACCEL, else KVM where the host trusts it
// without a probe (the test initrds have no guest agent to answer one),
// else TCG.
func testAccel() Accel {
	if a := os.Getenv("AIRLOCK_TEST_ACCEL"); a != "" {
		return Accel(a)
	}
	if c := ChooseAccel("", hostKVMFacts("/", vm.AMD64, hostArch())); c.Accel == KVM && !c.NeedProbe {
		return KVM
	}
	return TCG
}

func testBackend(t *testing.T) *Backend {
	return New(Config{Accel: testAccel(), Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// qemuSurvivors lists QEMU processes whose command line names dir.
func qemuSurvivors(t *testing.T, dir string) []string {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var found []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, "qemu-system") && strings.Contains(cmd, dir) {
			found = append(found, filepath.Base(filepath.Dir(p))+": "+cmd)
		}
	}
	return found
}

func checkGone(t *testing.T, m vm.Machine, spec vm.Spec) {
	t.Helper()
	if s := m.State(); s != vm.StateStopped {
		t.Errorf("State = %v after Wait, want stopped", s)
	}
	if p := qemuSurvivors(t, spec.StateDir); len(p) > 0 {
		t.Errorf("qemu survived:\n%s", strings.Join(p, "\n"))
	}
	for _, s := range []string{QMPSocket(spec), LinkSocket(spec)} {
		if _, err := os.Lstat(s); err == nil {
			t.Errorf("socket %s left behind", s)
		}
	}
}

// readLine reads one line from the link, bounded by a deadline.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	s, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read link: %v", err)
	}
	return strings.TrimRight(s, "\r\n")
}

func TestBootToPowerOff(t *testing.T) {
	v := needVM(t)
	spec := v.spec(t, initPowerOff)
	start := time.Now()
	m, err := testBackend(t).Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if k := m.LinkKind(); k != vm.LinkSerial {
		t.Errorf("LinkKind = %q, want serial", k)
	}
	if err := m.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	t.Logf("boot to power-off under %s: %v", testAccel(), time.Since(start).Round(time.Millisecond))
	console, _ := os.ReadFile(m.ConsoleLog())
	for _, want := range []string{"Linux version", "HELLO-INIT"} {
		if !bytes.Contains(console, []byte(want)) {
			t.Errorf("console has no %q:\n%s", want, console)
		}
	}
	checkGone(t, m, spec)
	if err := m.Stop(t.Context()); err != nil {
		t.Errorf("Stop after power-off: %v", err)
	}
	if _, err := m.DialLink(t.Context()); !errors.Is(err, vm.ErrNotRunning) {
		t.Errorf("DialLink after power-off: %v, want ErrNotRunning", err)
	}
}

// TestBootToPowerOffARM64 boots an arm64 guest, emulated on other hosts.
func TestBootToPowerOffARM64(t *testing.T) {
	v := needVMArch(t, "AIRLOCK_TEST_KERNEL_ARM64", "AIRLOCK_TEST_INITRD_ARM64", vm.ARM64)
	spec := v.spec(t, initEcho)
	b := testBackend(t)
	if hostArch() != vm.ARM64 {
		b.cfg.Accel = TCG
	}
	start := time.Now()
	m, err := b.Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, m)
	t.Logf("arm64 boot to READY on the link under %s: %v", b.cfg.Accel, time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	m.Stop(ctx) // arm64 cloud kernels lack gpio-keys: the power button may go unheard
	m.Wait()
	console, _ := os.ReadFile(m.ConsoleLog())
	for _, want := range []string{"Linux version", "HELLO-ECHO /dev/vport"} {
		if !bytes.Contains(console, []byte(want)) {
			t.Errorf("console has no %q:\n%s", want, console)
		}
	}
	checkGone(t, m, spec)
}

// BenchmarkBootToPowerOff times cold boots to a guest power-off, kernel
// quiet and verbose, amd64 and (when its test kernel is set) arm64.
func BenchmarkBootToPowerOff(b *testing.B) {
	for _, arch := range []vm.Arch{vm.AMD64, vm.ARM64} {
		for _, cmdline := range []string{"panic=-1 quiet", "panic=-1"} {
			b.Run(fmt.Sprintf("%s/%s", arch, strings.ReplaceAll(cmdline, " ", "_")), func(b *testing.B) {
				v := needVMArch(b, "AIRLOCK_TEST_KERNEL", "AIRLOCK_TEST_INITRD", arch)
				if arch == vm.ARM64 {
					v = needVMArch(b, "AIRLOCK_TEST_KERNEL_ARM64", "AIRLOCK_TEST_INITRD_ARM64", arch)
				}
				backend := New(Config{Accel: testAccel()})
				if arch != hostArch() {
					backend.cfg.Accel = TCG
				}
				spec := v.spec(b, initPowerOff)
				spec.Cmdline = cmdline
				for b.Loop() {
					m, err := backend.Start(b.Context(), spec)
					if err != nil {
						b.Fatal(err)
					}
					if err := m.Wait(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func TestGuestPanicIsAnError(t *testing.T) {
	v := needVM(t)
	spec := v.spec(t, initPanic)
	m, err := testBackend(t).Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Wait()
	t.Logf("Wait: %v", err)
	if err == nil || !strings.Contains(err.Error(), "reset itself") {
		t.Errorf("Wait after a kernel panic = %v, want the guest reset error", err)
	}
	if !consoleHas(m.ConsoleLog(), "Kernel panic") {
		t.Errorf("console has no kernel panic: %q", vm.TailConsole(m.ConsoleLog(), 5))
	}
	checkGone(t, m, spec)
}

func TestCancelKills(t *testing.T) {
	v := needVM(t)
	spec := v.spec(t, initSleep)
	ctx, cancel := context.WithCancel(t.Context())
	m, err := testBackend(t).Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if s := m.State(); s != vm.StateRunning {
		t.Errorf("State = %v after Start, want running", s)
	}
	cancel()
	err = m.Wait()
	if err == nil || !strings.Contains(err.Error(), "context") {
		t.Errorf("Wait = %v, want killed because the context ended", err)
	}
	checkGone(t, m, spec)
}

func TestBootThatNeverFinishesIsKilled(t *testing.T) {
	v := needVM(t)
	spec := v.spec(t, initSleep)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Second)
	defer cancel()
	m, err := testBackend(t).Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Wait(); err == nil {
		t.Error("Wait = nil for a killed machine")
	}
	checkGone(t, m, spec)
}

func TestSerialLinkEcho(t *testing.T) {
	v := needVM(t)
	spec := v.spec(t, initEcho)
	m, err := testBackend(t).Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		m.Stop(ctx)
	}()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := m.DialLink(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := m.DialLink(ctx); !errors.Is(err, vm.ErrLinkBusy) {
		t.Errorf("second DialLink = %v, want ErrLinkBusy", err)
	}
	r := bufio.NewReader(c)
	if got := readLine(t, r); got != "READY" {
		t.Fatalf("guest said %q, want READY", got)
	}
	payload := "hello airlock \x00\x01\xfe binary-safe"
	for i := range 3 {
		msg := fmt.Sprintf("%s %d\n", payload, i)
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatal(err)
		}
		if got := readLine(t, r); got+"\n" != msg {
			t.Errorf("echo = %q, want %q", got, msg)
		}
	}
	c.Close()

	// The link is free again; the guest's cat is still echoing.
	c, err = m.DialLink(ctx)
	if err != nil {
		t.Fatalf("DialLink after Close: %v", err)
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	io.WriteString(c, "again\n")
	if got := readLine(t, bufio.NewReader(c)); got != "again" {
		t.Errorf("echo after reconnect = %q", got)
	}
	c.Close()
}

func TestStopGraceful(t *testing.T) {
	v := needVM(t)
	spec := v.spec(t, initEcho)
	m, err := testBackend(t).Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, m)
	if s := m.State(); s != vm.StateRunning {
		t.Fatalf("State = %v before Stop, want running", s)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := m.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := m.Wait(); err != nil {
		t.Errorf("Wait after graceful Stop: %v", err)
	}
	if !consoleHas(m.ConsoleLog(), "POWER-BUTTON") {
		t.Errorf("guest did not see the power button; console: %q", vm.TailConsole(m.ConsoleLog(), 5))
	}
	if err := m.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	checkGone(t, m, spec)
}

func TestStopForced(t *testing.T) {
	v := needVM(t)
	spec := v.spec(t, initDeaf)
	m, err := testBackend(t).Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, m)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	done := make(chan error, 2)
	go func() { done <- m.Stop(ctx) }()
	go func() { done <- m.Stop(ctx) }()
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("Stop: %v", err)
		}
	}
	if err := m.Wait(); err == nil || !strings.Contains(err.Error(), "Stop") {
		t.Errorf("Wait after forced Stop = %v, want killed by Stop", err)
	}
	checkGone(t, m, spec)
}

// waitReady reads the guest's READY from the link, so the guest is up.
func waitReady(t *testing.T, m vm.Machine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := m.DialLink(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	if got := readLine(t, bufio.NewReader(c)); got != "READY" {
		t.Fatalf("guest said %q, want READY", got)
	}
}

func TestDescribeHost(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		testenv.Skip(t, testenv.QEMU, err.Error())
	}
	r, err := New(Config{}).Describe(t.Context(), vm.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if r.Hypervisor == "" || r.Accelerator == "" || r.Why == "" {
		t.Errorf("Describe left fields empty: %+v", r)
	}
}

func TestStartErrors(t *testing.T) {
	b := New(Config{QEMUDir: t.TempDir(), Accel: TCG})
	_, err := b.Start(t.Context(), vm.Spec{Kernel: "/nonexistent", StateDir: t.TempDir()})
	if !errors.Is(err, vm.ErrHypervisorMissing) || !strings.Contains(err.Error(), "apt-get install") {
		t.Errorf("Start without qemu = %v, want ErrHypervisorMissing with an install hint", err)
	}
}

func TestStartBadDevice(t *testing.T) {
	v := needVM(t)
	spec := v.spec(t, initPowerOff)
	spec.Disks = []vm.Disk{{Path: spec.Initrd, Format: "qcow2"}} // not a qcow2 image
	_, err := testBackend(t).Start(t.Context(), spec)
	t.Logf("Start: %v", err)
	if err == nil || !strings.Contains(err.Error(), "qcow2") {
		t.Errorf("Start = %v, want QEMU's complaint about the disk", err)
	}
	if p := qemuSurvivors(t, spec.StateDir); len(p) > 0 {
		t.Errorf("qemu survived: %q", p)
	}
}

func TestProbeBoot(t *testing.T) {
	v := needVM(t)
	b := testBackend(t)
	b.probeAccel = TCG // the probe's mechanics, not KVM's health
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if r := b.probeBoot(ctx, v.spec(t, initProbe)); !r.OK {
		t.Errorf("probe of a guest that answers: %+v", r)
	}
	if r := b.probeBoot(ctx, v.spec(t, initPowerOff)); r.OK || !strings.Contains(r.Why, ProbeMarker) {
		t.Errorf("probe of a guest that does not answer: %+v", r)
	}
	short, cancel2 := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel2()
	if r := b.probeBoot(short, v.spec(t, initSleep)); r.OK || !strings.Contains(r.Why, "in time") {
		t.Errorf("probe of a guest that hangs: %+v", r)
	}
}

// TestProbeBootKVM runs the real probe under KVM, where /dev/kvm opens,
// and checks its verdict and what the backend makes of it: a driver stock
// kernels run well on (kvm_intel, kvm_amd) must boot the guest; any
// verdict is a reason when negative, decides the accelerator, and is
// cached, so that the next choice reuses it without booting again.
func TestProbeBootKVM(t *testing.T) {
	v := needVM(t)
	facts := hostKVMFacts("/", vm.AMD64, hostArch())
	if facts.DevErr != nil {
		testenv.Skip(t, testenv.KVM, fmt.Sprintf("no KVM: %v", facts.DevErr))
	}
	spec := v.spec(t, initProbe)
	prober := testBackend(t)
	probes := 0
	var verdict ProbeResult
	b := New(Config{CacheDir: t.TempDir(), Logger: prober.log, Probe: func(ctx context.Context, s vm.Spec) ProbeResult {
		probes++
		start := time.Now()
		verdict = prober.probeBoot(ctx, s)
		t.Logf("KVM probe boot: %+v after %v", verdict, time.Since(start).Round(time.Millisecond))
		return verdict
	}})
	prog, err := b.program(vm.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	first := ChooseAccel(AccelAuto, facts)
	if !first.NeedProbe {
		// A trusted driver: the backend does not probe, so probe here.
		ctx, cancel := context.WithTimeout(t.Context(), DefaultProbeTimeout)
		defer cancel()
		if r := prober.probeBoot(ctx, spec); !r.OK {
			t.Fatalf("KVM with the %s: the probe boot failed: %s", first.Why, r.Why)
		}
		if c := b.accel(t.Context(), prog, spec); c.Accel != KVM || probes != 0 {
			t.Errorf("accel = %+v after %d probes, want KVM without a probe", c, probes)
		}
		return
	}
	c := b.accel(t.Context(), prog, spec)
	if probes != 1 {
		t.Fatalf("%d probe boots for an untrusted driver (%s), want 1", probes, first.Why)
	}
	if !verdict.OK && verdict.Why == "" {
		t.Errorf("a failed probe without a reason: %+v", verdict)
	}
	if want := map[bool]Accel{true: KVM, false: TCG}[verdict.OK]; c.Accel != want {
		t.Errorf("accel = %+v after the verdict %+v, want %s", c, verdict, want)
	}
	if again := b.accel(t.Context(), prog, spec); again != c || probes != 1 {
		t.Errorf("second accel = %+v after %d probe boots, want %+v from the cached verdict", again, probes, c)
	}
}
