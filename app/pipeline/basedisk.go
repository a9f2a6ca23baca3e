package pipeline

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/Microsoft/hcsshim/ext4/tar2ext4"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/internal/ctxio"
	"github.com/airlock-dev/airlock/internal/diskfree"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
)

// baseDiskFormat is the layout of a base disk (see MakeBaseDisk). It is
// part of every disk's ID: a new layout makes new disks and never reads
// an old one.
const baseDiskFormat = 1

// BaseDiskTree is the directory of a base disk that holds the project;
// the guest mounts it as the overlay's lower layer. BaseDiskIDFile, beside
// it, holds the disk's ID (64 hex digits, no newline), for the guest to
// check that it was given the disk it was told about.
const (
	BaseDiskTree   = "tree"
	BaseDiskIDFile = "id"
)

// MinBaseDiskSize is the smallest size class of a base disk.
const MinBaseDiskSize = 1 << 30

// baseDiskTime is every entry's time on a base disk: the manifest records
// none, and a fixed one keeps the image a function of its inputs (two
// writers of the same disk write the same bytes). It is after 1980, which
// zip files cannot go below.
var baseDiskTime = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// ErrBaseDiskDamaged means a base disk does not match the record written
// with it: it was truncated, edited or extended on the host, or its record
// is missing or unreadable. MakeBaseDisk writes such a disk again.
var ErrBaseDiskDamaged = errors.New("base disk damaged")

// BaseDisk is a project's baseline as a read-only ext4 image.
type BaseDisk struct {
	// Path is the image, Dir/ID.img: attach it read-only, never write it.
	Path string
	// ID is the lower-case hex SHA-256 that names the disk (BaseDiskID).
	ID string
}

// BaseDiskRequest is what MakeBaseDisk writes and where.
type BaseDiskRequest struct {
	// Dir is the cache of base disks (e.g. HOME/cache/baselines), made
	// 0700 if missing. It holds ID.img, ID.json (the record each image is
	// checked against) and a lock file.
	Dir string
	// Manifest is the baseline: sorted, every file's content in Objects.
	Manifest *manifest.Manifest
	// Objects is the content store the baseline was snapshotted into.
	Objects *objects.Store
	// Project, for MakeBaseLayers, is the project's directory: the key
	// of its record of the project's last full disk. Empty, every
	// baseline gets a full disk of its own.
	Project string
	// UID and GID own every entry of the project on the disk: the guest
	// user the command runs as.
	UID, GID int
	// Stored, when set, is called before a disk is written from Objects
	// and returns once the baseline's files are there (a snapshot still
	// copying them while its disks are looked up); its error fails the
	// write. A disk found in the cache does not call it.
	Stored func() error
	// Progress, when set, is called with the bytes of file content
	// written so far and in all, from one goroutine at a time, once a
	// write has taken a second, then every tenth of a second and at the
	// end. Nil reports nothing.
	Progress func(done, total int64)
	// Logger receives a warning when a damaged disk is written again, and
	// debug messages; nil discards them.
	Logger *slog.Logger
}

// baseDiskRecord is ID.json: what VerifyBaseDisk checks the image against.
type baseDiskRecord struct {
	Format int `json:"format"`
	// FSSize is the bytes the file system takes: the image's start.
	FSSize int64 `json:"fs_size"`
	// Size is the image's size, BaseDiskSize(FSSize): past FSSize it is a
	// hole.
	Size int64 `json:"size"`
	// SHA256 is the hash of the image's first FSSize bytes.
	SHA256 string `json:"sha256"`
	// Holes says the host's file system showed the tail as a hole when the
	// image was written, so data found there later is an edit. Where it
	// cannot tell (no SEEK_DATA), only the size is checked.
	Holes bool `json:"holes"`
	// Stamp is how the host's file system showed the image when it was
	// last found good: while the image still shows exactly this, it was
	// not written since, and VerifyBaseDisk does not read it again.
	Stamp *fileStamp `json:"stamp,omitempty"`
}

// fileStamp is what the host's file system tells of a file without
// reading it. Writing a file changes its ctime, which no user can set
// back (only the clock can); renaming it, chmod and links change it too
// (the next check then reads the image once and records the new stamp).
type fileStamp struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
}

// stampOf is fi's stamp; ok is false where the file system does not say
// (no syscall.Stat_t).
func stampOf(fi fs.FileInfo) (fileStamp, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStamp{}, false
	}
	mtime, ctime := statTimes(st)
	return fileStamp{Dev: uint64(st.Dev), Ino: uint64(st.Ino), Size: fi.Size(), MtimeNS: mtime, CtimeNS: ctime}, true
}

// BaseDiskSize is the size of the image holding a file system of fs
// bytes: the smallest power of two at least fs and at least
// MinBaseDiskSize. Warm snapshots match on disk sizes, so most projects
// share one class.
func BaseDiskSize(fs int64) int64 {
	size := int64(MinBaseDiskSize)
	for size < fs && size <= math.MaxInt64/2 {
		size *= 2
	}
	return size
}

// BaseDiskID names the base disk of m owned by uid:gid: the lower-case
// hex SHA-256 of the disk format, m's canonical encoding, uid and gid. An
// unchanged project's runs, its fan-out attempts and reply rounds share
// one disk.
func BaseDiskID(m *manifest.Manifest, uid, gid int) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "airlock base disk\x00%d\x00%d\x00%d\x00", baseDiskFormat, uid, gid)
	if err := m.Encode(h); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// maxID is the largest uid or gid a base disk gives its entries.
const maxID = math.MaxInt32

// MakeBaseDisk returns the base disk of req.Manifest, writing it into
// req.Dir unless a good one is there already. The image is an ext4 file
// system (pure Go: no mkfs, no root, no mount) whose root (0755, 0:0)
// holds BaseDiskIDFile (0444, 0:0) and BaseDiskTree (0755, UID:GID) with
// exactly the manifest's entries below it, each owned by UID:GID with the
// manifest's mode, each file's content checked against the manifest's
// size and SHA-256 as it is written. The image is extended with a hole to
// BaseDiskSize, made 0400, and recorded in ID.json. A disk found in the
// cache is verified first (VerifyBaseDisk); a damaged one is removed and
// written again, with a warning. Callers for the same disk at once (the
// attempts of a fan-out) wait for one writer and share its disk.
func MakeBaseDisk(ctx context.Context, req BaseDiskRequest) (BaseDisk, error) {
	if err := req.check(); err != nil {
		return BaseDisk{}, fmt.Errorf("make base disk: %w", err)
	}
	id, err := BaseDiskID(req.Manifest, req.UID, req.GID)
	if err != nil {
		return BaseDisk{}, fmt.Errorf("make base disk: %w", err)
	}
	disk, err := makeLayerDisk(ctx, req, id, layer{id: id, entries: fullLayer(req.Manifest)})
	if err != nil {
		return BaseDisk{}, fmt.Errorf("make base disk: %w", err)
	}
	return disk, nil
}

// projectLimits are the rules every path of a baseline disk must keep:
// those of a manifest from the guest, without its size caps (this one is
// the project's).
var projectLimits = manifest.Limits{MaxEntries: -1, MaxFileSize: -1, MaxTotalBytes: -1,
	MaxPathLen: -1, MaxTargetLen: -1, AllowGit: true, CaseSensitive: true}

// check says what is wrong with req.
func (req BaseDiskRequest) check() error {
	switch {
	case req.Dir == "":
		return errors.New("no cache directory")
	case req.Manifest == nil || req.Objects == nil:
		return errors.New("no baseline (manifest and content store)")
	case req.UID < 0 || req.UID > maxID || req.GID < 0 || req.GID > maxID:
		return fmt.Errorf("owner %d:%d is not a valid uid:gid (0 to %d)", req.UID, req.GID, maxID)
	}
	// Every path becomes a name on the disk.
	return req.Manifest.Validate(projectLimits)
}

// layer is what one disk holds: at its root BaseDiskIDFile (id) and, on
// a delta disk, DeltaDiskBaseFile (base), and under BaseDiskTree the
// entries, in manifest order.
type layer struct {
	id, base string
	entries  []layerEntry
}

// layerEntry is an entry of a layer's tree: one of the baseline's, or a
// whiteout (an overlay whiteout, a character device 0/0: the lower
// layer's entry at Path is gone). Opaque marks a directory that hides the
// lower layer's below it (the trusted.overlay.opaque xattr).
type layerEntry struct {
	manifest.Entry
	Whiteout, Opaque bool
}

// fullLayer is the layer of a whole baseline.
func fullLayer(m *manifest.Manifest) []layerEntry {
	out := make([]layerEntry, len(m.Entries))
	for i, e := range m.Entries {
		out[i] = layerEntry{Entry: e}
	}
	return out
}

// makeLayerDisk returns the disk named name holding l, writing it into
// req.Dir unless a good one is there (MakeBaseDisk says how).
func makeLayerDisk(ctx context.Context, req BaseDiskRequest, name string, l layer) (BaseDisk, error) {
	log := req.logger()
	disk := BaseDisk{Path: filepath.Join(req.Dir, name+".img"), ID: name}
	if err := privateDir(req.Dir); err != nil {
		return BaseDisk{}, err
	}

	if found, ok := cachedLayerDisk(ctx, req, name); ok {
		return found, nil
	}
	if req.Stored != nil {
		if err := req.Stored(); err != nil {
			return BaseDisk{}, err
		}
	}
	unlock, err := lockBaseDisks(ctx, req.Dir, syscall.LOCK_EX)
	if err != nil {
		return BaseDisk{}, err
	}
	defer unlock()
	// Another caller may have written it while this one waited.
	switch err := VerifyBaseDisk(disk.Path); {
	case err == nil:
		return disk, nil
	case errors.Is(err, ErrBaseDiskDamaged):
		log.Warn("the cached base disk is damaged (changed on the host, or cut short): writing it again", "path", disk.Path, "err", err)
	}
	for _, p := range []string{disk.Path, recordPath(disk.Path)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return BaseDisk{}, fmt.Errorf("remove the damaged disk: %w", err)
		}
	}
	need := baseDiskNeed(l.entries)
	if err := checkBaseDiskRoom(req.Dir, need, diskfree.Bytes(req.Dir)); err != nil {
		return BaseDisk{}, err
	}
	start := time.Now()
	if err := writeBaseDisk(ctx, req, disk, l, need); err != nil {
		return BaseDisk{}, err
	}
	log.Debug("base disk written", "id", name, "path", disk.Path, "took", time.Since(start))
	pruneBaseDisks(req.Dir, name, time.Now(), log)
	return disk, nil
}

// cachedLayerDisk returns the disk named name when req.Dir holds a good
// one (VerifyBaseDisk), marking it used. Most calls find the disk: they
// check it side by side, under a shared lock that keeps a writer from
// swapping it meanwhile.
func cachedLayerDisk(ctx context.Context, req BaseDiskRequest, name string) (BaseDisk, bool) {
	disk := BaseDisk{Path: filepath.Join(req.Dir, name+".img"), ID: name}
	unlock, err := lockBaseDisks(ctx, req.Dir, syscall.LOCK_SH)
	if err != nil {
		return BaseDisk{}, false
	}
	defer unlock()
	if err := VerifyBaseDisk(disk.Path); err != nil {
		return BaseDisk{}, false
	}
	// Its record's time is its last use, for pruneBaseDisks.
	now := time.Now()
	_ = os.Chtimes(recordPath(disk.Path), now, now)
	req.logger().Debug("base disk found", "id", name, "path", disk.Path)
	return disk, true
}

func (req BaseDiskRequest) logger() *slog.Logger {
	if req.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return req.Logger
}

// How long and how many base disks are kept: a disk not used for
// BaseDiskKeep goes when another is written, and only the
// BaseDiskKeepCount used last are kept. A kept sandbox's checkpoint whose
// disk went cannot be rolled back (the rollback says so).
const (
	BaseDiskKeep      = 72 * time.Hour
	BaseDiskKeepCount = 32
)

// pruneBaseDisks removes from dir the disks (image and record) other than
// keep that were last used before now-BaseDiskKeep, or beyond the
// BaseDiskKeepCount used last. The caller holds the exclusive lock; a
// machine still reading a removed image keeps it open.
func pruneBaseDisks(dir, keep string, now time.Time, log *slog.Logger) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type rec struct {
		id   string
		used time.Time
	}
	var recs []rec
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || id == keep || len(id) != 64 {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			recs = append(recs, rec{id, fi.ModTime()})
		}
	}
	slices.SortFunc(recs, func(a, b rec) int { return b.used.Compare(a.used) })
	for i, r := range recs {
		if i < BaseDiskKeepCount-1 && now.Sub(r.used) < BaseDiskKeep {
			continue
		}
		img := filepath.Join(dir, r.id+".img")
		if baseDiskPinned(img) {
			log.Debug("base disk in use, not pruned", "id", r.id)
			continue
		}
		if err := os.Remove(img); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("prune base disk", "path", img, "err", err)
			continue
		}
		os.Remove(filepath.Join(dir, r.id+".json"))
		os.Remove(filepath.Join(dir, r.id+manifestSuffix))
		log.Debug("pruned base disk", "id", r.id, "last_used", r.used)
	}
}

// PinBaseDisk keeps every process's pruneBaseDisks from removing the
// base disk image at path until release is called: a run pins its disks
// from the moment it has them until its machine is gone, so that another
// run's prune (past BaseDiskKeepCount disks, as a busy fan-out makes)
// cannot remove one between its check and the machine opening it. The
// pin is a shared flock on the image; pruneBaseDisks skips an image it
// cannot lock exclusively. It fails with fs.ErrNotExist when the image is
// gone, or was replaced, by the time it is pinned: make it again.
func PinBaseDisk(path string) (release func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return nil, fmt.Errorf("pin base disk %s: %w", path, err)
	}
	// Removed (or swapped) between the open and the lock: the pin holds
	// a file nobody will boot.
	pinned, err1 := f.Stat()
	now, err2 := os.Stat(path)
	if err1 != nil || err2 != nil || !os.SameFile(pinned, now) {
		f.Close()
		return nil, fmt.Errorf("pin base disk %s: it was removed meanwhile: %w", path, fs.ErrNotExist)
	}
	return func() { f.Close() }, nil
}

// baseDiskPinned says some process holds PinBaseDisk's pin on the image
// at path.
func baseDiskPinned(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close() // releases the lock taken below, if it was
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	return errors.Is(err, syscall.EWOULDBLOCK)
}

// recordPath is the record beside the image at path.
func recordPath(path string) string {
	return strings.TrimSuffix(path, ".img") + ".json"
}

// privateDir makes dir (and its parents) if missing and makes it 0700.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm() != 0o700 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// baseDiskLock is the file in the cache directory that writers hold
// exclusively and readers shared. It is never removed.
const baseDiskLock = "lock"

// lockBaseDisks takes the cache directory's lock (how: LOCK_SH or
// LOCK_EX) and returns its release. A caller whose ctx ends while it
// waits gets ctx's error; the lock is released as soon as it is taken.
func lockBaseDisks(ctx context.Context, dir string, how int) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, baseDiskLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the base disk cache: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- syscall.Flock(int(f.Fd()), how) }()
	select {
	case err := <-done:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock the base disk cache: %w", err)
		}
		return func() { f.Close() }, nil
	case <-ctx.Done():
		// Closing the file releases the lock once the waiter gets it.
		go func() { <-done; f.Close() }()
		return nil, ctx.Err()
	}
}

// VerifyBaseDisk checks the image at path (a BaseDisk's Path) against its
// record, ID.json beside it. An image that shows the record's stamp (the
// same file, size, mtime and ctime as when it was last found good) was
// not written since and is good without being read. Any other is read
// whole: its size, the SHA-256 of its file system, and no data in the
// hole past the file system where the host's file system can tell; a
// good one gets its new stamp recorded (an image renamed, chmod-ed or
// linked is read once more). An image that does not exist gives an error
// matching fs.ErrNotExist; one that does not match its record an error
// wrapping ErrBaseDiskDamaged. Check a disk made earlier before
// attaching it.
func VerifyBaseDisk(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("verify base disk: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("verify base disk: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("verify base disk %s: %w: not a regular file (%s)", path, ErrBaseDiskDamaged, fi.Mode().Type())
	}
	rec, err := readBaseDiskRecord(recordPath(path))
	if err != nil {
		return fmt.Errorf("verify base disk %s: %w: %w", path, ErrBaseDiskDamaged, err)
	}
	if fi.Size() != rec.Size {
		return fmt.Errorf("verify base disk %s: %w: %d bytes, its record says %d", path, ErrBaseDiskDamaged, fi.Size(), rec.Size)
	}
	stamp, stamped := stampOf(fi)
	if stamped && rec.Stamp != nil && *rec.Stamp == stamp {
		return nil
	}
	if err := hashBaseDisk(f, path, rec); err != nil {
		return err
	}
	if stamped {
		// Best effort: without it, the next check reads the image again.
		rec.Stamp = &stamp
		_ = writeBaseDiskRecord(recordPath(path), rec)
	}
	return nil
}

// hashBaseDisk reads the image f (at path) whole and checks it against
// rec: no data past its file system where the host can tell, and its
// file system's SHA-256.
func hashBaseDisk(f *os.File, path string, rec baseDiskRecord) error {
	if rec.Holes {
		switch off, err := f.Seek(rec.FSSize, unix.SEEK_DATA); {
		case err == nil:
			return fmt.Errorf("verify base disk %s: %w: data at byte %d, past its file system's %d bytes", path, ErrBaseDiskDamaged, off, rec.FSSize)
		case !errors.Is(err, syscall.ENXIO):
			return fmt.Errorf("verify base disk %s: %w", path, err)
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("verify base disk %s: %w", path, err)
	}
	h := sha256.New()
	if _, err := io.CopyBuffer(h, io.LimitReader(f, rec.FSSize), make([]byte, 1<<20)); err != nil {
		return fmt.Errorf("verify base disk %s: %w", path, err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != rec.SHA256 {
		return fmt.Errorf("verify base disk %s: %w: its file system hashes to %s, its record says %s", path, ErrBaseDiskDamaged, sum, rec.SHA256)
	}
	return nil
}

// writeBaseDiskRecord writes rec at path, atomically.
func writeBaseDiskRecord(path string, rec baseDiskRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o600)
}

// readBaseDiskRecord reads and checks a record.
func readBaseDiskRecord(path string) (baseDiskRecord, error) {
	var rec baseDiskRecord
	f, err := os.Open(path)
	if err != nil {
		return rec, err
	}
	defer f.Close()
	dec := json.NewDecoder(io.LimitReader(f, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return rec, fmt.Errorf("record %s: %w", path, err)
	}
	switch {
	case rec.Format != baseDiskFormat:
		return rec, fmt.Errorf("record %s: format %d, want %d", path, rec.Format, baseDiskFormat)
	case rec.FSSize <= 0 || rec.Size != BaseDiskSize(rec.FSSize):
		return rec, fmt.Errorf("record %s: sizes %d and %d do not fit", path, rec.FSSize, rec.Size)
	case objects.ValidSum(rec.SHA256) != nil:
		return rec, fmt.Errorf("record %s: sha256 %q is not 64 lower-case hex digits", path, rec.SHA256)
	}
	return rec, nil
}

// baseDiskNeed estimates the bytes a base disk of m takes on the host:
// each file rounded up to a 4 KiB block, a block per directory and long
// symlink, an inode each, and a few MiB of file system around them.
func baseDiskNeed(entries []layerEntry) int64 {
	const block, inode = 4096, 256
	need := int64(4 << 20)
	for _, e := range entries {
		need += inode
		switch e.Type {
		case manifest.File:
			need += (e.Size + block - 1) / block * block
		case manifest.Dir:
			need += block
		case manifest.Symlink:
			if len(e.Target) > 59 {
				need += block
			}
		}
	}
	return need
}

// checkBaseDiskRoom refuses a disk of about need bytes in dir, which has
// free bytes left (-1: unknown).
func checkBaseDiskRoom(dir string, need, free int64) error {
	if free >= 0 && free < need {
		return fmt.Errorf("the project's base disk needs about %d MB and %s has %d MB free: free some space (airlock rm old sandboxes, remove old *.img disks in %s, or leave large files out of the project with airlock.toml excludes) and try again",
			mb(need), dir, mb(free), dir)
	}
	return nil
}

func mb(n int64) int64 { return (n + 1e6 - 1) / 1e6 }

// freeSpace is the space left for an unprivileged user on the file
// system holding dir, -1 when it cannot be told.
func freeSpace(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// writeBaseDisk writes the disk into a temporary file in the cache
// directory and renames it and its record into place (the caller holds
// the cache's lock). Nothing is left behind if it fails.
func writeBaseDisk(ctx context.Context, req BaseDiskRequest, disk BaseDisk, l layer, need int64) (err error) {
	tmp, err := os.CreateTemp(req.Dir, disk.ID+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	var total int64
	for _, e := range l.entries {
		total += e.Size
	}
	prog := &byteProgress{report: req.Progress, total: total, start: time.Now()}
	pr, pw := io.Pipe()
	errStopped := errors.New("the ext4 writer stopped")
	produced := make(chan error, 1)
	go func() {
		err := writeBaseTar(ctx, pw, req, l, prog)
		pw.CloseWithError(err)
		produced <- err
	}()
	// The writer reserves metadata for its largest disk: a 16 GiB disk
	// takes one block of group descriptors, a larger one a block more for
	// each 16 GiB.
	cerr := tar2ext4.ConvertTarToExt4(pr, tmp, tar2ext4.MaximumDiskSize(max(16<<30, 2*need)))
	pr.CloseWithError(errStopped)
	if perr := <-produced; perr != nil && !errors.Is(perr, errStopped) {
		return perr
	}
	if cerr != nil {
		return fmt.Errorf("write ext4: %w", cerr)
	}
	prog.finish()
	if err := padInodeBitmaps(tmp); err != nil {
		return fmt.Errorf("write ext4: %w", err)
	}

	fsSize, err := tmp.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	h := sha256.New()
	if _, err := io.CopyBuffer(h, ctxio.Reader(ctx, io.LimitReader(tmp, fsSize)), make([]byte, 1<<20)); err != nil {
		return err
	}
	rec := baseDiskRecord{Format: baseDiskFormat, FSSize: fsSize, Size: BaseDiskSize(fsSize), SHA256: hex.EncodeToString(h.Sum(nil))}
	if err := tmp.Truncate(rec.Size); err != nil {
		return err
	}
	_, serr := tmp.Seek(fsSize, unix.SEEK_DATA)
	rec.Holes = errors.Is(serr, syscall.ENXIO)
	if err := tmp.Chmod(0o400); err != nil {
		return err
	}
	// No fsync: the disk is a cache, and every use checks it against the
	// record's hash, so one a crash cut short is written again.
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The record first: an image is never there without it, and a record
	// without its image is only a miss. Once the image is in place, its
	// stamp goes into the record (renaming it changed its ctime).
	if err := writeBaseDiskRecord(recordPath(disk.Path), rec); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), disk.Path); err != nil {
		os.Remove(recordPath(disk.Path))
		return err
	}
	if fi, err := os.Stat(disk.Path); err == nil {
		if stamp, ok := stampOf(fi); ok {
			rec.Stamp = &stamp
			if err := writeBaseDiskRecord(recordPath(disk.Path), rec); err != nil {
				return err
			}
		}
	}
	return atomicfile.SyncDir(req.Dir)
}

// padInodeBitmaps sets the bits past the last inode of each group's
// inode bitmap, as ext4 wants and as hcsshim's writer leaves undone
// (e2fsck: "Padding at end of inode bitmap is not set"; the kernel reads
// the disk either way, but a clean e2fsck is the test of a good disk).
// It reads the layout that writer uses: 4 KiB blocks, 32-byte group
// descriptors from block 1.
func padInodeBitmaps(f *os.File) error {
	const block = 4096
	sb := make([]byte, 1024)
	if _, err := f.ReadAt(sb, 1024); err != nil {
		return fmt.Errorf("read the superblock: %w", err)
	}
	le := binary.LittleEndian
	blocks, logBlock := le.Uint32(sb[0x4:]), le.Uint32(sb[0x18:])
	perGroup, inodesPerGroup := le.Uint32(sb[0x20:]), le.Uint32(sb[0x28:])
	const incompat64bit = 0x80
	if le.Uint16(sb[0x38:]) != 0xef53 || logBlock != 2 || le.Uint32(sb[0x60:])&incompat64bit != 0 ||
		perGroup == 0 || inodesPerGroup == 0 || inodesPerGroup > block*8 {
		return errors.New("the file system is not laid out as expected")
	}
	if inodesPerGroup == block*8 {
		return nil // no padding
	}
	groups := (blocks + perGroup - 1) / perGroup
	gds := make([]byte, int(groups)*32)
	if _, err := f.ReadAt(gds, block); err != nil {
		return fmt.Errorf("read the group descriptors: %w", err)
	}
	bitmap := make([]byte, block)
	for g := range groups {
		at := int64(le.Uint32(gds[g*32+4:])) * block
		if _, err := f.ReadAt(bitmap, at); err != nil {
			return fmt.Errorf("read the inode bitmap of group %d: %w", g, err)
		}
		for j := inodesPerGroup; j < block*8; j++ {
			bitmap[j/8] |= 1 << (j % 8)
		}
		if _, err := f.WriteAt(bitmap, at); err != nil {
			return err
		}
	}
	return nil
}

// writeBaseTar writes the disk's tree as a tar stream: the root, the ID
// file (and a delta's base file), the tree directory and the layer's
// entries in order (parents first: they are sorted).
func writeBaseTar(ctx context.Context, w io.Writer, req BaseDiskRequest, l layer, prog *byteProgress) error {
	tw := tar.NewWriter(w)
	hdr := func(name string, typ byte, mode int64, uid, gid int) *tar.Header {
		return &tar.Header{Name: name, Typeflag: typ, Mode: mode, Uid: uid, Gid: gid,
			ModTime: baseDiskTime, AccessTime: baseDiskTime, ChangeTime: baseDiskTime, Format: tar.FormatPAX}
	}
	if err := tw.WriteHeader(hdr("./", tar.TypeDir, 0o755, 0, 0)); err != nil {
		return err
	}
	files := [][2]string{{BaseDiskIDFile, l.id}}
	if l.base != "" {
		files = append(files, [2]string{DeltaDiskBaseFile, l.base})
	}
	for _, f := range files {
		h := hdr(f[0], tar.TypeReg, 0o444, 0, 0)
		h.Size = int64(len(f[1]))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, f[1]); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(hdr(BaseDiskTree+"/", tar.TypeDir, 0o755, req.UID, req.GID)); err != nil {
		return err
	}
	buf := make([]byte, 256<<10)
	for _, e := range l.entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := BaseDiskTree + "/" + e.Path
		mode := int64(e.Mode.Perm())
		switch {
		case e.Whiteout:
			// Written as the overlay's own whiteout, not as tar2ext4's
			// ".wh." names, which a project may hold as its own files.
			if err := tw.WriteHeader(hdr(name, tar.TypeChar, 0, 0, 0)); err != nil {
				return err
			}
		case e.Type == manifest.Dir:
			h := hdr(name+"/", tar.TypeDir, mode, req.UID, req.GID)
			if e.Opaque {
				h.PAXRecords = map[string]string{"SCHILY.xattr.trusted.overlay.opaque": "y"}
			}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
		case e.Type == manifest.Symlink:
			h := hdr(name, tar.TypeSymlink, 0o777, req.UID, req.GID)
			h.Linkname = e.Target
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
		case e.Type == manifest.File:
			h := hdr(name, tar.TypeReg, mode, req.UID, req.GID)
			h.Size = e.Size
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if err := copyObject(ctx, &progressWriter{w: tw, p: prog}, req.Objects, e.Entry, buf); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// copyObject writes the content of e from the store to w, checking it
// against e's size and SHA-256: the store hands out its files as they
// are on disk, without checking them.
func copyObject(ctx context.Context, w io.Writer, s *objects.Store, e manifest.Entry, buf []byte) error {
	rc, err := s.Open(e.SHA256)
	if err != nil {
		return fmt.Errorf("%s: its content is not in the store (%w): take the snapshot again", e.Path, err)
	}
	defer rc.Close()
	if st, ok := rc.(interface{ Stat() (fs.FileInfo, error) }); ok {
		fi, err := st.Stat()
		if err != nil {
			return fmt.Errorf("%s: %w", e.Path, err)
		}
		if fi.Size() != e.Size {
			return fmt.Errorf("%s: its content in the store (object %s) is %d bytes, the baseline says %d: %w: the store is damaged; take the snapshot again",
				e.Path, e.SHA256, fi.Size(), e.Size, objects.ErrMismatch)
		}
	}
	h := sha256.New()
	n, err := io.CopyBuffer(w, io.TeeReader(ctxio.Reader(ctx, io.LimitReader(rc, e.Size)), h), buf)
	if err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	if n != e.Size {
		return fmt.Errorf("%s: its content in the store (object %s) ends after %d bytes, the baseline says %d: %w: the store is damaged; take the snapshot again",
			e.Path, e.SHA256, n, e.Size, objects.ErrMismatch)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != e.SHA256 {
		return fmt.Errorf("%s: its content in the store (object %s) hashes to %s: %w: the store is damaged; take the snapshot again",
			e.Path, e.SHA256, sum, objects.ErrMismatch)
	}
	return nil
}

// byteProgress reports bytes written to a Progress callback once a write
// has taken a second, then at most every tenth of a second.
type byteProgress struct {
	report      func(done, total int64)
	done, total int64
	start, last time.Time
}

func (p *byteProgress) add(n int64) {
	p.done += n
	if p.report == nil {
		return
	}
	now := time.Now()
	if now.Sub(p.start) < time.Second || now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	p.report(p.done, p.total)
}

// finish reports the end of a write that reported progress.
func (p *byteProgress) finish() {
	if p.report != nil && !p.last.IsZero() {
		p.report(p.total, p.total)
	}
}

// progressWriter counts what goes through it.
type progressWriter struct {
	w io.Writer
	p *byteProgress
}

func (w *progressWriter) Write(b []byte) (int, error) {
	n, err := w.w.Write(b)
	w.p.add(int64(n))
	return n, err
}
