package manifest

import (
	"slices"
	"strings"
)

// LeaveOutLarge returns m without the files over limits.MaxFileSize, and
// an Exclusion with ReasonTooLarge for each: what a walk with that
// MaxFileSize leaves out, for a manifest from a walker that did not (a
// guest that lies, or a delta resolved on a base of the host's). A file
// that known holds with the same entry is the host's own (pushed there,
// untouched): it is kept and not reported, as its size is no news. m is
// not changed; nil known holds nothing.
func LeaveOutLarge(m, known *Manifest, limits Limits) (*Manifest, []Exclusion) {
	max := limits.withDefaults().MaxFileSize
	var left []Exclusion
	out := m.Entries
	copied := false
	for i, e := range m.Entries {
		if e.Type != File || e.Size <= max {
			continue
		}
		if known != nil {
			if k, ok := known.Lookup(e.Path); ok && k == e {
				continue
			}
		}
		if !copied {
			out = slices.Clone(m.Entries[:i])
			copied = true
		}
		left = append(left, Exclusion{Path: e.Path, Reason: ReasonTooLarge, Rule: TooLargeRule(e.Size, max), Size: e.Size})
	}
	if !copied {
		return m, nil
	}
	drop := make(map[string]bool, len(left))
	for _, x := range left {
		drop[x.Path] = true
	}
	for _, e := range m.Entries[len(out):] {
		if !drop[e.Path] {
			out = append(out, e)
		}
	}
	return &Manifest{Entries: out}, left
}

// KeepLeftOut returns m with the baseline's entries put back at the
// paths of files left out for their size (skipped exclusions with
// ReasonTooLarge): base's entry at the path and every entry of base
// below it. A file left out is then no change at all: a baseline file
// the walker found grown over the cap reads as it was, never as deleted,
// and a new one is simply absent.
//
// The skipped paths come from the guest: one that m holds is left as m
// has it, and nothing is put back under a parent that is not a directory
// of m (nothing lives under a link or a file). m and base must be sorted;
// m is not changed.
func KeepLeftOut(m, base *Manifest, skipped []Exclusion) *Manifest {
	if base == nil {
		return m
	}
	var back []Entry
	for _, x := range skipped {
		if x.Reason != ReasonTooLarge {
			continue
		}
		if _, ok := m.Lookup(x.Path); ok {
			continue
		}
		if parent := parentOf(x.Path); parent != "" {
			if e, ok := m.Lookup(parent); !ok || e.Type != Dir {
				continue
			}
		}
		back = append(back, subtree(base, x.Path)...)
	}
	if len(back) == 0 {
		return m
	}
	sortEntries(back)
	back = slices.CompactFunc(back, func(a, b Entry) bool { return a.Path == b.Path })
	out := make([]Entry, 0, len(m.Entries)+len(back))
	i, j := 0, 0
	for i < len(m.Entries) || j < len(back) {
		switch {
		case j >= len(back) || (i < len(m.Entries) && m.Entries[i].Path < back[j].Path):
			out = append(out, m.Entries[i])
			i++
		case i < len(m.Entries) && m.Entries[i].Path == back[j].Path:
			out = append(out, m.Entries[i]) // m's own wins
			i++
			j++
		default:
			out = append(out, back[j])
			j++
		}
	}
	return &Manifest{Entries: out}
}

// subtree returns base's entry at p and the entries below it.
func subtree(base *Manifest, p string) []Entry {
	es := base.Entries
	cmp := func(e Entry, p string) int { return strings.Compare(e.Path, p) }
	var out []Entry
	if i, ok := slices.BinarySearchFunc(es, p, cmp); ok {
		out = append(out, es[i])
	} else {
		return nil // nothing at p: nothing can be below it
	}
	// Paths under p sort from p+"/" up to p+"0" ('/'+1).
	lo, _ := slices.BinarySearchFunc(es, p+"/", cmp)
	hi, _ := slices.BinarySearchFunc(es, p+"0", cmp)
	return append(out, es[lo:hi]...)
}
