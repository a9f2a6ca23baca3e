package qemu

import (
	"path/filepath"

	"github.com/airlock-dev/airlock/internal/confine"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/disk"
)

// systemReads are what QEMU reads of the host's own files: its libraries
// and modules, the dynamic loader's cache, and the NUMA and CPU layout it
// sizes itself by. /proc is not among them: it would show the user's
// other processes, their command lines and environments.
var systemReads = []string{"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc",
	"/sys/devices/system", "/sys/bus"}

// devices are the device files QEMU may open and control.
var devices = []string{"/dev/kvm", "/dev/vhost-vsock", "/dev/null", "/dev/zero", "/dev/urandom"}

// Confinement is what a process running the one machine of spec may still
// reach once it confines itself (Config.ConfineProcess): the system's
// programs and libraries, QEMU and its firmware, the machine's kernel,
// initrd and disks (an overlay's backing files read-only), the saved
// state it restores from, and its run directory; TCP not at all unless
// the machine has NAT. Everything else of the host (the user's files,
// the rest of the Airlock home, other sandboxes) can no longer be opened.
func (b *Backend) Confinement(prog string, spec vm.Spec, host Host, state string) confine.Rules {
	r := confine.Rules{
		Read:    append(append([]string(nil), systemReads...), filepath.Dir(prog), b.cfg.FirmwareDir, spec.Kernel),
		Write:   []string{spec.StateDir},
		Devices: devices,
		NoTCP:   spec.Network != vm.NetworkNAT,
	}
	add := func(list *[]string, p string) {
		if p != "" {
			*list = append(*list, p)
		}
	}
	add(&r.Read, b.cfg.QEMUDir)
	add(&r.Read, spec.Initrd)
	add(&r.Read, host.QBoot)
	add(&r.Read, state)
	// QEMU opens the RAM it restores from read-write, even mapped
	// private (QEMU 7.2 has no writable private mapping of a read-only
	// file): it never writes it.
	add(&r.Write, host.Memory.File)
	for _, d := range spec.Disks {
		if d.ReadOnly {
			r.Read = append(r.Read, d.Path)
		} else {
			r.Write = append(r.Write, d.Path)
		}
		// An overlay's chain of backing files, read-only.
		p := d.Path
		for range 8 {
			back, err := disk.Backing(p)
			if err != nil || back == "" {
				break
			}
			r.Read = append(r.Read, back)
			p = back
		}
	}
	return r
}

// confinement is Confinement when Config.ConfineProcess asks for it, else
// nil.
func (b *Backend) confinement(prog string, spec vm.Spec, host Host, state string) *confine.Rules {
	if !b.cfg.ConfineProcess {
		return nil
	}
	r := b.Confinement(prog, spec, host, state)
	return &r
}
