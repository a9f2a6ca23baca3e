package sandbox

import (
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
)

// What a run records and every reader of a sandbox shares: where the
// project is in the guest, the agent's own folder in it, the sync modes.

// SyncMode is how the project reaches the VM and the changes come back.
type SyncMode string

const (
	// SyncCopy pushes the baseline onto the VM's own disk and pulls the
	// changed files back; it keeps machine snapshots possible.
	SyncCopy SyncMode = "copy"
	// SyncVirtiofs clones the baseline into a staging directory on the host
	// (sandboxes/<id>/staging, never the real project) and shares it
	// read-write into the VM over virtio-fs, for trees too large to copy;
	// the changes are collected by walking the staging clone on the host,
	// as hostile input, once the VM is gone. The machine cannot be
	// snapshotted.
	SyncVirtiofs SyncMode = "virtiofs"
	// SyncDisk writes the baseline on the host as a read-only ext4 disk
	// (cached by its hash) that the guest mounts as an overlay's lower
	// layer on /workspace, with the upper layer on the sandbox's own
	// disk: nothing is streamed in, and the collect reads only the upper
	// layer. Machine snapshots, checkpoints and reply rounds work as in
	// SyncCopy.
	SyncDisk SyncMode = "disk"
)

// SyncModes lists the modes, the planner's default first.
var SyncModes = []SyncMode{SyncDisk, SyncCopy, SyncVirtiofs}

// ParseSyncMode reads a --sync value. Only the planner (app/plan) reads
// one, once per run; the modes it decides are trusted downstream.
func ParseSyncMode(s string) (SyncMode, error) {
	if m := SyncMode(s); slices.Contains(SyncModes, m) {
		return m, nil
	}
	return "", fmt.Errorf("unknown sync mode %q: want copy, disk or virtiofs", s)
}

// Workspace is where the project is copied in the guest, and where the
// command runs.
const Workspace = "/workspace"

// MetaDir is the folder of /workspace where the agent talks to Airlock
// (its summary). It is never part of a changeset.
const MetaDir = ".airlock"

// SummaryPath is the agent's account of what it did and why, relative to
// the workspace.
const SummaryPath = MetaDir + "/summary.md"

// TimeoutExitCode is the exit code recorded for a command killed by
// RunOptions.Timeout, as timeout(1) reports it.
const TimeoutExitCode = 124

// WithoutMeta drops .airlock/ from a manifest: it is how the agent talks
// to Airlock, not part of the project's changes.
func WithoutMeta(m *manifest.Manifest) *manifest.Manifest {
	out := &manifest.Manifest{Entries: make([]manifest.Entry, 0, len(m.Entries))}
	for _, e := range m.Entries {
		if e.Path == MetaDir || strings.HasPrefix(e.Path, MetaDir+"/") {
			continue
		}
		out.Entries = append(out.Entries, e)
	}
	return out
}

// emptySum is the SHA-256 of no bytes: the content of every empty file.
const emptySum = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// ReadObject returns the content of the object sum, in a buffer of its
// size: a changeset keeps the content of every changed file, and
// io.ReadAll's buffer starts at 512 bytes and doubles (100,000 empty
// files held 51 MB of it). Empty content is not looked up.
func ReadObject(s *objects.Store, sum string) ([]byte, error) {
	if sum == emptySum {
		return []byte{}, nil
	}
	rc, err := s.Open(sum)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	size := int64(512)
	if st, ok := rc.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if info, err := st.Stat(); err == nil && info.Mode().IsRegular() {
			size = info.Size() + 1 // room to see the end
		}
	}
	data := make([]byte, 0, min(size, 1<<30))
	for {
		n, err := rc.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)] // it grew: room for more
		}
	}
}
