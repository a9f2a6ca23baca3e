package review

import (
	"fmt"
	"strings"
)

// Feedback renders the user's comments as a message for the agent's next
// round: each commented file, and each commented hunk with its lines, so
// the agent sees what the comment is about. It is "" when there is no
// comment.
func (d Decisions) Feedback(cs *Changeset) string {
	var b strings.Builder
	for _, f := range cs.Files {
		fd, ok := d.Files[f.Path]
		if !ok {
			continue
		}
		var hunkNotes []string
		for i, h := range f.Hunks {
			hd, ok := fd.Hunks[i]
			if !ok || strings.TrimSpace(hd.Comment) == "" {
				continue
			}
			var note strings.Builder
			fmt.Fprintf(&note, "Hunk %d (lines %d-%d of your version)%s:\n", i+1, h.NewStart, h.NewStart+max(h.NewLines-1, 0), verdictNote(hd.Verdict))
			for _, l := range h.Lines {
				fmt.Fprintf(&note, "    %s%s\n", l.Kind, l.Text)
			}
			fmt.Fprintf(&note, "  Comment: %s\n", strings.TrimSpace(hd.Comment))
			hunkNotes = append(hunkNotes, note.String())
		}
		if strings.TrimSpace(fd.Comment) == "" && len(hunkNotes) == 0 {
			continue
		}
		fmt.Fprintf(&b, "## %s (%s)%s\n", f.Path, f.Status, verdictNote(fd.Verdict))
		if c := strings.TrimSpace(fd.Comment); c != "" {
			fmt.Fprintf(&b, "Comment: %s\n", c)
		}
		for _, n := range hunkNotes {
			b.WriteString(n)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func verdictNote(v Verdict) string {
	switch v {
	case Approve:
		return ", approved"
	case Reject:
		return ", rejected"
	}
	return ""
}
