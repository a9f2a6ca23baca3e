package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/airlock-dev/airlock/app/launch"
)

// DiskFile is the sandbox's own disk: a sparse ext4 image holding
// /workspace while the VM runs. Its size is the workspace's quota. It is
// removed once the run is collected.
const DiskFile = "disk.img"

// Attach is what the machine Boot starts must have attached and mounted.
type Attach struct {
	// ID is the sandbox's: the machine's run directory is run/<ID>, where
	// airlock ls and airlock stop find its supervisor.
	ID string
	// Shares are virtio-fs shares (virtiofs sync mode).
	Shares []launch.Share
	// Disks are ext4 disks (the workspace disk in copy mode).
	Disks []launch.Disk
	// Root is where the sandbox's copy-on-write clone of its image's root
	// disk lives (RootDiskFile), for an image that has one: made on the
	// first boot, booted again by every later round, removed with the
	// sandbox.
	Root string
}

// RootDiskFile is the sandbox's clone of its image's root disk (the full
// image): the agent's home and everything it installed outside
// /workspace survive from one round to the next in it.
const RootDiskFile = "root.img"

// mkfsCandidates are where mkfs.ext4 is looked for beyond PATH: Debian
// keeps it in /sbin, outside an ordinary user's PATH; Homebrew's
// e2fsprogs is keg-only.
var mkfsCandidates = []string{
	"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4",
	"/opt/homebrew/opt/e2fsprogs/sbin/mkfs.ext4", "/usr/local/opt/e2fsprogs/sbin/mkfs.ext4",
}

// ErrNoMkfs means mkfs.ext4 was not found, so no workspace disk can be
// made.
var ErrNoMkfs = errors.New("mkfs.ext4 not found")

// FindMkfs returns the path of mkfs.ext4, or an error wrapping ErrNoMkfs
// that says how to install it.
func FindMkfs() (string, error) {
	if p, err := exec.LookPath("mkfs.ext4"); err == nil {
		return p, nil
	}
	for _, p := range mkfsCandidates {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: the workspace disk (the disk quota) is formatted with it; install e2fsprogs "+
		"(Debian: apt-get install e2fsprogs; macOS: brew install e2fsprogs)", ErrNoMkfs)
}

// CreateDisk makes a sparse ext4 image of size bytes at path, owned by
// root inside (the guest runs the command as root). It costs no space
// beyond the file system's metadata until the guest writes: inode tables
// and journal are left to read as zeros from the holes (the guest mounts
// with noinit_itable, so it does not zero them either). No root is needed:
// mke2fs writes a regular file.
func CreateDisk(ctx context.Context, path string, size int64) error {
	mkfs, err := FindMkfs()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create workspace disk: %w", err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("create workspace disk: %w", err)
	}
	cmd := exec.CommandContext(ctx, mkfs, "-q", "-F", "-t", "ext4", "-m", "0", "-L", "workspace",
		"-E", "root_owner=0:0,lazy_itable_init=1,lazy_journal_init=1,nodiscard", path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Remove(path)
		return fmt.Errorf("format workspace disk with %s: %w (%s)", mkfs, err, strings.TrimSpace(out.String()))
	}
	return nil
}
