package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/app/sandbox"

	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/disk"
)

// Checkpoints of a sandbox whose VM is live (airlock run --keep):
// sandboxes/<id>/checkpoints/<name>/ holds the machine's saved state
// (state, and the hypervisor's description of it), a copy of the
// workspace disk taken while the machine was paused for the save
// (disk.img: reflinked where the file system can, else copied sparsely),
// the collected workspace manifest of that moment (guest.json, when the
// sandbox has one) and checkpoint.json. A rollback puts the disk and the
// manifest back and restores the machine from the state in a new
// supervisor, in place of the running one: processes, memory and files
// come back as they were.

// lockCheckpoints serialises checkpoints and rollbacks of the sandbox.
func lockCheckpoints(sb *sandbox.Sandbox) (func(), error) {
	f, err := os.OpenFile(sb.Path(sandbox.CheckpointLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// Checkpoint saves the sandbox's running VM and its workspace disk as
// checkpoint name. The VM is paused while its state is saved and its disk
// copied, and runs on afterwards.
func Checkpoint(ctx context.Context, sb *sandbox.Sandbox, name string) (sandbox.Checkpoint, error) {
	cp, err := checkpoint(ctx, sb, name)
	if err != nil {
		return cp, fmt.Errorf("checkpoint %s of %s: %w", name, sb.ID, err)
	}
	return cp, nil
}

func checkpoint(ctx context.Context, sb *sandbox.Sandbox, name string) (sandbox.Checkpoint, error) {
	cp := sandbox.Checkpoint{Name: name}
	if err := sandbox.ValidCheckpointName(name); err != nil {
		return cp, err
	}
	unlock, err := lockCheckpoints(sb)
	if err != nil {
		return cp, err
	}
	defer unlock()
	c, err := launch.DialSupervised(ctx, sb.RunDir())
	if err != nil {
		return cp, fmt.Errorf("%w: %w", sandbox.ErrNoVM, err)
	}
	if err := c.CanSave(ctx); err != nil {
		return cp, err
	}
	spec, err := readSpec(sb.RunDir())
	if err != nil {
		return cp, err
	}
	if len(spec.Shares) > 0 {
		return cp, fmt.Errorf("the VM has a virtio-fs share (%s), and a machine with one cannot be saved (its file system state lives in virtiofsd, outside the VM): %w", spec.Shares[0].Tag, vm.ErrNotSupported)
	}
	dir := sb.Path(filepath.Join(sandbox.CheckpointsDir, name))
	if _, err := os.Stat(dir); err == nil {
		return cp, fmt.Errorf("checkpoint %s exists (airlock checkpoints %s lists them)", name, sb.ID)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return cp, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+name+"-")
	if err != nil {
		return cp, err
	}
	defer os.RemoveAll(tmp)

	t0 := time.Now()
	if err := c.Pause(ctx); err != nil {
		return cp, err
	}
	resumed := false
	resume := func() error {
		if resumed {
			return nil
		}
		resumed = true
		return c.Resume(context.WithoutCancel(ctx))
	}
	defer resume()
	// Paused, the saved memory and the disk copy are of one moment.
	if err := c.Save(ctx, filepath.Join(tmp, sandbox.CheckpointState)); err != nil {
		return cp, err
	}
	for i, d := range spec.Disks {
		if d.ReadOnly {
			continue
		}
		res, err := disk.Keep(ctx, d.Path, filepath.Join(tmp, checkpointDisk(i)))
		if err != nil {
			return cp, fmt.Errorf("copy the VM's disk %s: %w", filepath.Base(d.Path), err)
		}
		cp.Reflinked = res.Method != disk.MethodCopy
	}
	if err := resume(); err != nil {
		return cp, fmt.Errorf("resume the VM: %w", err)
	}
	cp.SaveMS = time.Since(t0).Milliseconds()
	if err := copyFileIfExists(sb.Path(sandbox.GuestFile), filepath.Join(tmp, sandbox.GuestFile)); err == nil {
		cp.Manifest = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return cp, err
	}
	// The state and what the hypervisor wrote beside it (QEMU: the
	// machine's description and its RAM file, sparse), as stored.
	saved, _ := filepath.Glob(filepath.Join(tmp, sandbox.CheckpointState+"*"))
	for _, p := range saved {
		if fi, err := os.Stat(p); err == nil {
			cp.StateBytes += disk.Allocated(fi)
		}
	}
	for i := range spec.Disks {
		if fi, err := os.Stat(filepath.Join(tmp, checkpointDisk(i))); err == nil {
			cp.DiskBytes += disk.Allocated(fi)
		}
	}
	cp.Created = time.Now().UTC()
	b, _ := json.MarshalIndent(cp, "", "  ")
	if err := atomicfile.WriteFile(filepath.Join(tmp, sandbox.CheckpointFile), append(b, '\n'), 0o600); err != nil {
		return cp, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return cp, err
	}
	if err := atomicfile.SyncDir(filepath.Dir(dir)); err != nil {
		return cp, err
	}
	if err := sb.Audit(sandbox.Event{Event: sandbox.EventCheckpoint, Data: map[string]any{"name": name, "save_ms": cp.SaveMS,
		"state_bytes": cp.StateBytes, "disk_bytes": cp.DiskBytes, "reflinked": cp.Reflinked}}); err != nil {
		return cp, err
	}
	return cp, nil
}

// Rollback takes the sandbox back to checkpoint name: its running VM (if
// any) is killed, the workspace disk and the collected manifest are put
// back, and a new supervisor restores the machine from the checkpoint's
// state through restorer (the supervised backend). The restored machine
// runs on under its supervisor, detached from ctx.
func Rollback(ctx context.Context, sb *sandbox.Sandbox, name string, restorer vm.Restorer) (time.Duration, error) {
	d, err := rollback(ctx, sb, name, restorer)
	if err != nil {
		return d, fmt.Errorf("roll %s back to %s: %w", sb.ID, name, err)
	}
	return d, nil
}

func rollback(ctx context.Context, sb *sandbox.Sandbox, name string, restorer vm.Restorer) (time.Duration, error) {
	if err := sandbox.ValidCheckpointName(name); err != nil {
		return 0, err
	}
	unlock, err := lockCheckpoints(sb)
	if err != nil {
		return 0, err
	}
	defer unlock()
	dir := sb.Path(filepath.Join(sandbox.CheckpointsDir, name))
	if _, err := os.Stat(filepath.Join(dir, sandbox.CheckpointFile)); err != nil {
		return 0, fmt.Errorf("no checkpoint %s (airlock checkpoints %s lists them)", name, sb.ID)
	}
	run := sb.RunDir()
	spec, err := readSpec(run)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := launch.Kill(ctx, run); err != nil {
		return 0, fmt.Errorf("stop the running VM: %w", err)
	}
	for i, d := range spec.Disks {
		if d.ReadOnly {
			// A baseline disk (the disk sync mode) is shared, not kept:
			// it must still be the one the checkpoint was made on.
			if _, err := os.Stat(strings.TrimSuffix(d.Path, ".img") + ".json"); err == nil {
				if err := VerifyBaseDisk(d.Path); errors.Is(err, fs.ErrNotExist) {
					return 0, fmt.Errorf("the baseline disk this checkpoint was made on is gone (disks unused for %v are pruned): start a new run: %w", BaseDiskKeep, err)
				} else if err != nil {
					return 0, fmt.Errorf("the checkpoint's baseline disk: %w", err)
				}
			}
			continue
		}
		tmp := d.Path + ".rollback"
		os.Remove(tmp)
		if _, err := disk.Keep(ctx, filepath.Join(dir, checkpointDisk(i)), tmp); err != nil {
			os.Remove(tmp)
			return 0, fmt.Errorf("put the VM's disk %s back: %w", filepath.Base(d.Path), err)
		}
		if err := os.Rename(tmp, d.Path); err != nil {
			return 0, err
		}
	}
	if err := copyFileIfExists(filepath.Join(dir, sandbox.GuestFile), sb.Path(sandbox.GuestFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	if _, err := restorer.Restore(context.WithoutCancel(ctx), spec, filepath.Join(dir, sandbox.CheckpointState)); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	if err := sb.Audit(sandbox.Event{Event: sandbox.EventRollback, Data: map[string]any{"name": name, "rollback_ms": d.Milliseconds()}}); err != nil {
		return d, err
	}
	return d, nil
}

// checkpointDisk is the file of a checkpoint that keeps the VM's i-th
// disk: disk.img for the first (the workspace disk on the minimal image,
// the root disk on the full one), disk.N.img for the others.
func checkpointDisk(i int) string {
	if i == 0 {
		return DiskFile
	}
	return fmt.Sprintf("disk.%d.img", i)
}

// readSpec reads the machine spec a supervisor was started with.
func readSpec(run string) (vm.Spec, error) {
	spec, err := launch.ReadSpec(run)
	if _, unread := errors.AsType[*fs.PathError](err); unread {
		return spec, fmt.Errorf("%w: no machine spec in %s", sandbox.ErrNoVM, run)
	}
	return spec, err
}

// copyFileIfExists copies a small file, replacing dst.
func copyFileIfExists(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(dst, b, 0o600)
}
