package image

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/airlock-dev/airlock/vm"
)

// Boot contract paths: where the initramfs puts what the guest agent (PID 1)
// uses.
const (
	// InitPath is the guest agent, run by the kernel (rdinit=/init).
	InitPath = "/init"
	// BusyboxPath is the static busybox. Its applets are linked from /bin
	// in the image (see busyboxApplets); where the applet table cannot be
	// found the agent installs them at boot (busybox --install -s).
	BusyboxPath = "/bin/busybox"
	// ModulesDir holds the kernel modules, as <name>.ko.
	ModulesDir = "/lib/modules/airlock"
	// ModulesOrder lists the modules of ModulesDir to load, one absolute
	// path per line, dependencies first.
	ModulesOrder = ModulesDir + "/modules.order"
	// DockerModulesOrder lists, as ModulesOrder does, the modules a Docker
	// Engine needs (DockerModules), loaded only when one is started.
	DockerModulesOrder = ModulesDir + "/docker.order"
)

// DefaultCmdline is the kernel command line of the minimal image. The VM
// backend adds its own console= argument.
const DefaultCmdline = "quiet panic=-1 rdinit=/init"

// DefaultHostname is /etc/hostname until the host gives the guest its own.
const DefaultHostname = "airlock"

// moduleFile is a kernel module to put in the initramfs.
type moduleFile struct {
	name string
	data []byte
}

// initramfsContents is everything that varies between initramfs builds.
type initramfsContents struct {
	guest   []byte       // the airlock-guest binary, /init
	busybox []byte       // /bin/busybox
	modules []moduleFile // in load order
	// docker are the Docker Engine's modules in load order, those
	// already in modules too (their file is written once).
	docker []moduleFile
}

// emptyDirs are the directories the initramfs has for mount points and
// the agent's and the shell's use, with their modes.
var emptyDirs = []struct {
	path string
	perm uint32
}{
	{"/dev", 0o755},
	{"/dev/pts", 0o755},
	{"/etc", 0o755},
	{"/proc", 0o555},
	{"/root", 0o700},
	{"/run", 0o755},
	{"/sbin", 0o755},
	{"/sys", 0o555},
	{"/tmp", 0o1777},
	{"/usr/bin", 0o755},
	{"/usr/sbin", 0o755},
	{"/workspace", 0o755},
}

// writeInitramfs writes the minimal image's initramfs, an uncompressed newc
// cpio archive, to w. The same contents always give the same bytes.
func writeInitramfs(w io.Writer, c initramfsContents) (int64, error) {
	var a archive
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range emptyDirs {
		add(a.Dir(d.path, d.perm))
	}
	// The kernel opens /dev/console for PID 1's stdio before anything
	// mounts devtmpfs.
	add(a.CharDev("/dev/console", 0o600, 5, 1))
	add(a.File(InitPath, 0o755, c.guest))
	add(a.File(BusyboxPath, 0o755, c.busybox))
	// Linking the applets here spares every boot a fork of busybox and
	// hundreds of symlink calls, which cost ~100 ms under TCG.
	for _, name := range busyboxApplets(c.busybox) {
		add(a.Symlink("/bin/"+name, "busybox"))
	}
	add(a.Symlink("/usr/bin/env", "/bin/busybox"))
	add(a.File("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n")))
	add(a.File("/etc/group", 0o644, []byte("root:x:0:\n")))
	add(a.File("/etc/hostname", 0o644, []byte(DefaultHostname+"\n")))
	add(a.Dir(ModulesDir, 0o755))
	written := map[string]bool{}
	for _, list := range []struct {
		path string
		mods []moduleFile
	}{{ModulesOrder, c.modules}, {DockerModulesOrder, c.docker}} {
		var order strings.Builder
		for _, m := range list.mods {
			p := ModulesDir + "/" + m.name + ".ko"
			if !written[m.name] {
				add(a.File(p, 0o644, m.data))
				written[m.name] = true
			}
			order.WriteString(p + "\n")
		}
		add(a.File(list.path, 0o644, []byte(order.String())))
	}
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("initramfs: %w", err)
	}
	return a.WriteTo(w)
}

// busyboxApplets returns the applet names compiled into a busybox binary,
// read from its packed, sorted name table ("[\0[[\0acpid\0…"), without
// running it (it may be built for another architecture). Names that are not
// plain file names, and "busybox" itself, are left out; a binary whose table
// cannot be found gives none.
func busyboxApplets(bin []byte) []string {
	i := bytes.Index(bin, []byte("[\x00[[\x00"))
	if i < 0 {
		return nil
	}
	end := bytes.Index(bin[i:], []byte("\x00\x00"))
	if end < 0 {
		return nil
	}
	var names []string
	for _, n := range strings.Split(string(bin[i:i+end]), "\x00") {
		if n == "busybox" || !validAppletName(n) {
			continue
		}
		names = append(names, n)
	}
	return names
}

func validAppletName(n string) bool {
	if n == "" || len(n) > 64 || n == "." || n == ".." {
		return false
	}
	for _, r := range n {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("[._-", r):
		default:
			return false
		}
	}
	return true
}

// elfMachine is the ELF machine of a guest architecture.
func elfMachine(arch vm.Arch) elf.Machine {
	switch arch {
	case vm.AMD64:
		return elf.EM_X86_64
	case vm.ARM64:
		return elf.EM_AARCH64
	}
	return elf.EM_NONE
}

// checkStaticELF checks that b is a statically linked executable for arch:
// the initramfs has no dynamic loader or libraries.
func checkStaticELF(what string, arch vm.Arch, b []byte) error {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s is not a Linux executable: %w", what, err)
	}
	defer f.Close()
	if want := elfMachine(arch); f.Machine != want {
		return fmt.Errorf("%s is built for %s, the image is %s (%s): build it with GOARCH=%s", what, f.Machine, arch, want, arch)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("%s is an ELF %s, not an executable", what, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp, _ := io.ReadAll(io.LimitReader(p.Open(), 256))
			return fmt.Errorf("%s is dynamically linked (needs %s), and the initramfs has no libraries: build it statically (CGO_ENABLED=0)",
				what, strings.TrimRight(string(interp), "\x00"))
		}
	}
	return nil
}
