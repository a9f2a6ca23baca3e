package agent

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/guest"
)

// mountDisks mounts the ext4 disks the kernel command line names
// (guest.DiskArg), nosuid, nodev and noinit_itable. ext4 and its dependencies are loaded by then:
// loadModules loads them when a virtio block device (ID 2) is present. A
// disk that fails to mount is logged; the host checks the mount before it
// pushes anything.
func mountDisks(cmdline string, log *slog.Logger) {
	mounts, bad := diskMounts(cmdline)
	for _, b := range bad {
		log.Warn("disk: ignored malformed kernel argument", "arg", b)
	}
	for _, m := range mounts {
		if err := mountDisk(m); err != nil {
			log.Warn("disk mount", "dev", m.Dev, "dir", m.Dir, "err", err)
			continue
		}
		log.Info("disk mounted", "dev", m.Dev, "dir", m.Dir)
	}
}

// MountDisks mounts the disks a first contact names (guest.Hello's Disks,
// each DEV:DIR) as mountDisks does, after dropping what the kernel cached
// of each device: a machine restored from a warm snapshot probed its
// disk when it booted, and the disk now attached is another file.
func MountDisks(disks []string) error {
	mounts, bad := diskMounts(guest.DiskArg + "=" + strings.Join(disks, " "+guest.DiskArg+"="))
	if len(bad) > 0 {
		return fmt.Errorf("mount disks: malformed %q", bad)
	}
	for _, m := range mounts {
		for _, dev := range []string{m.Dev, m.Lower, m.Delta} {
			if dev == "" {
				continue
			}
			if err := flushBlockDevice("/dev/" + dev); err != nil {
				return err
			}
		}
		if err := mountDisk(m); err != nil {
			return fmt.Errorf("mount disk %s on %s: %w", m.Dev, m.Dir, err)
		}
	}
	return nil
}

// flushBlockDevice drops the kernel's buffered blocks of the device at
// path (BLKFLSBUF), so that mount reads the disk attached now.
func flushBlockDevice(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("flush %s: %w", path, err)
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.BLKFLSBUF, 0); err != nil {
		return fmt.Errorf("flush %s: %w", path, err)
	}
	return nil
}

func mountDisk(m diskMount) error {
	if m.Lower != "" {
		return mountOverlayDisk(m)
	}
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		return err
	}
	// noinit_itable: the host left the inode tables to read as zeros from
	// the sparse image's holes; zeroing them would only fill the host's
	// disk and take the guest's CPU.
	if err := unix.Mount("/dev/"+m.Dev, m.Dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV, "noinit_itable"); err != nil {
		return fmt.Errorf("mount /dev/%s: %w", m.Dev, err)
	}
	// mkfs leaves lost+found, which is not the project's: rmdir removes
	// it only while it is empty.
	if err := unix.Rmdir(filepath.Join(m.Dir, "lost+found")); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove lost+found: %w", err)
	}
	return nil
}

// overlayOptions are the overlay's mount options besides its
// directories: a renamed directory is copied (no redirect), a copy-up
// copies the data (no metacopy), no index; so the upper layer holds
// every changed file whole and nothing refers into the lower.
const overlayOptions = "redirect_dir=off,metacopy=off,index=off,xino=off"

// mountOverlayDisk mounts m as an overlay on m.Dir: the baseline disk
// /dev/m.Lower read-only, its guest.BaselineTree the lower layer (under
// the delta disk's, for a layered baseline: mountBaseline), and
// /dev/m.Dev holding the upper layer. The upper directory, made on the
// first mount, takes the owner and mode of the baseline's tree, which the
// overlay's root shows.
func mountOverlayDisk(m diskMount) error {
	lower, rw := guest.OverlayLower(m.Dir), guest.OverlayRW(m.Dir)
	if err := os.MkdirAll(guest.OverlayRoot, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(guest.OverlayRoot, 0o700); err != nil {
		return err
	}
	for _, d := range []string{lower, rw, m.Dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	lowerdir, err := mountBaseline(m)
	if err != nil {
		return err
	}
	if err := unix.Mount("/dev/"+m.Dev, rw, "ext4", unix.MS_NOSUID|unix.MS_NODEV, "noinit_itable"); err != nil {
		return fmt.Errorf("mount /dev/%s: %w", m.Dev, err)
	}
	tree := lower + "/" + guest.BaselineTree
	var st unix.Stat_t
	if err := unix.Lstat(tree, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("the baseline /dev/%s has no %s directory: %v", m.Lower, guest.BaselineTree, err)
	}
	up, work := guest.OverlayUpper(m.Dir), rw+"/"+guest.WorkDir
	if _, err := os.Lstat(up); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(up, 0o755); err != nil {
			return err
		}
		if err := os.Lchown(up, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
		if err := os.Chmod(up, os.FileMode(st.Mode&0o777)); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(work, 0o700); err != nil {
		return err
	}
	opts := "lowerdir=" + lowerdir + ",upperdir=" + up + ",workdir=" + work + "," + overlayOptions
	if err := unix.Mount("overlay", m.Dir, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount the overlay on %s (%s): %w", m.Dir, opts, err)
	}
	return nil
}

// mountBaseline mounts m's baseline on guest.OverlayLower(m.Dir), where
// its guest.BaselineID and guest.BaselineTree are read, and returns the
// overlay's lowerdir. A single disk is mounted there read-only. A layered
// one (m.Delta) has both disks mounted read-only beside it
// (guest.OverlayLayer), the delta's guest.BaselineBase checked to name the
// base disk's guest.BaselineID (a delta over another base would show
// another tree), and there a read-only overlay of the delta disk over the
// base disk: its BaselineID is the delta's, its tree the baseline's. The
// workspace's lowerdir is the two trees, not that overlay (no stacking).
func mountBaseline(m diskMount) (string, error) {
	lower := guest.OverlayLower(m.Dir)
	const ro = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV
	if m.Delta == "" {
		if err := unix.Mount("/dev/"+m.Lower, lower, "ext4", ro, "noload"); err != nil {
			return "", fmt.Errorf("mount the baseline /dev/%s: %w", m.Lower, err)
		}
		return lower + "/" + guest.BaselineTree, nil
	}
	base, delta := guest.OverlayLayer(m.Dir, "base"), guest.OverlayLayer(m.Dir, "delta")
	for _, d := range [][2]string{{m.Lower, base}, {m.Delta, delta}} {
		if err := os.MkdirAll(d[1], 0o755); err != nil {
			return "", err
		}
		if err := unix.Mount("/dev/"+d[0], d[1], "ext4", ro, "noload"); err != nil {
			return "", fmt.Errorf("mount the baseline /dev/%s: %w", d[0], err)
		}
	}
	baseID, err := readDiskID(base + "/" + guest.BaselineID)
	if err != nil {
		return "", fmt.Errorf("the baseline /dev/%s: %w", m.Lower, err)
	}
	over, err := readDiskID(delta + "/" + guest.BaselineBase)
	if err != nil {
		return "", fmt.Errorf("the baseline's delta /dev/%s: %w", m.Delta, err)
	}
	if over != baseID {
		return "", fmt.Errorf("the baseline's delta /dev/%s was made over base disk %s, and /dev/%s is %s", m.Delta, over, m.Lower, baseID)
	}
	if _, err := readDiskID(delta + "/" + guest.BaselineID); err != nil {
		return "", fmt.Errorf("the baseline's delta /dev/%s: %w", m.Delta, err)
	}
	if err := unix.Mount("overlay", lower, "overlay", ro, "lowerdir="+delta+":"+base+","+overlayOptions); err != nil {
		return "", fmt.Errorf("mount the baseline's layers on %s: %w", lower, err)
	}
	return delta + "/" + guest.BaselineTree + ":" + base + "/" + guest.BaselineTree, nil
}

// readDiskID reads an identity file of a baseline disk: a regular file
// of 64 lower-case hex digits (a newline after them allowed).
func readDiskID(p string) (string, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", p)
	}
	b := make([]byte, 129)
	n, _ := io.ReadFull(f, b)
	id := strings.TrimSuffix(string(b[:n]), "\n")
	if len(id) != 64 || strings.Trim(id, "0123456789abcdef") != "" {
		return "", fmt.Errorf("%s does not hold 64 lower-case hex digits", p)
	}
	return id, nil
}

// udhcpcScript applies the lease busybox udhcpc obtained (it passes the
// lease in the environment). $BB is the busybox binary: a root disk has
// no applet links.
const udhcpcScript = `#!/bin/sh
case "$1" in
deconfig)
	$BB ifconfig "$interface" 0.0.0.0 up
	;;
bound|renew)
	$BB ifconfig "$interface" "$ip" netmask "${subnet:-255.255.255.0}" up
	if [ -n "$router" ]; then
		for r in $router; do $BB route add default gw "$r" dev "$interface" && break; done
	fi
	if [ -n "$dns" ]; then
		: > /etc/resolv.conf
		for d in $dns; do echo "nameserver $d" >> /etc/resolv.conf; done
	fi
	;;
esac
exit 0
`

// configureNetwork brings the machine's network device up as the kernel
// command line says (guest.NetArg) with busybox's udhcpc. Only
// open-network machines have a network device.
func configureNetwork(cmdline, busybox string, r *Reaper, log *slog.Logger) {
	mode := netMode(cmdline)
	switch mode {
	case "":
		return
	case guest.NetDHCP:
	default:
		log.Warn("network: unknown mode", "arg", guest.NetArg+"="+mode)
		return
	}
	ifname, err := firstEthernet()
	if err != nil {
		log.Warn("network", "err", err)
		return
	}
	if busybox == "" {
		log.Warn("network: no busybox for its DHCP client", "interface", ifname)
		return
	}
	if err := dhcp(r, busybox, ifname); err != nil {
		log.Warn("network", "interface", ifname, "err", err)
		return
	}
	log.Info("network configured", "interface", ifname, "mode", mode)
}

// firstEthernet is the first network interface other than lo.
func firstEthernet() (string, error) {
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return "", fmt.Errorf("list network interfaces: %w", err)
	}
	for _, e := range ents {
		if e.Name() != "lo" {
			return e.Name(), nil
		}
	}
	return "", errors.New("no network interface (is the virtio_net module in the image?)")
}

// dhcp runs busybox's DHCP client once on ifname and applies the lease.
func dhcp(r *Reaper, busybox, ifname string) error {
	dir := "/run/airlock"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.MkdirAll("/etc", 0o755); err != nil {
		return err
	}
	script := filepath.Join(dir, "udhcpc.script")
	text := strings.Replace(udhcpcScript, "#!/bin/sh\n", "#!/bin/sh\nBB="+busybox+"\n", 1)
	if err := os.WriteFile(script, []byte(text), 0o700); err != nil {
		return err
	}
	out, err := os.CreateTemp(dir, "udhcpc.log")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	// -f: foreground; -q: exit once bound; -n: exit when no lease comes;
	// -t/-T: 5 discovers, 1 s apart.
	_, wait, err := r.Start(busybox, []string{"udhcpc", "-f", "-q", "-n", "-t", "5", "-T", "1", "-i", ifname, "-s", script},
		&os.ProcAttr{Files: []*os.File{nil, out, out}})
	if err != nil {
		return fmt.Errorf("udhcpc: %w", err)
	}
	if ws := wait(); !ws.Exited() || ws.ExitStatus() != 0 {
		b, _ := os.ReadFile(out.Name())
		return fmt.Errorf("udhcpc: no lease (status %#x): %s", int(ws), strings.TrimSpace(string(b)))
	}
	return nil
}
