package review

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Pending reports whether c is still to be sent: written, not sent in
// any round, not resolved.
func (c Comment) Pending() bool {
	return c.Sent == 0 && !c.Resolved && strings.TrimSpace(c.Text) != ""
}

// WholeFile reports whether c is about the whole file rather than lines.
func (c Comment) WholeFile() bool { return c.Start == 0 && c.End == 0 }

// Where says which lines c is about, in words: "the whole file",
// "line 4", "lines 4-9", "removed lines 4-9".
func (c Comment) Where() string {
	if c.WholeFile() {
		return "the whole file"
	}
	s := fmt.Sprintf("line %d", c.Start)
	if c.End > c.Start {
		s = fmt.Sprintf("lines %d-%d", c.Start, c.End)
	}
	if c.Old {
		s = "removed " + s
	}
	return s
}

// State says where c stands: "resolved", "sent in round N" or "not sent
// yet".
func (c Comment) State() string {
	switch {
	case c.Resolved:
		return "resolved"
	case c.Sent > 0:
		return fmt.Sprintf("sent in round %d", c.Sent)
	}
	return "not sent yet"
}

// same reports whether a and b are the same remark on the same lines,
// whatever became of it since.
func (c Comment) same(o Comment) bool {
	return c.Text == o.Text && c.Start == o.Start && c.End == o.End && c.Old == o.Old
}

// FileComment is a comment with the file it is on and its index in that
// file's FileDecision.Comments.
type FileComment struct {
	Path  string `json:"path"`
	Index int    `json:"index"`
	Comment
}

// AllComments lists every comment of d: by path, then by line (whole-file
// comments first), then in the order they were written.
func (d Decisions) AllComments() []FileComment {
	var out []FileComment
	for _, p := range slices.Sorted(maps.Keys(d.Files)) {
		cs := d.Files[p].Comments
		idx := make([]int, len(cs))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(cs[a].Start, cs[b].Start) })
		for _, i := range idx {
			out = append(out, FileComment{Path: p, Index: i, Comment: cs[i]})
		}
	}
	return out
}

// AddComment appends c to the comments of path.
func (d *Decisions) AddComment(path string, c Comment) {
	if d.Files == nil {
		d.Files = map[string]FileDecision{}
	}
	fd := d.Files[path]
	fd.Comments = append(fd.Comments, c)
	d.Files[path] = fd
}

// MarkSent records that the reply starting round carried the comments
// sent: each pending comment of d that is one of them (the same text on
// the same lines) gets Sent = round. Comments written since, or resolved
// meanwhile, are left as they are. It returns how many it marked.
func (d *Decisions) MarkSent(round int, sent []FileComment) int {
	n := 0
	for _, s := range sent {
		fd, ok := d.Files[s.Path]
		if !ok {
			continue
		}
		for i, c := range fd.Comments {
			if c.Pending() && c.same(s.Comment) {
				fd.Comments[i].Sent = round
				n++
				break
			}
		}
	}
	return n
}

// KeepSent carries what the stored decisions know about sending into d,
// which may come from a window that loaded them before a reply went out:
// a comment of d that was sent (the same text on the same lines, sent in
// stored) stays sent. Saving never takes a sent comment back.
func (d *Decisions) KeepSent(stored Decisions) {
	for p, fd := range d.Files {
		old := stored.Files[p].Comments
		used := make([]bool, len(old))
		for i, c := range fd.Comments {
			if c.Sent > 0 {
				continue
			}
			for j, o := range old {
				if !used[j] && o.Sent > 0 && o.same(c) {
					fd.Comments[i].Sent, used[j] = o.Sent, true
					break
				}
			}
		}
	}
}

// MigrateLegacy turns the comments of a review saved before comments had
// lines (FileDecision.Comment, HunkDecision.Comment) into Comments: a
// file's comment is on the whole file; a hunk's on the hunk's lines of
// the agent's version, or of the old version when the hunk only removes
// lines. A hunk cs does not have (or cs nil) leaves the comment on the
// whole file. The old fields are emptied. It reports whether d changed.
func (d *Decisions) MigrateLegacy(cs *Changeset) bool {
	changed := false
	for p, fd := range d.Files {
		var f *File
		if cs != nil {
			f = cs.File(p)
		}
		var add []Comment
		if t := strings.TrimSpace(fd.Comment); t != "" {
			add = append(add, Comment{Text: t})
		}
		for _, i := range slices.Sorted(maps.Keys(fd.Hunks)) {
			hd := fd.Hunks[i]
			t := strings.TrimSpace(hd.Comment)
			if hd.Comment != "" {
				hd.Comment, changed = "", true
				if hd.Verdict == Undecided {
					delete(fd.Hunks, i)
				} else {
					fd.Hunks[i] = hd
				}
			}
			if t == "" {
				continue
			}
			c := Comment{Text: t}
			if f != nil && i >= 0 && i < len(f.Hunks) {
				c.Start, c.End, c.Old = commentRange(f.Hunks[i])
			}
			add = append(add, c)
		}
		if fd.Comment != "" {
			fd.Comment, changed = "", true
		}
		if len(fd.Hunks) == 0 {
			fd.Hunks = nil
		}
		// A window still on the old shape may save a comment again that
		// was migrated (and maybe sent) before: it is not added twice.
		var fresh []Comment
		for _, c := range add {
			if !slices.ContainsFunc(fd.Comments, c.same) {
				fresh = append(fresh, c)
			}
		}
		fd.Comments = append(fresh, fd.Comments...)
		d.Files[p] = fd
	}
	return changed
}

// commentRange is the lines a hunk changes: its added lines in the
// agent's version, or its removed lines in the old version when it only
// removes.
func commentRange(h Hunk) (start, end int, old bool) {
	o, n := h.OldStart, h.NewStart
	for _, l := range h.Lines {
		switch l.Kind {
		case Insert:
			if h.Added > 0 {
				start, end = cmp.Or(start, n), n
			}
			n++
		case Delete:
			if h.Added == 0 {
				start, end = cmp.Or(start, o), o
			}
			o++
		default:
			o++
			n++
		}
	}
	return start, end, h.Added == 0
}

// CarryVerdicts returns d for a new round whose changeset is cur, when
// d's verdicts were given on prev (the changeset of an earlier round;
// nil when it cannot be built). Comments are all kept. Verdicts are
// kept only where what they judged is unchanged: a file whose change is
// the same keeps its verdicts; in a file the round changed, each hunk
// identical to one judged before gets that hunk's verdict (the file's
// own verdict, which would reach every new hunk, is dropped), and the
// rest is undecided. A file no longer in cur keeps only its comments.
func (d Decisions) CarryVerdicts(prev, cur *Changeset) Decisions {
	// Actions are numbered once for the sandbox's life: their verdicts
	// stay.
	out := Decisions{Files: map[string]FileDecision{}, Round: d.Round, Actions: d.Actions}
	for p, fd := range d.Files {
		nfd := FileDecision{Comments: fd.Comments, Comment: fd.Comment}
		var pf, cf *File
		if prev != nil {
			pf = prev.File(p)
		}
		if cur != nil {
			cf = cur.File(p)
		}
		switch {
		case pf == nil || cf == nil:
		case sameChange(pf, cf):
			nfd.Verdict, nfd.Hunks = fd.Verdict, fd.Hunks
		case pf.HunkSelectable() && cf.HunkSelectable():
			for i, h := range pf.Hunks {
				v := fd.Hunks[i].Verdict
				if v == Undecided {
					v = fd.Verdict
				}
				if v == Undecided {
					continue
				}
				if j := uniqueHunk(cf.Hunks, h); j >= 0 {
					if nfd.Hunks == nil {
						nfd.Hunks = map[int]HunkDecision{}
					}
					nfd.Hunks[j] = HunkDecision{Verdict: v}
				}
			}
		}
		if nfd.Verdict == Undecided && len(nfd.Hunks) == 0 && len(nfd.Comments) == 0 && nfd.Comment == "" {
			continue
		}
		out.Files[p] = nfd
	}
	return out
}

// sameChange reports whether two changes of a path are the same change.
func sameChange(a, b *File) bool {
	return a.Status == b.Status && a.OldPath == b.OldPath && sameSide(a.Old, b.Old) && sameSide(a.New, b.New)
}

func sameSide(a, b *Side) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// uniqueHunk is the index of the one hunk of hs with h's lines, or -1
// when none or several have them.
func uniqueHunk(hs []Hunk, h Hunk) int {
	found := -1
	for j, c := range hs {
		if slices.Equal(c.Lines, h.Lines) {
			if found >= 0 {
				return -1
			}
			found = j
		}
	}
	return found
}
