package review

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Feedback is what a reply round tells the agent besides the reviewer's
// message: the comments not sent yet, each with the lines it is about,
// and the changes the reviewer rejected. Decisions.Feedback builds it;
// Text renders it.
type Feedback struct {
	// Comments are the pending comments (Comment.Pending), in the order
	// of the changeset's files, then by line.
	Comments []FileComment
	// Rejected are the rejected changes: hunks, or whole files.
	Rejected []Rejection

	cs *Changeset
}

// Rejection is a change the reviewer rejected: hunk Hunk (0-based) of
// Path, or with Hunk -1 the whole change to the file.
type Rejection struct {
	Path string
	Hunk int
}

// QuoteLines caps the lines of the file quoted for one comment or one
// rejected hunk; the rest is counted.
const QuoteLines = 40

// Feedback gathers what the next reply round sends under d: every
// pending comment (resolved and already sent ones never go again) and
// every rejected hunk of cs, or rejected file when the file is not
// judged hunk by hunk.
func (d Decisions) Feedback(cs *Changeset) Feedback {
	fb := Feedback{cs: cs}
	inCS := map[string]bool{}
	var order []string
	for _, f := range cs.Files {
		inCS[f.Path] = true
		order = append(order, f.Path)
	}
	// Comments on files this changeset no longer has go last, by path.
	for _, p := range slices.Sorted(maps.Keys(d.Files)) {
		if !inCS[p] {
			order = append(order, p)
		}
	}
	byPath := map[string][]FileComment{}
	for _, c := range d.AllComments() {
		if c.Pending() {
			byPath[c.Path] = append(byPath[c.Path], c)
		}
	}
	for _, p := range order {
		fb.Comments = append(fb.Comments, byPath[p]...)
	}
	for _, f := range cs.Files {
		fd, ok := d.Files[f.Path]
		if !ok {
			continue
		}
		if !f.HunkSelectable() || len(f.Hunks) == 0 {
			if fd.Verdict == Reject {
				fb.Rejected = append(fb.Rejected, Rejection{Path: f.Path, Hunk: -1})
			}
			continue
		}
		sel, _ := d.Selection(f)
		all := true
		var hunks []Rejection
		for i := range f.Hunks {
			v := fd.Hunks[i].Verdict
			if v == Undecided {
				v = fd.Verdict
			}
			if v == Reject && !sel[i] {
				hunks = append(hunks, Rejection{Path: f.Path, Hunk: i})
			} else {
				all = false
			}
		}
		if all && fd.Verdict == Reject {
			hunks = []Rejection{{Path: f.Path, Hunk: -1}}
		}
		fb.Rejected = append(fb.Rejected, hunks...)
	}
	return fb
}

// Empty reports whether there is nothing to send but the message.
func (fb Feedback) Empty() bool { return len(fb.Comments) == 0 && len(fb.Rejected) == 0 }

// Summary counts what goes with the message, for people: "3 comments
// and 2 rejected hunks", "1 comment", "" when nothing.
func (fb Feedback) Summary() string {
	hunks, files := 0, 0
	for _, r := range fb.Rejected {
		if r.Hunk < 0 {
			files++
		} else {
			hunks++
		}
	}
	var parts []string
	for _, n := range []struct {
		n         int
		one, many string
	}{{len(fb.Comments), "comment", "comments"}, {hunks, "rejected hunk", "rejected hunks"}, {files, "rejected file", "rejected files"}} {
		switch {
		case n.n == 1:
			parts = append(parts, "1 "+n.one)
		case n.n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", n.n, n.many))
		}
	}
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// Text renders the feedback for the agent, in Markdown: each comment
// under the file and lines it is about, those lines quoted from the file
// (the agent's version, or the old one for removed lines), then each
// rejected hunk with its lines. It is "" when the feedback is empty.
func (fb Feedback) Text() string {
	var b strings.Builder
	if len(fb.Comments) > 0 {
		b.WriteString("Their comments, each on the lines of your version it is about:\n")
		for _, c := range fb.Comments {
			fmt.Fprintf(&b, "\n### %s, %s", c.Path, c.Where())
			if c.Old {
				b.WriteString(" (of the version before your changes)")
			}
			b.WriteString("\n")
			if q := fb.quote(c); q != "" {
				b.WriteString(q)
			}
			for _, l := range strings.Split(strings.TrimSpace(c.Text), "\n") {
				b.WriteString("> " + strings.TrimRight(l, " \t\r") + "\n")
			}
		}
	}
	if len(fb.Rejected) > 0 {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString("The changes they rejected (they are not taken as they are):\n")
		for _, r := range fb.Rejected {
			var f *File
			if fb.cs != nil {
				f = fb.cs.File(r.Path)
			}
			if f == nil || r.Hunk >= len(f.Hunks) {
				fmt.Fprintf(&b, "\n### %s: the whole change to this file\n", r.Path)
				continue
			}
			if r.Hunk < 0 {
				fmt.Fprintf(&b, "\n### %s (%s): the whole change to this file\n", r.Path, f.Status)
				continue
			}
			h := f.Hunks[r.Hunk]
			where := "removed"
			if h.NewLines > 0 {
				s, e, _ := commentRange(h)
				where = Comment{Start: s, End: e}.Where() + " of your version"
			}
			fmt.Fprintf(&b, "\n### %s, hunk %d (%s)\n", r.Path, r.Hunk+1, where)
			b.WriteString(quoteHunk(h))
		}
	}
	return b.String()
}

// quote is the lines c is about, numbered, from the file's content in
// the changeset: "" for a whole-file comment, a binary file or a file
// the changeset does not have.
func (fb Feedback) quote(c FileComment) string {
	if c.WholeFile() || fb.cs == nil {
		return ""
	}
	f := fb.cs.File(c.Path)
	if f == nil || f.Binary {
		return ""
	}
	data := f.NewContent()
	if c.Old {
		data = f.OldContent()
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(data) == 0 {
		lines = nil
	}
	start, end := max(c.Start, 1), min(max(c.End, c.Start), len(lines))
	if start > end {
		return ""
	}
	var b strings.Builder
	b.WriteString("```\n")
	shown := min(end, start+QuoteLines-1)
	for n := start; n <= shown; n++ {
		fmt.Fprintf(&b, "%5d  %s\n", n, lines[n-1])
	}
	if shown < end {
		fmt.Fprintf(&b, "  … %d more lines\n", end-shown)
	}
	b.WriteString("```\n")
	return b.String()
}

// quoteHunk is a hunk's lines as a diff, capped.
func quoteHunk(h Hunk) string {
	var b bytes.Buffer
	b.WriteString("```diff\n")
	for i, l := range h.Lines {
		if i == QuoteLines {
			fmt.Fprintf(&b, "… %d more lines\n", len(h.Lines)-i)
			break
		}
		fmt.Fprintf(&b, "%s%s\n", l.Kind, l.Text)
	}
	b.WriteString("```\n")
	return b.String()
}
