package pipeline

import (
	"context"
	"fmt"
	"os"

	"github.com/airlock-dev/airlock/app/launch"
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
func CreateDisk(ctx context.Context, path string, size int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ext4.Format(path, size, "workspace"); err != nil {
		return fmt.Errorf("create workspace disk: %w", err)
	}
	return os.Chmod(path, 0o600)
}
