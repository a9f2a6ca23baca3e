package qemu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/testkit/testenv"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/vm"
)

func TestVirtiofsdArgs(t *testing.T) {
	got := VirtiofsdArgs("/usr/lib/qemu/virtiofsd", vm.Share{Tag: "workspace", HostPath: `/sb/a,b\c/staging`})
	want := []string{"/usr/lib/qemu/virtiofsd", "--fd=3",
		"-o", `source=/sb/a\,b\\c/staging`, "-o", "sandbox=namespace", "-o", "cache=auto",
		"-o", "no_xattr", "-o", "no_posix_lock", "-o", "no_flock", "-o", "log_level=warn"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("VirtiofsdArgs (-want +got):\n%s", diff)
	}
}

func TestValidateShares(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	spec := vm.Spec{Arch: vm.AMD64, Kernel: file, StateDir: dir, Shares: []vm.Share{
		{Tag: "ok", HostPath: dir},
		{Tag: "ro", HostPath: dir, ReadOnly: true},
		{Tag: "gone", HostPath: filepath.Join(dir, "nope")},
		{Tag: "file", HostPath: file},
	}}
	b := New(Config{Virtiofsd: filepath.Join(dir, "no-virtiofsd"), Accel: TCG})
	err := b.validateShares(spec)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"qemu-system-common", "read-only", "nope", "is not a directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if !errors.Is(err, vm.ErrHypervisorMissing) || !errors.Is(err, vm.ErrNotSupported) {
		t.Errorf("error is not ErrHypervisorMissing and ErrNotSupported: %v", err)
	}
	if _, err := b.Start(t.Context(), spec); err == nil || !strings.Contains(err.Error(), "sudo apt-get install qemu-system-common") {
		t.Errorf("Start without virtiofsd = %v, want the apt package named", err)
	}
}

// initShare mounts the share tagged "t", writes a file through it,
// reads one the host put there, and powers off.
const initShare = initPrologue + `for m in fuse virtiofs; do
  f=$(find /lib/modules -name "$m.ko*" | head -n 1); [ -n "$f" ] && insmod "$f"
done
mkdir -p /mnt && mount -t virtiofs t /mnt && echo "MOUNTED $(cat /mnt/from-host)"
echo from-guest > /mnt/from-guest
ln -s /etc /mnt/etc-link
sync; poweroff -f
`

func needVirtiofsd(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(DefaultVirtiofsd); err != nil {
		testenv.Skip(t, testenv.Virtiofsd, fmt.Sprintf("no virtiofsd: %v (Debian: qemu-system-common)", err))
	}
	if os.Geteuid() != 0 {
		testenv.Skip(t, testenv.Root, "virtiofsd needs root")
	}
}

// virtiofsdSurvivors lists virtiofsd processes serving dir.
func virtiofsdSurvivors(dir string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var found []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, "virtiofsd") && strings.Contains(cmd, dir) {
			found = append(found, filepath.Base(filepath.Dir(p))+": "+cmd)
		}
	}
	return found
}

func TestShareBootToPowerOff(t *testing.T) {
	v := needVM(t)
	needVirtiofsd(t)
	spec := v.spec(t, initShare)
	share := t.TempDir()
	os.WriteFile(filepath.Join(share, "from-host"), []byte("hello-guest\n"), 0o644)
	spec.Shares = []vm.Share{{Tag: "t", HostPath: share}}
	m, err := testBackend(t).Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if !consoleHas(m.ConsoleLog(), "MOUNTED hello-guest") {
		t.Errorf("the guest did not mount the share; console:\n%s", strings.Join(vm.TailConsole(m.ConsoleLog(), 15), "\n"))
	}
	if b, err := os.ReadFile(filepath.Join(share, "from-guest")); err != nil || string(b) != "from-guest\n" {
		t.Errorf("file written by the guest: %q, %v", b, err)
	}
	if target, err := os.Readlink(filepath.Join(share, "etc-link")); err != nil || target != "/etc" {
		t.Errorf("link made by the guest: %q, %v", target, err)
	}
	checkGone(t, m, spec)
	if p := virtiofsdSurvivors(share); len(p) > 0 {
		t.Errorf("virtiofsd survived:\n%s", strings.Join(p, "\n"))
	}
	if _, err := os.Lstat(ShareSocket(spec, 0)); err == nil {
		t.Error("share socket left behind")
	}
}

// TestShareDaemonDeathEndsMachine: a guest whose share's daemon is gone
// would hang on its next file operation; the machine is ended, saying why.
func TestShareDaemonDeathEndsMachine(t *testing.T) {
	v := needVM(t)
	needVirtiofsd(t)
	spec := v.spec(t, initSleep)
	spec.Shares = []vm.Share{{Tag: "t", HostPath: t.TempDir()}}
	started, err := testBackend(t).Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	m := started.(*machine)
	m.fsds[0].cmd.Process.Kill()
	done := make(chan error, 1)
	go func() { done <- m.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "virtiofsd of share t exited") {
			t.Errorf("Wait = %v, want the machine killed because virtiofsd exited", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the machine outlived its share's daemon")
	}
	checkGone(t, m, spec)
}

// TestStartShareCleansUpOnQEMUFailure: when QEMU cannot start, the
// virtiofsd already running for its share goes too.
func TestStartShareCleansUpOnQEMUFailure(t *testing.T) {
	v := needVM(t)
	needVirtiofsd(t)
	spec := v.spec(t, initPowerOff)
	share := t.TempDir()
	spec.Shares = []vm.Share{{Tag: "t", HostPath: share}}
	spec.Disks = []vm.Disk{{Path: spec.Initrd, Format: "qcow2"}} // not a qcow2 image: QEMU exits
	if _, err := testBackend(t).Start(t.Context(), spec); err == nil {
		t.Fatal("Start worked with a bad disk")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(virtiofsdSurvivors(share)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if p := virtiofsdSurvivors(share); len(p) > 0 {
		t.Errorf("virtiofsd survived a failed start:\n%s", strings.Join(p, "\n"))
	}
}
