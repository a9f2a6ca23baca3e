package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/guest"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/transfer"
)

// diskWorkspace is SyncDisk: the baseline is two read-only disks written
// on the host (MakeBaseLayers: the project's full disk and the changes
// since, shared by every sandbox of the same tree and owner), the guest
// stacks them as the lower layers of an overlay on /workspace whose
// upper layer is on the sandbox's own disk (DiskFile, the quota), and
// the collect reads the upper layer only.
type diskWorkspace struct {
	r        *runner
	uid, gid int    // the baseline's owner: the command's user (RunSpec.Owner)
	disk     string // the upper layer's disk
	base     BaseLayers
	unpin    func() // the base disks' pins (PinBaseDisk), held until the machine is gone
	pushMS   int64
}

func (w *diskWorkspace) prepare(ctx context.Context, report *manifest.Report) (Attach, error) {
	r := w.r
	if err := r.setStatus(sandbox.StatusPushing, nil); err != nil {
		return Attach{}, err
	}
	t := time.Now()
	msg := "writing the baseline disk"
	r.progress(Progress{Step: StepPush, Message: msg})
	req := BaseDiskRequest{Dir: r.o.BaseDisks, Project: r.project, Manifest: r.base, Objects: r.s.Objects(),
		UID: w.uid, GID: w.gid, Logger: r.log, Stored: r.baselineStored, Progress: func(done, total int64) {
			r.progress(Progress{Step: StepPush, Message: fmt.Sprintf("%s, %d/%d MB", msg, done>>20, total>>20)})
		}}
	base, err := MakeBaseLayers(ctx, req)
	if err == nil {
		w.unpin, err = pinLayers(base)
		if errors.Is(err, fs.ErrNotExist) {
			// Another run pruned a disk between its making and its pin:
			// once more, pinned this time before any prune can see it.
			r.log.Info("a base disk was pruned by another run before this one pinned it: making it again", "err", err)
			if base, err = MakeBaseLayers(ctx, req); err == nil {
				w.unpin, err = pinLayers(base)
			}
		}
	}
	if err != nil {
		return Attach{}, err
	}
	w.base, w.pushMS = base, time.Since(t).Milliseconds()
	if err := r.sb.Audit(sandbox.Event{Event: sandbox.EventPushed, Data: map[string]any{
		"files": report.Files, "bytes": report.Bytes, "push_ms": w.pushMS, "sync_mode": r.o.Sync, "base_disk": base.Base.ID, "delta_disk": base.Delta.ID, "baseline": base.ID}}); err != nil {
		return Attach{}, err
	}
	path := r.sb.Path(DiskFile)
	if err := CreateDisk(ctx, path, r.o.DiskSize, r.o.BaseDisks); err != nil {
		return Attach{}, err
	}
	w.disk = path
	return Attach{Disks: []launch.Disk{{Path: path, Mount: sandbox.Workspace, Lower: base.Base.Path, Delta: base.Delta.Path}}}, nil
}

// release removes the upper layer's disk once the machine is gone (a
// kept machine keeps it); the baseline disks stay in the cache.
func (w *diskWorkspace) release() {
	if w.disk != "" && !w.r.o.Keep {
		w.r.removeDisk(w.disk)
	}
	if w.unpin != nil {
		w.unpin() // a kept machine has the disks open
	}
}

// pinLayers pins both disks of l (PinBaseDisk) and returns the release of
// both.
func pinLayers(l BaseLayers) (func(), error) {
	base, err := PinBaseDisk(l.Base.Path)
	if err != nil {
		return nil, err
	}
	delta, err := PinBaseDisk(l.Delta.Path)
	if err != nil {
		base()
		return nil, err
	}
	return func() { delta(); base() }, nil
}

// fill has nothing to send: the overlay is /workspace, owned by the
// command's user from the start. Both ends know the baseline by its ID
// (the delta disk's BaseDiskIDFile).
func (w *diskWorkspace) fill(_ context.Context, m Machine, _ *manifest.Report) (transfer.Known, int64, error) {
	w.r.user = w.r.commandUser(m)
	return transfer.Known{ID: w.base.ID, Manifest: w.r.base}, w.pushMS, nil
}

func (w *diskWorkspace) transfer() Transfer {
	return overlayTransfer{Transfer: w.r.o.Transfer, dirs: transfer.OverlayDirs{
		Lower: guest.OverlayLower(sandbox.Workspace), Upper: guest.OverlayUpper(sandbox.Workspace)}}
}
func (w *diskWorkspace) hostCopy() bool { return false }
func (w *diskWorkspace) collected()     {}

// overlayTransfer lists an overlay's changes from its upper layer; pulls
// go as t's.
type overlayTransfer struct {
	Transfer
	dirs transfer.OverlayDirs
}

func (t overlayTransfer) Manifest(ctx context.Context, m Machine, dir string, since transfer.Known, limits manifest.Limits, excludes []string) (transfer.Known, error) {
	return transfer.RemoteManifest(ctx, m, dir, since, transfer.Options{Limits: limits, Excludes: excludes, Overlay: t.dirs})
}
