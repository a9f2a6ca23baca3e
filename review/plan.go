package review

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// plannedFile is the steps one file needs and what to report for it.
type plannedFile struct {
	steps  []Step
	result FileResult
	merged bool
	// resolved is the user's choice for a conflict of the file, if one
	// was used.
	resolved Choice
}

// baseOf is what path held in the baseline according to f.
func baseOf(f *File, p string) (EntryState, []byte) {
	if f.Old == nil || (f.Status == Renamed && p != f.OldPath) {
		return EntryState{}, nil
	}
	s := EntryState{Exists: true, Type: f.Old.Type, Mode: f.Old.Mode.Perm(), SHA256: f.Old.SHA256, Target: f.Old.Target}
	switch s.Type {
	case manifest.Dir:
		s.SHA256, s.Target = "", ""
	case manifest.Symlink:
		s.Mode, s.SHA256 = 0, ""
	}
	return s, f.oldData
}

func (a *applier) planFile(f *File, outs []Outcome) (plannedFile, error) {
	var pf plannedFile
	pf.result = FileResult{Path: f.Path, OldPath: f.OldPath}
	for _, out := range outs {
		if err := ValidatePath(out.Path); err != nil {
			return pf, err
		}
		base, baseData := baseOf(f, out.Path)
		cur, curData, err := a.state(out.Path)
		if err != nil {
			return pf, fmt.Errorf("%s: %w", out.Path, err)
		}
		target := EntryState{Exists: out.Exists}
		content := out.Content
		if out.Exists {
			target.Type = out.Type
			// Never the guest's exact mode: see the table in mode.go.
			target.Mode = appliedMode(out.Type, out.Mode.Perm(), base, cur, a.umask)
			switch out.Type {
			case manifest.File:
				target.SHA256 = sha256Hex(content)
			case manifest.Symlink:
				target.Target = string(content)
			}
		}
		if out.Path == f.Path {
			pf.result.BeforeSHA256, pf.result.AfterSHA256 = cur.hash(), target.hash()
		}
		if cur.Equal(target) {
			continue
		}
		if target.Type == manifest.Dir && cur.Type == manifest.Dir && !base.Exists {
			continue // the user made the directory too: keep theirs
		}
		r, answered := a.opts.Resolutions[out.Path]
		if answered && r.Seen != nil && !cur.Equal(*r.Seen) {
			return pf, a.changedAgain(f, out, baseData, base, cur, curData, target, content)
		}
		if !cur.sameContent(base) {
			merged, err := a.merge(f, out, base, baseData, cur, curData, content)
			var ce *ConflictError
			switch {
			case errors.As(err, &ce):
				ce.File, ce.Project, ce.Approved = f.Path, cur, target
				if !answered {
					return pf, ce
				}
				if target, content, err = a.resolve(ce, r, cur, target); err != nil {
					return pf, err
				}
				pf.resolved = r.Choice
			case err != nil:
				return pf, err
			default:
				content, target.SHA256 = merged, sha256Hex(merged)
				pf.merged = true
			}
			if out.Path == f.Path {
				pf.result.AfterSHA256 = target.hash()
			}
			if cur.Equal(target) {
				continue
			}
		}
		if cur.Type == manifest.File {
			a.keep(curData)
		}
		if target.Type == manifest.File {
			a.keep(content)
		}
		if cur.Exists && target.Exists && cur.Type != target.Type && (cur.Type == manifest.Dir || target.Type == manifest.Dir) {
			pf.steps = append(pf.steps, Step{Path: out.Path, Before: cur}, Step{Path: out.Path, After: target})
		} else {
			pf.steps = append(pf.steps, Step{Path: out.Path, Before: cur, After: target})
		}
	}
	return pf, nil
}

// replaces reports whether the steps remove a file or link at p.
func (pf plannedFile) replaces(p string) bool {
	for _, s := range pf.steps {
		if s.Path == p && s.Before.Exists && s.Before.Type != manifest.Dir && !s.After.Exists {
			return true
		}
	}
	return false
}

// underReplaced returns the path above p that the plan turns from a file
// or link into a directory, or "".
func (a *applier) underReplaced(p string) string {
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if a.replaced[dir] {
			return dir
		}
	}
	return ""
}

// state is what p holds as the plan sees it: nothing under a file or
// link that an earlier planned change turns into a directory, what the
// project holds otherwise.
func (a *applier) state(p string) (EntryState, []byte, error) {
	if a.underReplaced(p) != "" {
		return EntryState{}, nil, nil
	}
	return a.pr.state(p)
}

// missingParents is checkParents as the plan sees the project: the
// directory that replaces a file or link, and all below it, are missing.
func (a *applier) missingParents(p string) ([]string, error) {
	elems := strings.Split(p, "/")
	for i := 1; i < len(elems); i++ {
		dir := strings.Join(elems[:i], "/")
		if !a.replaced[dir] {
			continue
		}
		missing, err := a.pr.checkParents(dir)
		if err != nil {
			return nil, err
		}
		for j := i; j < len(elems); j++ {
			missing = append(missing, strings.Join(elems[:j], "/"))
		}
		return missing, nil
	}
	return a.pr.checkParents(p)
}

// merge combines the user's edits (cur) with the approved content when the
// path changed in the project since the run.
func (a *applier) merge(f *File, out Outcome, base EntryState, baseData []byte, cur EntryState, curData, theirs []byte) ([]byte, error) {
	ce := &ConflictError{Path: out.Path, Base: baseData, Ours: curData, Theirs: theirs}
	switch {
	case !out.Exists:
		ce.Reason = "you changed it in the project since the run, and the approved change removes it"
		return nil, ce
	case !cur.Exists:
		ce.Reason = "you removed it from the project since the run, and the approved change edits it"
		return nil, ce
	case !textual(out, base, cur, baseData, curData, theirs):
		ce.Reason = "you changed it in the project since the run, and it cannot be merged line by line"
		return nil, ce
	}
	m := Merge3(baseData, curData, theirs)
	merged, ok := m.Content()
	if !ok {
		ce.Merge = m
		stretches := "conflicting stretches"
		if m.Conflicts() == 1 {
			stretches = "conflicting stretch"
		}
		ce.Reason = fmt.Sprintf("your edits since the run overlap the approved change (%d %s)", m.Conflicts(), stretches)
		return nil, ce
	}
	return merged, nil
}

// textual reports whether the three versions of a path can be merged
// line by line: text files on both sides (absent in the baseline or a
// text file there).
func textual(out Outcome, base, cur EntryState, baseData, curData, theirs []byte) bool {
	return out.Exists && out.Type == manifest.File && cur.Type == manifest.File &&
		(!base.Exists || base.Type == manifest.File) &&
		!looksBinary(baseData) && !looksBinary(curData) && !looksBinary(theirs)
}

// withParents adds the creation of missing parent directories and orders
// the steps: removals of files and links, removals of directories deepest
// first, creations of directories shallowest first, then writes.
func (a *applier) withParents(steps []Step) ([]Step, error) {
	created := map[string]bool{}
	removedDir := map[string]bool{}
	for _, s := range steps {
		if !s.After.Exists && s.Before.Type == manifest.Dir {
			removedDir[s.Path] = true
		}
		if s.After.Type == manifest.Dir && !s.Before.Exists {
			created[s.Path] = true
		}
	}
	var out []Step
	for _, s := range steps {
		out = append(out, s)
		if !s.After.Exists {
			continue
		}
		missing, err := a.missingParents(s.Path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Path, err)
		}
		for _, dir := range missing {
			if created[dir] {
				continue
			}
			created[dir] = true
			out = append(out, Step{Path: dir, After: EntryState{Exists: true, Type: manifest.Dir, Mode: dirMode &^ a.umask}})
		}
	}
	for dir := range removedDir {
		if created[dir] {
			// Removed and created again: leave it standing.
			delete(removedDir, dir)
		}
	}
	phase := func(s Step) int {
		switch {
		case !s.After.Exists && s.Before.Type != manifest.Dir:
			return 0
		case !s.After.Exists:
			return 1
		case s.After.Type == manifest.Dir && !s.Before.Exists:
			return 2
		}
		return 3
	}
	sort.SliceStable(out, func(i, j int) bool {
		pi, pj := phase(out[i]), phase(out[j])
		if pi != pj {
			return pi < pj
		}
		if pi == 1 {
			return out[i].Path > out[j].Path // deepest first
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
}
