package manifest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// Touched is a path of a tree that may have changed: something was
// created, written, removed, renamed or had its attributes changed there
// (what a change notification such as inotify reports).
type Touched struct {
	Path string
	// Subtree: everything below Path may have changed too, not only the
	// entry itself (a directory that appeared, moved or went away).
	Subtree bool
}

// Rewalk returns what Walk(ctx, root, opts) would return now, reading
// only the touched paths: prev is the manifest of root when the changes
// began (what Walk returned then, with the same opts), prevExcluded the
// exclusions of that walk that the caller wants carried over, and
// touched every path that may have changed since, by any means (a path
// left out makes the result wrong: the caller vouches for the list).
//
// Each touched path is classified as Walk classifies it (gitignore files
// of its ancestors, excludes, secret deny-list, special files, invalid
// names, MaxFileSize); a directory that is new, was something else, or is
// touched with Subtree is walked whole; entries that are gone are
// dropped, with everything below them. Untouched entries of prev are
// kept as they are. opts.Cache, when set, must be the cache of the walk
// that made prev: it is consulted for touched files and updated.
//
// A change to a .gitignore or .git/info/exclude changes the rules for
// untouched paths too: the caller must walk the whole tree then
// (RulesTouched tells). The report's Excluded holds prevExcluded minus
// what is at or under a touched path, plus this walk's exclusions.
func Rewalk(ctx context.Context, root string, prev *Manifest, prevExcluded []Exclusion, touched []Touched, opts WalkOptions) (*Manifest, *Report, error) {
	touched = normalizeTouched(touched)
	if len(touched) > 0 && touched[0].Path == "" {
		return Walk(ctx, root, opts) // the root itself: everything
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, nil, fmt.Errorf("walk %s: %w", root, err)
	}
	defer r.Close()
	w, g, start := newWalker(ctx, r, opts)
	rw := &rewalker{w: w, prev: prev, included: map[string]bool{"": true}, ignores: map[string][]ignorePattern{}, replaced: map[string]bool{}}
	var drop []dropRange
	werr := func() error {
		for _, t := range touched {
			d, err := rw.touch(t)
			if err != nil {
				return err
			}
			drop = append(drop, d...)
		}
		return nil
	}()
	if err := g.Wait(); werr == nil {
		werr = err
	}
	if werr != nil {
		return nil, nil, werr
	}
	w.ctx = ctx
	if err := w.hashAll(); err != nil {
		return nil, nil, err
	}
	sortEntries(w.entries)

	// Merge: prev without the dropped ranges, and what was found.
	slices.SortFunc(drop, func(a, b dropRange) int { return a.lo - b.lo })
	keep := make([]Entry, 0, len(prev.Entries)+len(w.entries))
	next := 0
	for _, d := range drop {
		if d.lo > next {
			keep = append(keep, prev.Entries[next:d.lo]...)
		}
		next = max(next, d.hi)
	}
	keep = append(keep, prev.Entries[next:]...)
	out := make([]Entry, 0, len(keep)+len(w.entries))
	i, j := 0, 0
	for i < len(keep) || j < len(w.entries) {
		if j >= len(w.entries) || (i < len(keep) && keep[i].Path < w.entries[j].Path) {
			out = append(out, keep[i])
			i++
		} else {
			out = append(out, w.entries[j])
			j++
		}
	}
	if opts.Cache != nil {
		var gone []string
		for _, d := range drop {
			for _, e := range prev.Entries[d.lo:d.hi] {
				if e.Type == File {
					gone = append(gone, e.Path)
				}
			}
		}
		opts.Cache.update(gone, w.cached, start)
	}

	// Exclusions: those of the previous walk that nothing touched.
	for _, x := range prevExcluded {
		if !rw.covers(x.Path) {
			w.report.Excluded = append(w.report.Excluded, x)
		}
	}
	slices.SortFunc(w.report.Excluded, func(a, b Exclusion) int { return strings.Compare(a.Path, b.Path) })
	for _, e := range out {
		switch e.Type {
		case File:
			w.report.Files++
			w.report.Bytes += e.Size
		case Dir:
			w.report.Dirs++
		case Symlink:
			w.report.Symlinks++
		}
	}
	w.entries = out
	w.progress(PhaseDone)
	w.log.Debug("rewalked", "root", root, "touched", len(touched), "files", w.report.Files)
	return &Manifest{Entries: out}, w.report, nil
}

// RulesTouched reports whether a touched path can change the rules of
// the walk for paths that are not touched, and returns the first: a
// .gitignore file, or .git/info/exclude (or a directory holding it). A
// .gitignore in a directory touched whole (new, moved) changes nothing
// else. The caller of Rewalk must walk the whole tree then.
func RulesTouched(touched []Touched) (string, bool) {
	for _, t := range normalizeTouched(touched) {
		switch {
		case t.Path == "", t.Path == ".git", t.Path == ".git/info", t.Path == ".git/info/exclude",
			path.Base(t.Path) == ".gitignore":
			return t.Path, true
		}
	}
	return "", false
}

// normalizeTouched sorts touched paths, merges duplicates and drops those
// under a path touched with Subtree.
func normalizeTouched(in []Touched) []Touched {
	ts := slices.Clone(in)
	slices.SortFunc(ts, func(a, b Touched) int { return strings.Compare(a.Path, b.Path) })
	subtree := map[string]bool{}
	out := ts[:0]
	for _, t := range ts {
		if n := len(out); n > 0 && out[n-1].Path == t.Path {
			out[n-1].Subtree = out[n-1].Subtree || t.Subtree
			subtree[t.Path] = out[n-1].Subtree
			continue
		}
		under := false
		for p := t.Path; p != "" && !under; {
			p = parentOf(p)
			under = subtree[p]
		}
		if under {
			continue
		}
		out = append(out, t)
		subtree[t.Path] = t.Subtree
	}
	return out
}

// parentOf returns the directory of a relative path, "" for the root.
func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// dropRange is a range of prev's entries, [lo, hi), that a Rewalk
// replaces.
type dropRange struct{ lo, hi int }

type rewalker struct {
	w    *walker
	prev *Manifest
	// included: whether a directory's children belong in the manifest
	// now, for the directories looked at so far.
	included map[string]bool
	// ignores: the gitignore patterns in force for a directory's
	// children, for the directories looked at so far.
	ignores map[string][]ignorePattern
	// replaced: the touched paths whose whole subtree was looked at again.
	replaced map[string]bool
}

// isIncluded reports whether dir is, now, a directory of the manifest
// (its children are walked). Directories not touched are as in prev.
func (rw *rewalker) isIncluded(dir string) bool {
	if v, ok := rw.included[dir]; ok {
		return v
	}
	e, ok := rw.prev.Lookup(dir)
	v := ok && e.Type == Dir && rw.isIncluded(parentOf(dir))
	rw.included[dir] = v
	return v
}

// ignoresFor returns the gitignore patterns in force for dir's children;
// dir is an included directory.
func (rw *rewalker) ignoresFor(dir string) ([]ignorePattern, error) {
	if v, ok := rw.ignores[dir]; ok {
		return v, nil
	}
	var ig []ignorePattern
	if dir == "" {
		if !rw.w.opts.NoGitignore {
			if data, err := rw.w.root.ReadFile(".git/info/exclude"); err == nil {
				ig = parseIgnore(data, "", ".git/info/exclude")
			}
		}
	} else {
		up, err := rw.ignoresFor(parentOf(dir))
		if err != nil {
			return nil, err
		}
		ig = up
	}
	if !rw.w.opts.NoGitignore {
		rel := join(dir, ".gitignore")
		if info, err := rw.w.root.Lstat(rel); err == nil && info.Mode().IsRegular() {
			data, err := rw.w.root.ReadFile(rel)
			if err != nil {
				return nil, fmt.Errorf("walk %s: %w", rel, err)
			}
			ig = append(slices.Clip(ig), parseIgnore(data, dir, rel)...)
		}
	}
	rw.ignores[dir] = ig
	return ig, nil
}

// prevRange returns the index range of p in prev (lo == hi when absent)
// and that of the entries under p: between them may sort other paths
// ("a-b" sorts between "a" and "a/b").
func (rw *rewalker) prevRange(p string) (entry, below dropRange) {
	es := rw.prev.Entries
	cmp := func(e Entry, p string) int { return strings.Compare(e.Path, p) }
	lo, found := slices.BinarySearchFunc(es, p, cmp)
	entry = dropRange{lo, lo}
	if found {
		entry.hi = lo + 1
	}
	// Paths under p sort from p+"/" up to p+"0" ('/'+1).
	below.lo, _ = slices.BinarySearchFunc(es, p+"/", cmp)
	below.hi, _ = slices.BinarySearchFunc(es, p+"0", cmp)
	return entry, below
}

// touch looks at one touched path and returns the ranges of prev it
// replaces; what it finds is merged into the walker.
func (rw *rewalker) touch(t Touched) ([]dropRange, error) {
	rw.replaced[t.Path] = true // unless it turns out to be a directory that stays
	entry, below := rw.prevRange(t.Path)
	all := []dropRange{entry, below} // the entry and everything below it
	wasDir := entry.hi > entry.lo && rw.prev.Entries[entry.lo].Type == Dir
	parent, base := parentOf(t.Path), path.Base(t.Path)
	rw.included[t.Path] = false
	if !rw.isIncluded(parent) {
		return all, nil
	}
	ignores, err := rw.ignoresFor(parent)
	if err != nil {
		return nil, err
	}
	d := rw.w.root
	if parent != "" {
		d, err = rw.w.root.OpenRoot(parent)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return all, nil // gone, or changed under us; its parent is touched
		}
		if err != nil {
			return nil, fmt.Errorf("walk %s: %w", parent, err)
		}
		defer d.Close()
	}
	var sc dirScan
	isDir, err := rw.w.visit(&sc, parent, d, base, ignores)
	if err != nil {
		return nil, err
	}
	if !isDir {
		rw.w.merge(&sc)
		return all, nil
	}
	sub, err := d.OpenRoot(base)
	if errors.Is(err, fs.ErrPermission) {
		rw.w.exclude(&sc, t.Path, true, ReasonUnreadable, err.Error())
		sc.entries = slices.DeleteFunc(sc.entries, func(e Entry) bool { return e.Path == t.Path })
		rw.w.merge(&sc)
		return all, nil
	}
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", t.Path, err)
	}
	rw.w.merge(&sc)
	rw.included[t.Path] = true
	if !t.Subtree && wasDir {
		rw.replaced[t.Path] = false
		sub.Close()
		return []dropRange{entry}, nil // its entries are as they were, unless touched
	}
	defer sub.Close()
	if err := rw.w.walkDir(t.Path, sub, ignores); err != nil {
		return nil, err
	}
	return all, nil
}

// covers reports whether p is a touched path, or under one whose whole
// subtree was looked at again.
func (rw *rewalker) covers(p string) bool {
	if _, ok := rw.replaced[p]; ok {
		return true
	}
	for q := p; q != ""; {
		q = parentOf(q)
		if rw.replaced[q] {
			return true
		}
	}
	return false
}
