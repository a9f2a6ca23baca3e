package manifest

import (
	"cmp"
	"path"
	"slices"
	"strings"
)

// Diff returns the changes that turn old into new, sorted by Path (for a
// rename, the new path). Both manifests must be valid (sorted, unique, every
// parent a directory).
//
// Files and symlinks: a path in new only is Added, in old only Deleted, in
// both with another type TypeChanged; a file whose size or SHA-256 differs
// is Modified (its mode may differ too), one whose permission bits alone
// differ is ModeChanged; a symlink whose target differs is Modified
// (symlink modes are not compared). A Deleted file and an Added file with
// the same SHA-256 and size become one Renamed change; when several match,
// pairs with the same base name go first, then the rest in path order.
// Empty files never pair up: every empty file has the same content.
//
// Directories never rename. A deleted directory is always reported (an
// applier removes it, after the entries under it, when it is empty). An
// added directory is reported only when nothing implies it: when it is
// empty in new, or its mode is not ImpliedDirMode; otherwise creating the
// entries under it creates it. A directory in both whose permission bits
// differ is ModeChanged.
//
// An applier works through the changes in reverse order for removals and
// in order for creations.
func Diff(old, new *Manifest) []Change {
	oe, ne := sortedEntries(old), sortedEntries(new)
	var changes []Change
	var added, deleted []int // indexes into changes, files only
	i, j := 0, 0
	for i < len(oe) || j < len(ne) {
		var o, n *Entry
		switch {
		case j >= len(ne) || (i < len(oe) && oe[i].Path < ne[j].Path):
			o = &oe[i]
			i++
		case i >= len(oe) || ne[j].Path < oe[i].Path:
			n = &ne[j]
			j++
		default:
			o, n = &oe[i], &ne[j]
			i++
			j++
		}
		switch {
		case n == nil:
			if o.Type == File && o.Size > 0 {
				deleted = append(deleted, len(changes))
			}
			changes = append(changes, Change{Kind: Deleted, Path: o.Path, Old: o})
		case o == nil:
			if n.Type == Dir && n.Mode == ImpliedDirMode && hasDescendant(ne[j:], n.Path) {
				continue // implied by the entries under it
			}
			if n.Type == File && n.Size > 0 {
				added = append(added, len(changes))
			}
			changes = append(changes, Change{Kind: Added, Path: n.Path, New: n})
		case o.Type != n.Type:
			changes = append(changes, Change{Kind: TypeChanged, Path: n.Path, Old: o, New: n})
		default:
			if kind, ok := compare(o, n); ok {
				changes = append(changes, Change{Kind: kind, Path: n.Path, Old: o, New: n})
			}
		}
	}
	if len(added) == 0 || len(deleted) == 0 {
		return changes
	}
	return pairRenames(changes, added, deleted)
}

// hasDescendant reports whether sorted entries hold a path under dir.
func hasDescendant(es []Entry, dir string) bool {
	prefix := dir + "/"
	k, _ := slices.BinarySearchFunc(es, prefix, func(e Entry, p string) int { return cmp.Compare(e.Path, p) })
	return k < len(es) && strings.HasPrefix(es[k].Path, prefix)
}

// compare classifies two entries of the same type at the same path.
func compare(o, n *Entry) (ChangeKind, bool) {
	switch o.Type {
	case File:
		if o.Size != n.Size || o.SHA256 != n.SHA256 {
			return Modified, true
		}
		if o.Mode != n.Mode {
			return ModeChanged, true
		}
	case Symlink:
		if o.Target != n.Target {
			return Modified, true
		}
	case Dir:
		if o.Mode != n.Mode {
			return ModeChanged, true
		}
	}
	return "", false
}

func sortedEntries(m *Manifest) []Entry {
	if m == nil {
		return nil
	}
	less := func(a, b Entry) int { return strings.Compare(a.Path, b.Path) }
	if slices.IsSortedFunc(m.Entries, less) {
		return m.Entries
	}
	return slices.SortedFunc(slices.Values(m.Entries), less)
}

type contentKey struct {
	sum  string
	size int64
}

// pairRenames turns matching Deleted/Added file pairs into Renamed.
func pairRenames(changes []Change, added, deleted []int) []Change {
	byKey := make(map[contentKey][]int, len(deleted))
	for _, d := range deleted {
		k := contentKey{changes[d].Old.SHA256, changes[d].Old.Size}
		byKey[k] = append(byKey[k], d)
	}
	drop := make(map[int]bool)
	// Group the added files by content, in path order.
	addByKey := make(map[contentKey][]int)
	var keys []contentKey
	for _, a := range added {
		k := contentKey{changes[a].New.SHA256, changes[a].New.Size}
		if _, ok := byKey[k]; !ok {
			continue
		}
		if _, seen := addByKey[k]; !seen {
			keys = append(keys, k)
		}
		addByKey[k] = append(addByKey[k], a)
	}
	for _, k := range keys {
		dels, adds := byKey[k], addByKey[k]
		used := make([]bool, len(dels))
		pair := func(a, d int) {
			used[d] = true
			c := &changes[adds[a]]
			old := changes[dels[d]]
			c.Kind, c.OldPath, c.Old = Renamed, old.Path, old.Old
			drop[dels[d]] = true
			adds[a] = -1
		}
		// Same base name first, then whatever is left, both in path order.
		for a := range adds {
			for d := range dels {
				if !used[d] && path.Base(changes[adds[a]].Path) == path.Base(changes[dels[d]].Path) {
					pair(a, d)
					break
				}
			}
		}
		d := 0
		for a := range adds {
			if adds[a] < 0 {
				continue
			}
			for d < len(dels) && used[d] {
				d++
			}
			if d == len(dels) {
				break
			}
			pair(a, d)
		}
	}
	out := changes[:0:0]
	out = slices.Grow(out, len(changes)-len(drop))
	for i, c := range changes {
		if !drop[i] {
			out = append(out, c)
		}
	}
	// Still sorted: renames keep their (new) path, removals keep order.
	return out
}
