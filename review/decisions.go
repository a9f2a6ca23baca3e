package review

import (
	"fmt"
	"io/fs"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// Verdict is the user's answer for a file or a hunk. The zero value means
// no answer yet.
type Verdict string

const (
	Undecided Verdict = ""
	Approve   Verdict = "approve"
	Reject    Verdict = "reject"
)

// HunkDecision is the verdict for one hunk.
type HunkDecision struct {
	Verdict Verdict `json:"verdict,omitempty"`
	// Comment is a hunk's comment in a review saved before comments had
	// lines: read, turned into a Comment on the hunk's lines by
	// Decisions.MigrateLegacy, never written.
	Comment string `json:"comment,omitempty"`
}

// FileDecision is the verdict for one file and for its hunks by index in
// File.Hunks, and the comments on the file's lines.
//
// A hunk is taken when its own verdict is Approve, or when it has none and
// the file's verdict is Approve. Files whose hunks cannot be chosen one by
// one (see File.HunkSelectable) follow the file verdict alone.
type FileDecision struct {
	Verdict Verdict `json:"verdict,omitempty"`
	// Comment is the file's comment in a review saved before comments
	// had lines: read, turned into a whole-file Comment by
	// Decisions.MigrateLegacy, never written.
	Comment string               `json:"comment,omitempty"`
	Hunks   map[int]HunkDecision `json:"hunks,omitempty"`
	// Comments are the reviewer's remarks on lines of the file, as in a
	// pull-request review.
	Comments []Comment `json:"comments,omitempty"`
}

// Comment is a reviewer's remark for the agent on a range of lines of a
// file (or on the whole file), possibly several lines long. It is sent to
// the agent once, with the first reply round after it was written.
type Comment struct {
	// Text is what the reviewer wrote.
	Text string `json:"text"`
	// Start and End are the first and last line it is about (1-based,
	// End ≥ Start) in the agent's version of the file, or in the
	// baseline's when Old is set (a removed line). Both 0: the whole file.
	Start int  `json:"start,omitempty"`
	End   int  `json:"end,omitempty"`
	Old   bool `json:"old,omitempty"`
	// Sent is the round the comment was sent in: N when the reply that
	// started round N carried it to the agent; 0 while not yet sent.
	Sent int `json:"sent,omitempty"`
	// Resolved marks a comment the reviewer is done with: it is kept,
	// shown folded, and never sent.
	Resolved bool `json:"resolved,omitempty"`
}

// Decisions holds the user's review of a Changeset, keyed by File.Path.
// It is stored as review.json; the zero value approves nothing.
type Decisions struct {
	Files map[string]FileDecision `json:"files,omitempty"`
	// Round is the round of the sandbox whose changeset the verdicts
	// were given on (hunks are numbered in it); 0 when it was not
	// recorded. Comments are anchored by lines and need no round.
	Round int `json:"round,omitempty"`
	// Actions are the verdicts on the sandbox's staged actions (requests
	// the agent made that were held for review), by their numbers. An
	// action is sent only when approved here.
	Actions map[int]Verdict `json:"actions,omitempty"`
}

// ApproveAll returns decisions approving every file of cs.
func ApproveAll(cs *Changeset) Decisions {
	d := Decisions{Files: map[string]FileDecision{}}
	for _, f := range cs.Files {
		d.Files[f.Path] = FileDecision{Verdict: Approve}
	}
	return d
}

// SetFile records the verdict for a whole file, keeping comments.
func (d *Decisions) SetFile(path string, v Verdict) {
	if d.Files == nil {
		d.Files = map[string]FileDecision{}
	}
	fd := d.Files[path]
	fd.Verdict = v
	d.Files[path] = fd
}

// SetHunk records the verdict for hunk i of a file, keeping comments.
func (d *Decisions) SetHunk(path string, i int, v Verdict) {
	if d.Files == nil {
		d.Files = map[string]FileDecision{}
	}
	fd := d.Files[path]
	if fd.Hunks == nil {
		fd.Hunks = map[int]HunkDecision{}
	}
	hd := fd.Hunks[i]
	hd.Verdict = v
	fd.Hunks[i] = hd
	d.Files[path] = fd
}

// Selection returns which hunks of f are taken under d, and whether f is
// touched at all.
func (d Decisions) Selection(f *File) (hunks []bool, touched bool) {
	fd := d.Files[f.Path]
	if !f.HunkSelectable() {
		taken := fd.Verdict == Approve
		hunks = make([]bool, len(f.Hunks))
		for i := range hunks {
			hunks[i] = taken
		}
		return hunks, taken
	}
	hunks = make([]bool, len(f.Hunks))
	for i := range f.Hunks {
		v := fd.Hunks[i].Verdict
		if v == Undecided {
			v = fd.Verdict
		}
		hunks[i] = v == Approve
		touched = touched || hunks[i]
	}
	// An approved file whose hunks are all rejected may still carry an
	// approved mode change.
	if fd.Verdict == Approve && f.Old.Mode != f.New.Mode {
		touched = true
	}
	return hunks, touched
}

// Validate reports decisions that name files or hunks cs does not have.
// A file that carries only comments may be missing from cs (the comments
// of an earlier round outlive its changes).
func (d Decisions) Validate(cs *Changeset) error {
	for path, fd := range d.Files {
		f := cs.File(path)
		if f == nil && fd.Verdict == Undecided && len(fd.Hunks) == 0 {
			continue
		}
		if f == nil {
			return fmt.Errorf("decisions name %s, which the changeset does not have", path)
		}
		for i := range fd.Hunks {
			if i < 0 || i >= len(f.Hunks) {
				return fmt.Errorf("decisions name hunk %d of %s, which has %d hunks", i, path, len(f.Hunks))
			}
		}
		for _, v := range append([]Verdict{fd.Verdict}, hunkVerdicts(fd)...) {
			if v != Undecided && v != Approve && v != Reject {
				return fmt.Errorf("decision for %s: unknown verdict %q", path, v)
			}
		}
	}
	return nil
}

func hunkVerdicts(fd FileDecision) []Verdict {
	var vs []Verdict
	for _, h := range fd.Hunks {
		vs = append(vs, h.Verdict)
	}
	return vs
}

// Outcome is what one path must become once the decisions are applied.
type Outcome struct {
	Path string
	// Exists is false when the path must be removed.
	Exists bool
	Type   manifest.Type
	Mode   fs.FileMode
	// Content is the file content, or the link target of a symlink.
	Content []byte
}

// Resolve returns the outcomes of f under d: nothing when f is not
// touched; for a rename, the removal of the old path and the new path;
// for a partially approved file, the old content with only the approved
// hunks applied, byte for byte.
func (d Decisions) Resolve(f *File) []Outcome {
	sel, touched := d.Selection(f)
	if !touched {
		return nil
	}
	var out []Outcome
	if f.Status == Renamed {
		out = append(out, Outcome{Path: f.OldPath})
	}
	if f.New == nil {
		return append(out, Outcome{Path: f.Path})
	}
	o := Outcome{Path: f.Path, Exists: true, Type: f.New.Type, Mode: f.New.Mode}
	switch {
	case f.New.Type == manifest.Dir:
	case f.HunkSelectable():
		o.Content = applyHunks(f.oldData, f.Hunks, func(i int) bool { return sel[i] })
		if !d.Files[f.Path].approvesMode() {
			o.Mode = f.Old.Mode
		}
	default:
		o.Content = f.newData
	}
	return append(out, o)
}

// approvesMode reports whether a partially approved file takes the new
// mode: only when the file itself is approved.
func (fd FileDecision) approvesMode() bool { return fd.Verdict == Approve }
