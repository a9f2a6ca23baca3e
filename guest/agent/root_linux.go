package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/guest"
)

// sysroot is where the root disk is mounted before it becomes /.
const sysroot = "/sysroot"

// movedMounts are the initramfs's mounts that move into the new root
// (with the mounts below them: /dev/pts, /dev/shm).
var movedMounts = []string{"/dev", "/proc", "/sys", "/run", "/tmp"}

// switchRoot mounts the ext4 disk /dev/dev read-write on sysroot (or, with
// a lower device, an overlay of the read-only lower disk and an upper
// layer on dev: mountOverlay) and makes it the root file system, as
// switch_root does, without leaving this
// process: the system mounts move into it; this binary, busybox (when the
// initramfs has one) and the late modules are copied to
// guest.RuntimeDir on its /run tmpfs; /init in it becomes a link to the
// copied agent; then it moves over / and the process chroots into it.
// Nothing else may be running a process while it works (chroot and the
// working directory are the whole process's). It returns the late
// modules' new paths and the busybox to use ("" when there is none).
func switchRoot(dev, lower string, later []string) (newLater []string, busybox string, err error) {
	if err := os.MkdirAll(sysroot, 0o755); err != nil {
		return nil, "", err
	}
	if lower != "" {
		// The two disks are mounted under /run, so they move with it.
		if err := mountOverlay(dev, lower); err != nil {
			return nil, "", err
		}
	} else if err := unix.Mount("/dev/"+dev, sysroot, "ext4", 0, "noinit_itable"); err != nil {
		// noinit_itable: the image left its inode tables as holes;
		// zeroing them would only grow the sandbox's clone.
		return nil, "", fmt.Errorf("mount root disk /dev/%s: %w", dev, err)
	}
	for _, m := range movedMounts {
		dst := sysroot + m
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return nil, "", err
		}
		if err := unix.Mount(m, dst, "", unix.MS_MOVE, ""); err != nil {
			return nil, "", fmt.Errorf("move %s into the root disk: %w", m, err)
		}
	}
	rt := sysroot + guest.RuntimeDir
	if err := os.MkdirAll(rt, 0o755); err != nil {
		return nil, "", err
	}
	if err := os.Chmod(rt, 0o755); err != nil {
		return nil, "", err
	}
	// /proc moved: this binary is under the new root's /proc now.
	if err := copyFile(sysroot+"/proc/self/exe", rt+"/init", 0o555); err != nil {
		return nil, "", fmt.Errorf("copy the agent: %w", err)
	}
	if _, err := os.Stat("/bin/busybox"); err == nil {
		if err := copyFile("/bin/busybox", rt+"/busybox", 0o555); err != nil {
			return nil, "", fmt.Errorf("copy busybox: %w", err)
		}
		busybox = guest.RuntimeDir + "/busybox"
	}
	if len(later) > 0 {
		if err := os.MkdirAll(rt+"/modules", 0o755); err != nil {
			return nil, "", err
		}
	}
	for _, p := range later {
		dst := guest.RuntimeDir + "/modules/" + filepath.Base(p)
		if err := copyFile(p, sysroot+dst, 0o444); err != nil {
			return nil, "", fmt.Errorf("copy module: %w", err)
		}
		newLater = append(newLater, dst)
	}
	if err := bindInitramfsModules(sysroot); err != nil {
		return nil, "", err
	}
	if err := linkInit(sysroot+"/init", guest.RuntimeDir+"/init"); err != nil {
		return nil, "", err
	}
	if err := os.Chdir(sysroot); err != nil {
		return nil, "", err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return nil, "", fmt.Errorf("move the root disk over /: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return nil, "", fmt.Errorf("chroot: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return nil, "", err
	}
	return newLater, busybox, nil
}

// layerMounts are where mountOverlay mounts the two disks of an overlay
// root: on the initramfs's /run, which moves into the new root with them.
var layerMounts = []string{guest.RuntimeDir + "/lower", guest.RuntimeDir + "/upper"}

// mountOverlay mounts /dev/lower read-only and /dev/upper read-write and
// an overlay of the two on sysroot: what the guest writes goes to the
// upper disk's guest.UpperDir, the lower disk is never written.
func mountOverlay(upper, lower string) error {
	lowerDir, upperDir := layerMounts[0], layerMounts[1]
	for _, d := range layerMounts {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("/dev/"+lower, lowerDir, "ext4", unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("mount the image's disk /dev/%s: %w", lower, err)
	}
	if err := unix.Mount("/dev/"+upper, upperDir, "ext4", 0, "noinit_itable"); err != nil {
		return fmt.Errorf("mount the sandbox's disk /dev/%s: %w", upper, err)
	}
	up, work := upperDir+"/"+guest.UpperDir, upperDir+"/"+guest.WorkDir
	for _, d := range []string{up, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	opts := "lowerdir=" + lowerDir + ",upperdir=" + up + ",workdir=" + work
	if err := unix.Mount("overlay", sysroot, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount the overlay root (%s): %w", opts, err)
	}
	return nil
}

// linkInit makes path a symbolic link to target, replacing a file or link
// there (the root disk is the sandbox's own clone).
func linkInit(path, target string) error {
	if t, err := os.Readlink(path); err == nil && t == target {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if err := os.Symlink(target, path); err != nil {
		return fmt.Errorf("link %s: %w", path, err)
	}
	return nil
}

// bindInitramfsModules bind-mounts the initramfs's module directory on
// guest.InitramfsModules under sysroot when it has Docker's modules
// (guest.DockerModulesOrder; none in an image built before them): a root
// disk has no such modules of its own, nothing loads them until a Docker
// Engine starts, and a bind mount costs a boot nothing.
func bindInitramfsModules(sysroot string) error {
	if _, err := os.Stat(guest.DockerModulesOrder); err != nil {
		return nil
	}
	dst := sysroot + guest.InitramfsModules
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(filepath.Dir(guest.DockerModulesOrder), dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind the initramfs's modules: %w", err)
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return os.Chmod(dst, mode)
}
