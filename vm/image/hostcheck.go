package image

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/vm"
)

// ErrNeedsRoot: building a root disk needs root (dpkg runs in a chroot).
var ErrNeedsRoot = errors.New("building the full image needs root")

// fullHost is what a root disk build needs from the host.
type fullHost struct {
	mmdebstrap, npm, mkfs string
}

// checkFullHost finds the tools a root disk build needs and says what to
// install when one is missing, all at once. A foreign arch needs the
// kernel to run its programs through qemu-user (binfmtEnabled).
func checkFullHost(arch vm.Arch, euid int, goarch string, binfmtEnabled func(vm.Arch) bool) (fullHost, error) {
	var h fullHost
	var errs []error
	if euid != 0 {
		errs = append(errs, fmt.Errorf("%w (mmdebstrap runs dpkg in a chroot of the new tree, and its files must be owned by root): run it as root, e.g. sudo airlock image build full", ErrNeedsRoot))
	}
	if string(arch) != goarch && !binfmtEnabled(arch) {
		errs = append(errs, fmt.Errorf("building the full image for %s on an %s host needs the kernel to run %s programs (the Debian packages' scripts and the agent CLIs' install scripts run in the new tree): install qemu-user-static and binfmt-support (apt-get install qemu-user-static binfmt-support; binfmt_misc must be mounted on /proc/sys/fs/binfmt_misc), or build it on an %s Linux machine", arch, goarch, arch, arch))
	}
	var err error
	if h.mmdebstrap, err = exec.LookPath("mmdebstrap"); err != nil {
		errs = append(errs, errors.New("mmdebstrap not found: install it with scripts/setup-debian or apt-get install mmdebstrap"))
	}
	if h.npm, err = exec.LookPath("npm"); err != nil {
		errs = append(errs, errors.New("npm not found (it fetches node and the agent CLIs from the npm registry): install it with scripts/setup-debian or apt-get install npm"))
	}
	h.mkfs = findTool("mkfs.ext4", "/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4")
	if h.mkfs == "" {
		errs = append(errs, errors.New("mkfs.ext4 not found: install e2fsprogs (apt-get install e2fsprogs)"))
	}
	return h, errors.Join(errs...)
}

// binfmtEnabled reports whether the kernel runs arch's programs through
// qemu-user: binfmt_misc has an enabled qemu entry for it whose
// interpreter is opened at registration (flag F), so it works inside the
// build's chroot too.
func binfmtEnabled(arch vm.Arch) bool {
	name := map[vm.Arch]string{vm.ARM64: "qemu-aarch64", vm.AMD64: "qemu-x86_64"}[arch]
	if name == "" {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc/sys/fs/binfmt_misc", name))
	return err == nil && binfmtUsable(string(b))
}

// binfmtUsable reads a binfmt_misc entry: enabled, with the F flag.
func binfmtUsable(entry string) bool {
	lines := strings.Split(entry, "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "enabled" {
		return false
	}
	for _, l := range lines {
		if flags, ok := strings.CutPrefix(l, "flags: "); ok {
			return strings.Contains(flags, "F")
		}
	}
	return false
}

func findTool(name string, candidates ...string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, c := range candidates {
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
			return c
		}
	}
	return ""
}
