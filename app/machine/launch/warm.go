package launch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/machine/vmhost"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/disk"
	"github.com/airlock-dev/airlock/vm/image"
)

// Warm start: the first boot of an image in a given machine shape saves
// the machine's state once its agent is ready and before it has been given
// any identity (a probe, guest.ProbeMagic, tells when); later boots of that
// shape restore the state instead of booting. The restored guest awaits
// its first contact exactly as a fresh boot does, and the first contact
// gives it everything that must differ between sandboxes: SSH keys (the
// guest generates its host key then), hostname, clock, an entropy seed
// that reseeds its kernel's CRNG, and the disks to mount.
//
// A snapshot lives in HOME/cache/warm/<image>/<arch>/<shape>/: the state,
// what the hypervisor keeps next to it (QEMU: its command line; vz: the
// machine identifier the restore needs, vzconfig.SaveIdentity), and
// warm.json (WarmRecord: what it depends on). It is used only while everything it depends on is
// unchanged; otherwise the boot is cold and says why.

// warmVersion is the version of WarmRecord's format. Version 2: QEMU keeps
// the guest RAM in a file beside the state, which restores map on demand
// (version 1 snapshots had it in the state, and QEMU refuses them now).
const warmVersion = 2

// Files of a warm snapshot's directory.
const (
	warmRecordFile = "warm.json"
	warmStateFile  = "state"
	warmLockFile   = "lock"
	// warmRootFile is the root disk as it was when the state was saved,
	// for an image with one: the saved memory holds that file system
	// mounted, so a restored machine boots a clone of this disk, never a
	// fresh clone of the image's.
	warmRootFile = "root.img"
)

// WarmShape is the part of a machine that a saved state depends on,
// without what differs between sandboxes (names, run directory, disk
// files). Two boots with the same shape can share a snapshot.
type WarmShape struct {
	Image     string         `json:"image"`
	Arch      vm.Arch        `json:"arch"`
	CPUs      int            `json:"cpus"`
	MemoryMiB int            `json:"memory_mib"`
	Cmdline   string         `json:"cmdline"`
	Link      vm.LinkKind    `json:"link,omitempty"`
	Network   vm.NetworkMode `json:"network,omitempty"`
	// DiskSizes are the sizes of the attached disks, in order: the guest
	// learns a disk's size when it boots.
	DiskSizes []int64 `json:"disk_sizes,omitempty"`
}

// key names the shape's directory: a hash of it.
func (s WarmShape) key() string {
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// String describes the shape for notices.
func (s WarmShape) String() string {
	d := "no disk"
	if len(s.DiskSizes) > 0 {
		var sizes []string
		for _, n := range s.DiskSizes {
			sizes = append(sizes, fmt.Sprintf("%.3g GiB", float64(n)/(1<<30)))
		}
		d = "disk " + strings.Join(sizes, ", ")
	}
	return fmt.Sprintf("%s/%s, %d CPUs, %d MiB, %s", s.Image, s.Arch, s.CPUs, s.MemoryMiB, d)
}

// FileStamp identifies a file's content cheaply: its size and
// modification time, with the hash the image recorded for it.
type FileStamp struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	ModTime int64  `json:"mtime_ns"`
	SHA256  string `json:"sha256,omitempty"`
}

func stampFile(path, sha string) (FileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return FileStamp{}, err
	}
	return FileStamp{Path: path, Size: fi.Size(), ModTime: fi.ModTime().UnixNano(), SHA256: sha}, nil
}

// WarmRecord is what a warm snapshot depends on, written next to it.
type WarmRecord struct {
	Version int       `json:"version"`
	Shape   WarmShape `json:"shape"`
	// Kernel and Initrd are the image's files (the guest agent is inside
	// the initrd; Guest is its hash as the image recorded it).
	Kernel FileStamp `json:"kernel"`
	Initrd FileStamp `json:"initrd"`
	// Rootfs is the image's root disk, for an image with one; Lower its
	// read-only disk, for an image made from an OCI image.
	Rootfs FileStamp `json:"rootfs,omitzero"`
	Lower  FileStamp `json:"lower,omitzero"`
	Guest  string    `json:"guest_sha256"`
	// Hypervisor and Accelerator are the backend's account of itself
	// (program and version).
	Backend     string    `json:"backend"`
	Hypervisor  string    `json:"hypervisor"`
	Accelerator string    `json:"accelerator"`
	Saved       time.Time `json:"saved"`
	// SaveMS is how long the save took; BootMS the cold boot to ready.
	SaveMS int64 `json:"save_ms"`
	BootMS int64 `json:"boot_ms"`
}

// Stale says why a snapshot recorded as have cannot stand in for a boot
// that would be recorded as want, or "" when it can. have nil means there
// is no snapshot.
func Stale(have *WarmRecord, want WarmRecord) string {
	switch {
	case have == nil:
		return "no warm snapshot of " + want.Shape.String() + " yet"
	case have.Version != want.Version:
		return fmt.Sprintf("the warm snapshot's format is %d, this Airlock writes %d", have.Version, want.Version)
	case have.Shape.key() != want.Shape.key():
		return "the warm snapshot is of another machine (" + have.Shape.String() + ")"
	case have.Kernel != want.Kernel:
		return "the image's kernel changed since the warm snapshot (" + want.Kernel.Path + ")"
	case have.Initrd != want.Initrd:
		return "the image's initrd changed since the warm snapshot (" + want.Initrd.Path + ")"
	case have.Rootfs != want.Rootfs:
		return "the image's root disk changed since the warm snapshot (" + want.Rootfs.Path + ")"
	case have.Lower != want.Lower:
		return "the image's disk changed since the warm snapshot (" + want.Lower.Path + ")"
	case have.Guest != want.Guest:
		return "the guest agent changed since the warm snapshot"
	case have.Backend != want.Backend:
		return fmt.Sprintf("the warm snapshot was saved by %s, this boot uses %s", have.Backend, want.Backend)
	case have.Hypervisor != want.Hypervisor:
		return fmt.Sprintf("the hypervisor changed since the warm snapshot (%s, now %s)", have.Hypervisor, want.Hypervisor)
	case have.Accelerator != want.Accelerator:
		return fmt.Sprintf("the accelerator changed since the warm snapshot (%s, now %s)", have.Accelerator, want.Accelerator)
	}
	return ""
}

// warmDir is the directory of the snapshots of shape under home.
func warmDir(h string, shape WarmShape) string {
	return filepath.Join(home.Layout{Root: h}.WarmCache(), shape.Image, string(shape.Arch), shape.key())
}

// WarmDir is where the warm snapshots of image name for arch live.
func WarmDir(h, name string, arch vm.Arch) string {
	return filepath.Join(home.Layout{Root: h}.WarmCache(), name, string(arch))
}

// readWarmRecord reads dir's record; nil when there is none or it is
// unreadable (a snapshot that cannot be checked is not used).
func readWarmRecord(dir string) *WarmRecord {
	b, err := os.ReadFile(filepath.Join(dir, warmRecordFile))
	if err != nil || len(b) > 1<<20 {
		return nil
	}
	var r WarmRecord
	if json.Unmarshal(b, &r) != nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, warmStateFile)); err != nil {
		return nil
	}
	return &r
}

// wantRecord is the record a snapshot of this boot would have.
func wantRecord(ctx context.Context, b vm.Backend, img *image.Image, shape WarmShape) (WarmRecord, error) {
	r := WarmRecord{Version: warmVersion, Shape: shape, Guest: img.Meta.Guest.SHA256, Backend: b.Name()}
	var err error
	if r.Kernel, err = stampFile(realPath(img.Kernel), img.Meta.Kernel.SHA256); err != nil {
		return r, err
	}
	if r.Initrd, err = stampFile(realPath(img.Initrd), img.Meta.Initrd.SHA256); err != nil {
		return r, err
	}
	if img.Rootfs != "" {
		if r.Rootfs, err = stampFile(realPath(img.Rootfs), img.Meta.Rootfs.SHA256); err != nil {
			return r, err
		}
	}
	if img.Lower != "" {
		if r.Lower, err = stampFile(realPath(img.Lower), img.Meta.Lower.SHA256); err != nil {
			return r, err
		}
	}
	d, ok := b.(vm.Describer)
	if !ok {
		return r, fmt.Errorf("the %s backend cannot describe itself: %w", b.Name(), vm.ErrNotSupported)
	}
	rep, err := d.Describe(ctx, shape.Arch)
	if err != nil {
		return r, err
	}
	r.Hypervisor, r.Accelerator = rep.Hypervisor, rep.Accelerator
	return r, nil
}

// warmPlan is what a warm boot decided.
type warmPlan struct {
	dir    string
	want   WarmRecord
	ok     bool   // restore from dir
	reason string // why not, for the notice
	save   bool   // save a snapshot on the way (none, or a stale one)
}

// planWarm decides between a restore and a cold boot that saves.
func planWarm(ctx context.Context, o Options, img *image.Image, shape WarmShape) warmPlan {
	p := warmPlan{dir: warmDir(o.Home, shape)}
	if _, ok := o.Backend.(vm.Restorer); !ok {
		p.reason = fmt.Sprintf("the %s backend cannot restore saved state", o.Backend.Name())
		return p
	}
	want, err := wantRecord(ctx, o.Backend, img, shape)
	if err != nil {
		p.reason = "cannot tell whether a warm snapshot is current: " + err.Error()
		return p
	}
	p.want = want
	p.reason = Stale(readWarmRecord(p.dir), want)
	if p.reason == "" && img.Rootfs != "" {
		if _, err := os.Stat(filepath.Join(p.dir, warmRootFile)); err != nil {
			p.reason = "the warm snapshot has no root disk"
		}
	}
	p.ok = p.reason == ""
	p.save = !p.ok
	return p
}

// lockWarm takes dir's lock without waiting; ok is false when another boot
// holds it (saving the same snapshot).
func lockWarm(dir string) (unlock func(), ok bool) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false
	}
	f, err := os.OpenFile(filepath.Join(dir, warmLockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}

// saveWarm waits for the agent of the freshly booted m (no first contact
// yet) and saves its state as the snapshot of p.dir. The old snapshot is
// removed first; the new one is written beside and renamed into place,
// its record last, so a reader sees a whole snapshot or none.
//
// root, if set, is the machine's root disk: the machine is paused, its
// state saved and the disk kept as it is then (disk.Keep) beside the
// state, and the machine runs on.
func saveWarm(ctx context.Context, m vm.Machine, dial client.DialFunc, p warmPlan, root string, bootStart time.Time) error {
	unlock, ok := lockWarm(p.dir)
	if !ok {
		return errors.New("another boot is saving it")
	}
	defer unlock()
	if _, err := client.Probe(ctx, dial); err != nil {
		return err
	}
	boot := time.Since(bootStart)
	// The record first: without it the rest is never used.
	if err := os.Remove(filepath.Join(p.dir, warmRecordFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	old, err := os.ReadDir(p.dir)
	if err != nil {
		return err
	}
	for _, e := range old {
		if e.Name() != warmLockFile {
			if err := os.RemoveAll(filepath.Join(p.dir, e.Name())); err != nil {
				return err
			}
		}
	}
	tmp, err := os.MkdirTemp(p.dir, ".saving-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	t0 := time.Now()
	if root == "" {
		if err := saveMachine(ctx, m, filepath.Join(tmp, warmStateFile)); err != nil {
			return err
		}
	} else if err := saveWithDisk(ctx, m, tmp, root); err != nil {
		return err
	}
	rec := p.want
	rec.Saved, rec.SaveMS, rec.BootMS = time.Now().UTC(), time.Since(t0).Milliseconds(), boot.Milliseconds()
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(tmp, e.Name()), filepath.Join(p.dir, e.Name())); err != nil {
			return err
		}
	}
	return atomicfile.WriteFile(filepath.Join(p.dir, warmRecordFile), append(b, '\n'), 0o600)
}

// saveWithDisk saves m's state into dir with its root disk as it is at
// that moment: the machine stays paused from before the save until the
// disk is kept (the save flushes the disk's writes), then runs on.
func saveWithDisk(ctx context.Context, m vm.Machine, dir, root string) (err error) {
	if err := pauseMachine(ctx, m, true); err != nil {
		return fmt.Errorf("pause to save with the root disk: %w", err)
	}
	defer func() {
		if rerr := pauseMachine(context.WithoutCancel(ctx), m, false); rerr != nil {
			err = errors.Join(err, fmt.Errorf("resume after saving: %w", rerr))
		}
	}()
	if err := saveMachine(ctx, m, filepath.Join(dir, warmStateFile)); err != nil {
		return err
	}
	if _, err := disk.Keep(ctx, root, filepath.Join(dir, warmRootFile)); err != nil {
		return fmt.Errorf("keep the root disk with the warm snapshot: %w", err)
	}
	return nil
}

// pauseMachine pauses m (or resumes it, with pause false): through its
// supervisor, or the machine's own vm.Pauser.
func pauseMachine(ctx context.Context, m vm.Machine, pause bool) error {
	if c, ok := vmhost.SupervisorOf(m); ok {
		if pause {
			return c.Pause(ctx)
		}
		return c.Resume(ctx)
	}
	p, ok := m.(vm.Pauser)
	if !ok {
		return fmt.Errorf("pause: %w", vm.ErrNotSupported)
	}
	if pause {
		return p.Pause(ctx)
	}
	return p.Resume(ctx)
}

// saveMachine saves m's state to path: through its supervisor, or the
// machine's own vm.Snapshotter.
func saveMachine(ctx context.Context, m vm.Machine, path string) error {
	if c, ok := vmhost.SupervisorOf(m); ok {
		return c.Save(ctx, path)
	}
	s, ok := m.(vm.Snapshotter)
	if !ok {
		return fmt.Errorf("save: %w", vm.ErrNotSupported)
	}
	return s.Save(ctx, path)
}
