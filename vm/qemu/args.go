package qemu

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/vm"
)

// Accel is a QEMU accelerator.
type Accel string

// Accelerators Airlock uses.
const (
	// AccelAuto lets the backend choose (Config.Accel only).
	AccelAuto Accel = ""
	// KVM is hardware virtualisation through /dev/kvm.
	KVM Accel = "kvm"
	// TCG is QEMU's CPU emulator: works everywhere, about 10x slower.
	TCG Accel = "tcg"
)

// SerialPortName is the name of the virtio-serial port that carries the
// guest link. It must equal guest.SerialPortName: vm/qemu does not import
// the guest packages, so the two are kept equal by hand.
const SerialPortName = "airlock.link"

// File descriptors QEMU inherits (exec.Cmd.ExtraFiles starts at fd 3). The
// backend binds and listens on the unix sockets itself before QEMU starts,
// so they exist the moment Start runs QEMU, with no waiting for QEMU to
// create them.
const (
	qmpFD     = 3 // listening QMP socket (StateDir/qmp.sock)
	linkFD    = 4 // listening serial-link socket, serial links only
	consoleFD = 5 // the write end of the console pipe, read by the backend
	ramFD     = 6 // the memfd holding shared guest RAM (Memory.Shared)
)

// Default file names inside Spec.StateDir.
const (
	qmpSocketName  = "qmp.sock"
	linkSocketName = "link.sock"
	consoleName    = "console.log"
)

// ShareSocket is the path of the vhost-user socket between QEMU and the
// virtiofsd of share i of spec: fs<i>.sock in the state dir.
func ShareSocket(spec vm.Spec, i int) string {
	return filepath.Join(spec.StateDir, fmt.Sprintf("fs%d.sock", i))
}

// Host is what Args needs to know about the host. It is plain data; the
// backend fills it in from probes (see Backend.Start), tests write it out.
type Host struct {
	// Accel is KVM or TCG.
	Accel Accel
	// Arch is the host CPU architecture.
	Arch vm.Arch
	// OS is the host GOOS; it sets the unix socket path limit.
	OS string
	// Vsock says /dev/vhost-vsock is usable, so vhost-vsock-pci works.
	Vsock bool
	// QBoot is the path of qboot.rom, the minimal x86 firmware that boots
	// faster than SeaBIOS; empty means QEMU's default firmware.
	QBoot string
	// CID is the guest's vsock context ID (vsock links only, >= 3).
	CID uint32
	// Memory says what holds the guest's RAM.
	Memory Memory
}

// Memory is what holds a machine's RAM on the host. The zero value is
// anonymous memory, except with virtio-fs shares, whose vhost-user devices
// map guest memory: then it is a shared memfd QEMU makes.
type Memory struct {
	// File is the RAM file of a saved machine (Save writes it beside the
	// state), mapped private: pages are read from it when the guest first
	// touches them, and the guest's writes go to private copies, never to
	// the file. Several machines can map one file at once and share the
	// pages they only read.
	File string
	// Shared puts fresh RAM in a memfd the backend makes and hands QEMU
	// as fd ramFD, mapped shared, so that Save can copy it out while the
	// machine is paused instead of streaming it (Linux only).
	Shared bool
}

// Binary is the QEMU system emulator program for a guest architecture.
func Binary(arch vm.Arch) (string, error) {
	switch arch {
	case vm.AMD64:
		return "qemu-system-x86_64", nil
	case vm.ARM64:
		return "qemu-system-aarch64", nil
	}
	return "", fmt.Errorf("guest arch %q: %w (qemu backend boots amd64 and arm64)", arch, vm.ErrNotSupported)
}

// aptPackage names the Debian/Ubuntu package holding Binary(arch).
func aptPackage(arch vm.Arch) string {
	if arch == vm.ARM64 {
		return "qemu-system-arm"
	}
	return "qemu-system-x86"
}

// ResolveLink returns the link kind a machine started from spec on host
// uses: vsock when asked for or (auto) when the host has vhost-vsock,
// serial otherwise. Asking for vsock on a host without it is an error
// wrapping vm.ErrNotSupported.
func ResolveLink(spec vm.Spec, host Host) (vm.LinkKind, error) {
	switch spec.Link.Kind {
	case vm.LinkSerial:
		return vm.LinkSerial, nil
	case vm.LinkVsock:
		if !host.Vsock {
			return "", fmt.Errorf("vsock link: %w on this host: /dev/vhost-vsock is missing or not usable "+
				"(try `sudo modprobe vhost_vsock` and check its permissions, or use the serial link)", vm.ErrNotSupported)
		}
		return vm.LinkVsock, nil
	case vm.LinkAuto:
		if host.Vsock {
			return vm.LinkVsock, nil
		}
		return vm.LinkSerial, nil
	}
	return "", fmt.Errorf("unknown link kind %q", spec.Link.Kind)
}

// QMPSocket is the path of the QMP control socket of a machine.
func QMPSocket(spec vm.Spec) string { return filepath.Join(spec.StateDir, qmpSocketName) }

// LinkSocket is the path of the unix socket bound to the serial link.
func LinkSocket(spec vm.Spec) string {
	if spec.Link.SocketPath != "" {
		return spec.Link.SocketPath
	}
	return filepath.Join(spec.StateDir, linkSocketName)
}

// ConsoleLog is the path of the file receiving the guest console. QEMU
// does not write it: it writes the console into a pipe (fd consoleFD,
// opened as /dev/fd/N) that the backend reads and keeps in this file
// within a cap (consoleHead, consoleTail).
func ConsoleLog(spec vm.Spec) string {
	if spec.ConsoleLog != "" {
		return spec.ConsoleLog
	}
	return filepath.Join(spec.StateDir, consoleName)
}

// maxSocketPath is the longest unix socket path goos accepts: sun_path is
// 108 bytes on Linux and 104 on the BSDs and macOS, NUL included.
func maxSocketPath(goos string) int {
	if goos == "linux" || goos == "" {
		return 107
	}
	return 103
}

func checkSocketPath(what, path, goos string) error {
	if n, max := len(path), maxSocketPath(goos); n > max {
		return fmt.Errorf("%s socket path %s is %d bytes, over the %d-byte unix socket limit: use a shorter state dir", what, path, n, max)
	}
	return nil
}

// Args builds the QEMU command line for spec on host, program name first
// (like exec.Cmd.Args). spec should have its defaults filled in
// (vm.Spec.WithDefaults); Args checks nothing on disk. The QMP listener
// must be passed to QEMU as fd 3, for serial links the link listener as
// fd 4, the write end of the console pipe as fd 5, and with Memory.Shared
// the RAM's memfd as fd 6.
// Sandbox is the -sandbox option every QEMU on Linux runs with.
const Sandbox = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"

func Args(spec vm.Spec, host Host) ([]string, error) {
	prog, link, err := checkArgs(spec, host)
	if err != nil {
		return nil, err
	}

	cpus, mem := spec.CPUs, spec.MemoryMiB
	if cpus == 0 {
		cpus = vm.DefaultCPUs
	}
	if mem == 0 {
		mem = vm.DefaultMemoryMiB
	}
	a := []string{prog}
	add := func(s ...string) { a = append(a, s...) }

	// The RAM is always the memory backend "mem", whatever holds it: a
	// saved machine restores into RAM held otherwise (Memory).
	memBackend := ",memory-backend=mem"
	var console string
	switch spec.Arch {
	case vm.AMD64:
		// q35 with PVH boot of the uncompressed vmlinux. microvm would be
		// faster but hangs now and then under TCG without tsc_early_khz=.
		add("-machine", "q35"+memBackend)
		if host.QBoot != "" {
			add("-bios", host.QBoot)
		}
		// no_timer_check: the kernel's early check that the timer
		// interrupt arrives fails now and then when the host is busy (a
		// vCPU thread descheduled in its few milliseconds) and panics
		// the boot ("IO-APIC + timer doesn't work!"), seen in a full
		// test run; QEMU's timer is not broken, so the check is skipped,
		// as other projects booting Linux under QEMU do.
		console = "console=ttyS0 no_timer_check"
	case vm.ARM64:
		if host.Accel == KVM {
			add("-machine", "virt,gic-version=host"+memBackend)
		} else {
			add("-machine", "virt,gic-version=3"+memBackend)
		}
		console = "console=ttyAMA0"
	}
	add("-accel", string(host.Accel))
	if host.Accel == KVM {
		add("-cpu", "host")
	} else {
		add("-cpu", "max")
	}
	add("-smp", strconv.Itoa(cpus), "-m", strconv.Itoa(mem))
	add("-nodefaults", "-no-user-config", "-nographic", "-no-reboot")
	if host.OS == "linux" {
		// QEMU's own seccomp filter: no obsolete system calls, no
		// setuid and the like, no new processes (a restore reads the
		// state through a descriptor, not a command), no changes to
		// scheduling or resource limits. Only Linux builds have it.
		add("-sandbox", Sandbox)
	}
	add("-object", memoryObject(host.Memory, len(spec.Shares) > 0, mem))
	if spec.Name != "" {
		add("-name", "guest=airlock-"+escape(spec.Name))
	}

	add("-kernel", spec.Kernel)
	if spec.Initrd != "" {
		add("-initrd", spec.Initrd)
	}
	add("-append", strings.TrimSpace(console+" "+spec.Cmdline))

	// The console goes into a pipe the backend reads (see console.go): a
	// file QEMU wrote itself would grow as long as the guest prints.
	add("-chardev", fmt.Sprintf("file,id=console,path=/dev/fd/%d", consoleFD), "-serial", "chardev:console")
	add("-chardev", fmt.Sprintf("socket,id=qmp,fd=%d,server=on,wait=off", qmpFD), "-mon", "chardev=qmp,mode=control")

	if spec.Network == vm.NetworkNAT {
		add("-netdev", "user,id=net0", "-device", "virtio-net-pci,netdev=net0")
	} else {
		add("-nic", "none")
	}
	add("-device", "virtio-rng-pci")

	for i, d := range spec.Disks {
		format := d.Format
		if format == "" {
			format = "raw"
		}
		drive := fmt.Sprintf("if=none,id=disk%d,format=%s,file=%s", i, format, escape(d.Path))
		if d.ReadOnly {
			drive += ",readonly=on"
		}
		add("-drive", drive, "-device", fmt.Sprintf("virtio-blk-pci,drive=disk%d", i))
	}

	for i, sh := range spec.Shares {
		add("-chardev", fmt.Sprintf("socket,id=fs%d,path=%s", i, escape(ShareSocket(spec, i))),
			"-device", fmt.Sprintf("vhost-user-fs-pci,chardev=fs%d,tag=%s", i, escape(sh.Tag)))
	}

	switch link {
	case vm.LinkVsock:
		add("-device", fmt.Sprintf("vhost-vsock-pci,guest-cid=%d", host.CID))
	case vm.LinkSerial:
		add("-device", "virtio-serial-pci",
			"-chardev", fmt.Sprintf("socket,id=link,fd=%d,server=on,wait=off", linkFD),
			"-device", "virtserialport,chardev=link,name="+SerialPortName)
	}
	return a, nil
}

// checkArgs checks spec and host before Args builds a command line from
// them, reporting every problem at once; it returns the QEMU program and
// the guest link to use.
func checkArgs(spec vm.Spec, host Host) (string, vm.LinkKind, error) {
	var errs []error
	prog, err := Binary(spec.Arch)
	if err != nil {
		errs = append(errs, err)
	}
	switch host.Accel {
	case KVM, TCG:
	default:
		errs = append(errs, fmt.Errorf("accelerator %q: want kvm or tcg", host.Accel))
	}
	if host.Accel == KVM && host.Arch != spec.Arch {
		errs = append(errs, fmt.Errorf("kvm cannot run a %s guest on a %s host", spec.Arch, host.Arch))
	}
	link, err := ResolveLink(spec, host)
	if err != nil {
		errs = append(errs, err)
	}
	if link == vm.LinkVsock && host.CID < 3 {
		errs = append(errs, fmt.Errorf("vsock guest cid %d: want 3 or more", host.CID))
	}
	if link == vm.LinkVsock && spec.Link.Port == 0 {
		errs = append(errs, errors.New("vsock link: no guest port"))
	}
	if spec.StateDir == "" {
		errs = append(errs, errors.New("no state dir"))
	}
	if err := checkSocketPath("qmp", QMPSocket(spec), host.OS); err != nil {
		errs = append(errs, err)
	}
	if link == vm.LinkSerial {
		if err := checkSocketPath("serial link", LinkSocket(spec), host.OS); err != nil {
			errs = append(errs, err)
		}
	}
	if err := checkShares(spec); err != nil {
		errs = append(errs, err)
	}
	if host.Memory.File != "" && (host.Memory.Shared || len(spec.Shares) > 0) {
		errs = append(errs, errors.New("a machine restored from a RAM file maps it private: it cannot share its RAM too"))
	}
	for i, sh := range spec.Shares {
		if err := checkSocketPath("virtiofs share "+sh.Tag, ShareSocket(spec, i), host.OS); err != nil {
			errs = append(errs, err)
		}
	}
	return prog, link, errors.Join(errs...)
}

// memoryObject is the -object option of the memory backend "mem" of
// mib MiB held as m says; shares need it shared.
func memoryObject(m Memory, shares bool, mib int) string {
	switch {
	case m.File != "":
		return fmt.Sprintf("memory-backend-file,id=mem,size=%dM,mem-path=%s,share=off", mib, escape(m.File))
	case m.Shared:
		return fmt.Sprintf("memory-backend-file,id=mem,size=%dM,mem-path=/dev/fd/%d,share=on", mib, ramFD)
	case shares:
		return fmt.Sprintf("memory-backend-memfd,id=mem,size=%dM,share=on", mib)
	}
	return fmt.Sprintf("memory-backend-ram,id=mem,size=%dM", mib)
}

// escape doubles commas, QEMU's quoting inside option values.
func escape(s string) string { return strings.ReplaceAll(s, ",", ",,") }
