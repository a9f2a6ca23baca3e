// Package manifest describes a project tree as data: one Entry per file,
// directory and symbolic link (path, type, mode, size, SHA-256, link
// target), the walk that builds a Manifest from a real directory honouring
// .gitignore files, airlock.toml excludes and Airlock's secret deny-list
// (with an optional HashCache so that a later walk reads only the files
// whose stat data changed, and Rewalk, which looks only at paths known to
// have been touched), and the Diff of two manifests (added,
// modified, deleted, mode-changed, type-changed, renamed by content).
//
// It knows nothing of VMs, the guest, review or the GUI, and the rest of
// sync builds on it: it must not import anything of Airlock's, nor fyne.
package manifest

import (
	"io/fs"
	"slices"
	"strings"
)

// Type is the kind of a tree entry. Special files (devices, fifos,
// sockets) have no Type: they are never part of a manifest.
type Type string

const (
	File    Type = "file"
	Dir     Type = "dir"
	Symlink Type = "symlink"
)

// Entry is one path of a tree.
type Entry struct {
	// Path is relative to the tree root, slash-separated and clean: no
	// leading slash, no "." or ".." elements, no empty elements, no NUL.
	Path string `json:"path"`
	Type Type   `json:"type"`
	// Mode holds the permission bits only (0o644, 0o755…). Setuid, setgid
	// and sticky bits are never recorded.
	Mode fs.FileMode `json:"mode"`
	// Size is the file size in bytes (files only).
	Size int64 `json:"size,omitempty"`
	// SHA256 is the lower-case hex SHA-256 of the content (files only).
	SHA256 string `json:"sha256,omitempty"`
	// Target is the link target exactly as stored (symlinks only). It is
	// recorded, never followed.
	Target string `json:"target,omitempty"`
}

// Manifest is a whole tree: entries sorted by Path, unique.
type Manifest struct {
	Entries []Entry `json:"entries"`
}

// ChangeKind classifies one Change.
type ChangeKind string

const (
	Added       ChangeKind = "added"
	Modified    ChangeKind = "modified" // content changed (maybe mode too)
	Deleted     ChangeKind = "deleted"
	ModeChanged ChangeKind = "mode-changed" // only the permission bits changed
	TypeChanged ChangeKind = "type-changed" // e.g. file became a symlink
	Renamed     ChangeKind = "renamed"      // same content under a new path (maybe mode too)
)

// Change is one difference between two manifests. Old is nil for Added,
// New is nil for Deleted. For Renamed, OldPath is where Old was.
type Change struct {
	Kind    ChangeKind `json:"kind"`
	Path    string     `json:"path"`
	OldPath string     `json:"old_path,omitempty"`
	Old     *Entry     `json:"old,omitempty"`
	New     *Entry     `json:"new,omitempty"`
}

// SymlinkMode is the mode recorded for every symbolic link: link
// permissions mean nothing on Linux and differ on macOS, so they are not
// compared.
const SymlinkMode fs.FileMode = 0o777

// ImpliedDirMode is the mode of a directory that Diff does not report
// because an entry below it implies it (an applier creates it with this
// mode). An added directory with another mode is reported.
const ImpliedDirMode fs.FileMode = 0o755

// Lookup returns the entry at path p. The manifest must be sorted.
func (m *Manifest) Lookup(p string) (Entry, bool) {
	i, ok := slices.BinarySearchFunc(m.Entries, p, func(e Entry, p string) int { return strings.Compare(e.Path, p) })
	if !ok {
		return Entry{}, false
	}
	return m.Entries[i], true
}

// Sort orders the entries by Path, as a Manifest must be.
func (m *Manifest) Sort() {
	sortEntries(m.Entries)
}

// sortEntries sorts entries by path. It sorts an index and then moves
// each entry once: comparing and swapping whole entries (88 bytes each)
// costs several times more on a large tree.
func sortEntries(es []Entry) {
	idx := make([]int32, len(es))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int { return strings.Compare(es[a].Path, es[b].Path) })
	sorted := make([]Entry, len(es))
	for i, j := range idx {
		sorted[i] = es[j]
	}
	copy(es, sorted)
}
