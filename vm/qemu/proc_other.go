//go:build !linux

package qemu

import (
	"os"
	"syscall"
)

// sysProcAttr puts QEMU in its own process group, so a terminal's Ctrl-C
// reaches us and not QEMU. Without Linux's Pdeathsig, a QEMU can outlive a
// crashed parent here.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// killProcess kills QEMU.
func killProcess(p *os.Process) error { return p.Kill() }

// kernelRelease is empty: KVM probes happen on Linux only.
func kernelRelease() string { return "" }
