package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// DeltaDiskBaseFile is the file at the root of a delta disk that holds
// the ID of the base disk it was computed against (64 hex digits, no
// newline): the guest stacks the delta only over a disk whose
// BaseDiskIDFile says the same.
const DeltaDiskBaseFile = "base"

// A delta grows until it holds more than a quarter of its base's files
// or bytes (and more than squashMinEntries entries or squashMinBytes
// bytes: a small project's few edits stay deltas); the next baseline then
// gets a full disk of its own, and the deltas after it are computed
// against that one.
const (
	squashDivisor    = 4
	squashMinEntries = 256
	squashMinBytes   = 64 << 20
)

// BaseLayers is a project's baseline as the two read-only disks the
// guest stacks: the delta's tree over the base's. The shape is always
// the same (two disks, whatever the edits), so warm snapshots keep
// matching; when the baseline is the base's own, the delta is empty.
type BaseLayers struct {
	// ID names the baseline: BaseDiskID of its manifest, what the
	// delta's BaseDiskIDFile holds and the guest's listing is checked
	// against.
	ID string
	// Base is a full disk: the project's last one, or the baseline's.
	Base BaseDisk
	// Delta holds the changes from Base's tree to the baseline's; its ID
	// is DeltaDiskID(Base.ID, ID).
	Delta BaseDisk
	// Squashed says Base was written for this baseline because the delta
	// against the previous base had grown too large.
	Squashed bool
}

// DeltaDiskID names the delta disk from the base disk base to the
// baseline id (both BaseDiskIDs): the delta is a function of the two.
func DeltaDiskID(base, id string) string {
	h := sha256.New()
	fmt.Fprintf(h, "airlock delta disk\x00%d\x00%s\x00%s", baseDiskFormat, base, id)
	return hex.EncodeToString(h.Sum(nil))
}

// manifestSuffix names the copy of a full disk's manifest beside it
// (ID.manifest), which a delta is computed against. It is checked
// against the disk's ID (which hashes it) each time it is read.
const manifestSuffix = ".manifest"

// projectsDir, under the cache of base disks, holds one record per
// project and owner naming its last full disk (projectRecord).
const projectsDir = "projects"

// projectRecord is projects/KEY.json.
type projectRecord struct {
	Format int    `json:"format"`
	Base   string `json:"base"`
}

// MakeBaseLayers returns the layers of req.Manifest. The full disk is the
// one req.Project's record names (its last full disk) when that disk is
// good and the delta against it is small; otherwise a full disk of the
// baseline is written (MakeBaseDisk) and recorded as the project's. The
// delta disk (only the entries that differ from the base, overlay
// whiteouts for those gone) is cached by its own ID as base disks are,
// verified on each use, and written again with a warning when damaged.
// The full disk's manifest is read only to write a new delta: a cached
// delta is a function of its two IDs, and an unchanged baseline's is
// empty.
func MakeBaseLayers(ctx context.Context, req BaseDiskRequest) (BaseLayers, error) {
	if err := req.check(); err != nil {
		return BaseLayers{}, fmt.Errorf("make base disk: %w", err)
	}
	log := req.logger()
	id, err := BaseDiskID(req.Manifest, req.UID, req.GID)
	if err != nil {
		return BaseLayers{}, fmt.Errorf("make base disk: %w", err)
	}
	l := BaseLayers{ID: id}
	var entries []layerEntry
	base, err := projectBase(req)
	switch {
	case errors.Is(err, ErrBaseDiskDamaged):
		log.Warn("the project's cached base disk is damaged (changed on the host, or cut short): writing a full disk of the baseline", "project", req.Project, "err", err)
	case err != nil:
		log.Debug("no base disk for the project", "project", req.Project, "why", err)
	case base.ID == id:
	default:
		if delta, ok := cachedLayerDisk(ctx, req, DeltaDiskID(base.ID, id)); ok {
			l.Base, l.Delta = base, delta
			return l, nil
		}
		var baseM *manifest.Manifest
		if baseM, err = baseManifest(req, base); err != nil {
			log.Debug("no manifest of the project's base disk", "project", req.Project, "why", err)
			break
		}
		entries = deltaEntries(baseM, req.Manifest)
		if deltaTooLarge(entries, baseM) {
			log.Info("the baseline's changes since the project's full disk have grown large: writing a full disk", "project", req.Project, "entries", len(entries))
			err = errors.New("squash")
			l.Squashed = true
		}
	}
	if err != nil {
		// A full disk of the baseline, or the one already cached.
		entries = nil
		if base, err = MakeBaseDisk(ctx, req); err != nil {
			return BaseLayers{}, err
		}
		if err := saveProjectBase(req, base); err != nil {
			log.Warn("record the project's base disk", "err", err)
		}
	}
	l.Base = base
	l.Delta, err = makeLayerDisk(ctx, req, DeltaDiskID(base.ID, id), layer{id: id, base: base.ID, entries: entries})
	if err != nil {
		return BaseLayers{}, fmt.Errorf("make the baseline's delta disk: %w", err)
	}
	return l, nil
}

// projectKey names req's project record: the project and the owner.
func projectKey(req BaseDiskRequest) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d", req.Project, req.UID, req.GID))
	return hex.EncodeToString(h[:])
}

// projectBase returns the full disk req.Project's record names, checked
// (VerifyBaseDisk).
func projectBase(req BaseDiskRequest) (BaseDisk, error) {
	if req.Project == "" {
		return BaseDisk{}, errors.New("no project")
	}
	b, err := os.ReadFile(filepath.Join(req.Dir, projectsDir, projectKey(req)+".json"))
	if err != nil {
		return BaseDisk{}, err
	}
	var rec projectRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Format != baseDiskFormat || !validID(rec.Base) {
		return BaseDisk{}, fmt.Errorf("the project's record is damaged (%v)", err)
	}
	disk := BaseDisk{Path: filepath.Join(req.Dir, rec.Base+".img"), ID: rec.Base}
	unlock, err := lockBaseDisks(context.Background(), req.Dir, syscall.LOCK_SH)
	if err != nil {
		return BaseDisk{}, err
	}
	defer unlock()
	if err := VerifyBaseDisk(disk.Path); err != nil {
		return BaseDisk{}, err
	}
	// Its record's time is its last use, for pruneBaseDisks.
	now := time.Now()
	_ = os.Chtimes(recordPath(disk.Path), now, now)
	return disk, nil
}

// baseManifest reads the manifest beside the full disk base (written by
// saveProjectBase) and checks it is the disk's own: its BaseDiskID with
// req's owner is base.ID. A delta is computed only against such a one.
func baseManifest(req BaseDiskRequest, base BaseDisk) (*manifest.Manifest, error) {
	f, err := os.Open(filepath.Join(req.Dir, base.ID+manifestSuffix))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := manifest.Decode(f, projectLimits)
	if err != nil {
		return nil, err
	}
	if got, err := BaseDiskID(m, req.UID, req.GID); err != nil || got != base.ID {
		return nil, fmt.Errorf("the manifest beside base disk %s is not its own", base.ID)
	}
	return m, nil
}

// saveProjectBase records base (a full disk of req.Manifest) as
// req.Project's, with the manifest beside it.
func saveProjectBase(req BaseDiskRequest, base BaseDisk) error {
	if req.Project == "" {
		return nil
	}
	unlock, err := lockBaseDisks(context.Background(), req.Dir, syscall.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlock()
	mp := filepath.Join(req.Dir, base.ID+manifestSuffix)
	if _, err := os.Stat(mp); errors.Is(err, fs.ErrNotExist) {
		var buf bytes.Buffer
		if err := req.Manifest.Encode(&buf); err != nil {
			return err
		}
		if err := atomicfile.WriteFile(mp, buf.Bytes(), 0o600); err != nil {
			return err
		}
	}
	if err := privateDir(filepath.Join(req.Dir, projectsDir)); err != nil {
		return err
	}
	b, err := json.Marshal(projectRecord{Format: baseDiskFormat, Base: base.ID})
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(req.Dir, projectsDir, projectKey(req)+".json"), append(b, '\n'), 0o600)
}

// deltaEntries returns the layer that, stacked over base's tree, shows
// target's: every entry of target that base lacks or holds otherwise
// (content, mode, type, link target), a whiteout for each entry of base
// that target lacks, except below another (a deleted directory's, or
// one that became a file), and every directory above them as target
// holds it (an overlay shows the upper-most layer's directory). A
// directory that was something else in base is opaque. The result is
// sorted by path. Both manifests must be sorted.
func deltaEntries(base, target *manifest.Manifest) []layerEntry {
	d := manifest.DeltaOf(base, target)
	out := make(map[string]layerEntry, len(d.Changed)+len(d.Deleted))
	for _, e := range d.Changed {
		old, ok := base.Lookup(e.Path)
		out[e.Path] = layerEntry{Entry: e, Opaque: e.Type == manifest.Dir && ok && old.Type != manifest.Dir}
	}
	for _, p := range d.Deleted {
		parent := path.Dir(p)
		if parent == "." {
			out[p] = layerEntry{Entry: manifest.Entry{Path: p}, Whiteout: true}
			continue
		}
		if e, ok := target.Lookup(parent); ok && e.Type == manifest.Dir {
			out[p] = layerEntry{Entry: manifest.Entry{Path: p}, Whiteout: true}
		}
	}
	for p := range out {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if _, ok := out[dir]; ok {
				break
			}
			e, _ := target.Lookup(dir) // a directory: it holds p
			out[dir] = layerEntry{Entry: e}
		}
	}
	entries := make([]layerEntry, 0, len(out))
	for _, e := range out {
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b layerEntry) int { return strings.Compare(a.Path, b.Path) })
	return entries
}

// deltaTooLarge says a delta of entries over the base disk of baseM
// should give way to a full disk.
func deltaTooLarge(entries []layerEntry, baseM *manifest.Manifest) bool {
	var bytes, baseBytes int64
	for _, e := range entries {
		bytes += e.Size
	}
	for _, e := range baseM.Entries {
		baseBytes += e.Size
	}
	n := len(entries)
	return (n > squashMinEntries && n > len(baseM.Entries)/squashDivisor) ||
		(bytes > squashMinBytes && bytes > baseBytes/squashDivisor)
}

// validID reports whether id is 64 lower-case hex digits.
func validID(id string) bool {
	if len(id) != 64 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && id == strings.ToLower(id)
}
