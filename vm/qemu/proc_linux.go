package qemu

import (
	"os"
	"strings"
	"syscall"
)

// sysProcAttr puts QEMU in its own process group, so a terminal's Ctrl-C
// reaches us and not QEMU (Stop decides how QEMU ends), and has the kernel
// SIGKILL it when our thread dies, so no QEMU outlives us.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killProcess kills QEMU's process group (QEMU and any helper it ran).
// Callers make sure the process has not been reaped yet.
func killProcess(p *os.Process) error {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return p.Kill()
	}
	return nil
}

// kernelRelease is the host kernel release (uname -r).
func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
