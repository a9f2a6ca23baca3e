package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/vm/disk"
	"github.com/airlock-dev/airlock/vm/ext4"
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

// CreateDisk makes a sparse ext4 image of size bytes at path, root's
// inside (the guest runs the command as root), written in pure Go
// (vm/ext4): no mkfs on the host, on macOS as on Linux. It costs the host
// about half a megabyte until the guest writes.
//
// With templates (a directory of the host's cache) the image is formatted
// there once per size, as blank-SIZE.img, and each disk is a copy of it:
// a reflink where the file system has them, else its half megabyte of
// data with the holes left as holes (vm/disk.Keep). Formatting took 0.4 s
// of the host's CPU on every run. The guest only ever writes the copy.
func CreateDisk(ctx context.Context, path string, size int64, templates string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var err error
	if templates == "" {
		err = ext4.Format(path, size, "workspace")
	} else {
		var tmpl string
		if tmpl, err = blankTemplate(templates, size); err == nil {
			_, err = disk.Keep(ctx, tmpl, path)
		}
	}
	if err != nil {
		return fmt.Errorf("create workspace disk: %w", err)
	}
	return os.Chmod(path, 0o600)
}

// blankTemplate returns the blank workspace disk of size in dir, making
// it first when it is missing or not that size. Two runs that make it at
// once each format their own and rename it into place, the last one
// staying: the same blank file system either way.
func blankTemplate(dir string, size int64) (string, error) {
	path := filepath.Join(dir, fmt.Sprintf("blank-%d.img", size))
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && fi.Size() == size {
		return path, nil
	}
	if err := privateDir(dir); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".blank-*.tmp")
	if err != nil {
		return "", err
	}
	tmp.Close()
	os.Remove(tmp.Name()) // ext4.Format makes its file itself
	if err := ext4.Format(tmp.Name(), size, "workspace"); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return path, nil
}
