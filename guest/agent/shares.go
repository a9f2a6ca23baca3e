package agent

import (
	"path"
	"strings"

	"github.com/airlock-dev/airlock/guest"
)

// shareMount is a virtio-fs share PID 1 mounts: guest.VirtiofsArg=Tag:Dir.
type shareMount struct {
	Tag, Dir string
}

// shareMounts reads the guest.VirtiofsArg arguments of a kernel command
// line. An argument with an empty tag, a tag longer than virtio-fs
// carries, or a directory that is not absolute and clean is returned in
// bad, for the log.
func shareMounts(cmdline string) (mounts []shareMount, bad []string) {
	for _, f := range strings.Fields(cmdline) {
		v, ok := strings.CutPrefix(f, guest.VirtiofsArg+"=")
		if !ok {
			continue
		}
		tag, dir, ok := strings.Cut(v, ":")
		if !ok || tag == "" || len(tag) > 35 || dir == "" || !path.IsAbs(dir) || path.Clean(dir) != dir || dir == "/" {
			bad = append(bad, f)
			continue
		}
		mounts = append(mounts, shareMount{Tag: tag, Dir: dir})
	}
	return mounts, bad
}

// diskMount is a block device PID 1 mounts: guest.DiskArg=Dev:Dir, or
// Dev:Dir:Lower for an overlay of the read-only disk Lower under Dev, or
// Dev:Dir:Lower:Delta for an overlay of the read-only disk Delta's tree
// over Lower's under Dev.
type diskMount struct {
	Dev, Dir, Lower, Delta string
}

// diskMounts reads the guest.DiskArg arguments of a kernel command line.
// The devices must be plain names under /dev (vda, not /dev/vda or
// ../vda); a malformed argument is returned in bad, for the log.
func diskMounts(cmdline string) (mounts []diskMount, bad []string) {
	for _, f := range strings.Fields(cmdline) {
		v, ok := strings.CutPrefix(f, guest.DiskArg+"=")
		if !ok {
			continue
		}
		dev, rest, ok := strings.Cut(v, ":")
		dir, lowers, overlay := strings.Cut(rest, ":")
		lower, delta, layered := strings.Cut(lowers, ":")
		if !ok || !validDevName(dev) || dir == "" || !path.IsAbs(dir) || path.Clean(dir) != dir || dir == "/" ||
			overlay && (!validDevName(lower) || lower == dev || strings.HasPrefix(dir, guest.OverlayRoot)) ||
			layered && (!validDevName(delta) || delta == dev || delta == lower) {
			bad = append(bad, f)
			continue
		}
		mounts = append(mounts, diskMount{Dev: dev, Dir: dir, Lower: lower, Delta: delta})
	}
	return mounts, bad
}

func validDevName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// netMode reads guest.NetArg from a kernel command line: "dhcp", or ""
// when the argument is absent.
func netMode(cmdline string) string {
	mode := ""
	for _, f := range strings.Fields(cmdline) {
		if v, ok := strings.CutPrefix(f, guest.NetArg+"="); ok {
			mode = v
		}
	}
	return mode
}

// rootDevice reads guest.RootArg from a kernel command line: the device to
// switch root to, "" when the argument is absent; a malformed value is
// returned as bad.
func rootDevice(cmdline string) (dev, bad string) {
	return deviceArg(cmdline, guest.RootArg)
}

// lowerDevice reads guest.LowerArg as rootDevice reads guest.RootArg.
func lowerDevice(cmdline string) (dev, bad string) {
	return deviceArg(cmdline, guest.LowerArg)
}

func deviceArg(cmdline, arg string) (dev, bad string) {
	for _, f := range strings.Fields(cmdline) {
		v, ok := strings.CutPrefix(f, arg+"=")
		if !ok {
			continue
		}
		if !validDevName(v) {
			return "", f
		}
		dev = v
	}
	return dev, ""
}
