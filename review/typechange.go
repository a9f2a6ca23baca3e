package review

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// A type change that involves a directory is two changes on disk and in
// a patch. A file (or link) that becomes a directory is removed before
// anything is made under the new directory; a directory that becomes a
// file (or link) is emptied (the deletions and renames out of it, each a
// File of the changeset) and removed before the file is written. The
// changeset keeps manifest.Diff's shape: one TypeChanged File for the
// path itself, and a File for each path under it.

// TypeWord is how a type is named to a reviewer.
func TypeWord(t manifest.Type) string {
	switch t {
	case manifest.Dir:
		return "directory"
	case manifest.Symlink:
		return "symbolic link"
	}
	return string(t)
}

// TypeChange says in words how f's type changed ("file → directory"), or
// "" when it did not.
func (f *File) TypeChange() string {
	if f.Old == nil || f.New == nil || f.Old.Type == f.New.Type {
		return ""
	}
	return TypeWord(f.Old.Type) + " → " + TypeWord(f.New.Type)
}

// becomesDir reports a type change from a file or link to a directory.
func (f *File) becomesDir() bool {
	return f.Old != nil && f.New != nil && f.Old.Type != manifest.Dir && f.New.Type == manifest.Dir
}

// stopsBeingDir reports a type change from a directory to a file or link.
func (f *File) stopsBeingDir() bool {
	return f.Old != nil && f.New != nil && f.Old.Type == manifest.Dir && f.New.Type != manifest.Dir
}

// NeedError is an approved change that cannot be made without another
// change the decisions leave out: what is under a file that becomes a
// directory needs the file removed; a directory that becomes a file needs
// everything under it gone.
type NeedError struct {
	// Path is the approved change; Needs is the change it needs.
	Path  string `json:"path"`
	Needs string `json:"needs"`
	// NeedsFrom is the rename source when Needs is a rename out of a
	// directory that becomes a file.
	NeedsFrom string `json:"needs_from,omitempty"`
	// Type is, when Path is under Needs, what Needs is today; otherwise
	// what the directory at Path becomes.
	Type manifest.Type `json:"type"`
}

func (e *NeedError) Error() string {
	if strings.HasPrefix(e.Path, e.Needs+"/") {
		return fmt.Sprintf("%s needs %s, a %s today, to be removed: approve the change to %s too", e.Path, e.Needs, TypeWord(e.Type), e.Needs)
	}
	what := e.Needs
	if e.NeedsFrom != "" {
		what = fmt.Sprintf("%s (renamed from %s)", e.Needs, e.NeedsFrom)
	}
	return fmt.Sprintf("%s becomes a %s and needs everything under it removed first: approve the change to %s too", e.Path, TypeWord(e.Type), what)
}

// Needs lists the changes d approves that cannot be made without a change
// of cs that d leaves out (see NeedError), in path order. Apply and Patch
// leave those changes out, with the NeedError as the reason.
func (d Decisions) Needs(cs *Changeset) []*NeedError {
	byPath := make(map[string]*File, len(cs.Files))
	for _, f := range cs.Files {
		byPath[f.Path] = f
	}
	taken := func(f *File) bool {
		_, t := d.Selection(f)
		return t
	}
	var out []*NeedError
	for _, f := range cs.Files {
		fTaken := taken(f)
		// What f creates under a file that becomes a directory.
		if fTaken {
			if a := typeChangedAbove(byPath, f.Path, (*File).becomesDir); a != nil && !taken(a) {
				out = append(out, &NeedError{Path: f.Path, Needs: a.Path, Type: a.Old.Type})
				continue
			}
		}
		// What f removes under a directory that becomes a file.
		if fTaken {
			continue
		}
		for _, p := range []string{f.Path, f.OldPath} {
			if p == "" || (p == f.Path && f.Old == nil) {
				continue // f.Path held nothing before: nothing to remove
			}
			if a := typeChangedAbove(byPath, p, (*File).stopsBeingDir); a != nil && taken(a) {
				out = append(out, &NeedError{Path: a.Path, Needs: f.Path, NeedsFrom: f.OldPath, Type: a.New.Type})
				break
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// typeChangedAbove returns the nearest file above p in byPath for which
// is reports true, or nil.
func typeChangedAbove(byPath map[string]*File, p string, is func(*File) bool) *File {
	for dir := path.Dir(p); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if f := byPath[dir]; f != nil && is(f) {
			return f
		}
	}
	return nil
}
