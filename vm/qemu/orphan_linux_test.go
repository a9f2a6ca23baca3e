package qemu

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/vm"
)

// TestNoOrphanQEMU kills (SIGKILL) a process that started a machine and
// checks that the kernel takes its QEMU down too (Pdeathsig).
func TestNoOrphanQEMU(t *testing.T) {
	if os.Getenv("AIRLOCK_QEMU_ORPHAN_HELPER") == "1" {
		orphanHelper(t)
		return
	}
	needVM(t)
	noOrphans(t, "TestNoOrphanQEMU", "QEMU-PID ")
}

// TestNoOrphanVirtiofsd: the same for the virtiofsd of a share.
func TestNoOrphanVirtiofsd(t *testing.T) {
	if os.Getenv("AIRLOCK_QEMU_ORPHAN_HELPER") == "1" {
		orphanHelper(t)
		return
	}
	needVM(t)
	needVirtiofsd(t)
	noOrphans(t, "TestNoOrphanVirtiofsd", "VIRTIOFSD-PID ")
}

// noOrphans runs test as a helper process that starts a machine and
// prints its pids, kills the helper, and checks the pid after prefix dies.
func noOrphans(t *testing.T, test, prefix string) {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), "AIRLOCK_QEMU_ORPHAN_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pid := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if s, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), prefix); ok {
			pid, _ = strconv.Atoi(s)
			break
		}
	}
	if pid == 0 {
		t.Fatalf("helper did not report %q: %v", prefix, sc.Err())
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open qemu: %v", err)
	}
	defer unix.Close(pidfd)

	cmd.Process.Kill()
	cmd.Wait()
	// A pidfd becomes readable when its process exits.
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int((30 * time.Second).Milliseconds()))
	if err != nil || n != 1 {
		unix.Kill(pid, unix.SIGKILL)
		t.Fatalf("%s%d outlived the process that started it (poll: %d, %v)", prefix, pid, n, err)
	}
}

func orphanHelper(t *testing.T) {
	v := needVM(t)
	spec := v.spec(t, initSleep)
	if t.Name() == "TestNoOrphanVirtiofsd" {
		spec.Shares = []vm.Share{{Tag: "t", HostPath: t.TempDir()}}
	}
	m, err := testBackend(t).Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("QEMU-PID %d\n", m.(*machine).cmd.Process.Pid)
	for _, d := range m.(*machine).fsds {
		fmt.Printf("VIRTIOFSD-PID %d\n", d.cmd.Process.Pid)
	}
	m.Wait() // until the parent kills us
}
