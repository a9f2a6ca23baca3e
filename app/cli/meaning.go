package cli

import (
	"fmt"
	"io"

	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// maxSummaryLines is how many changes diff --summary lists under one file
// before it says how many more there are.
const maxSummaryLines = 40

// writeSummary prints what each file's change means, after the run's
// overview: the declarations added, removed, renamed, moved or changed for
// a file its parser reads, the line counts for any other, and the reasons
// a file deserves a second look. Every name is from the guest and shown
// safely.
func writeSummary(w io.Writer, cs *review.Changeset) {
	if o := cs.Overview(); o != "" {
		fmt.Fprintln(w, "# what changed: "+o)
	}
	if look := cs.SecondLook(); look.Files > 0 {
		fmt.Fprintln(w, "# "+look.String())
	}
	for _, f := range cs.Files {
		fmt.Fprintln(w)
		head := safetext.Line(f.Path)
		if f.Status == review.Renamed {
			head = safetext.Line(f.OldPath) + " → " + head
		}
		fmt.Fprintf(w, "%s  (%s%s)\n", head, f.Status, lineCounts(f))
		for _, fl := range f.Flags {
			fmt.Fprintln(w, "  ! "+fl.Reason)
		}
		s := f.Semantic
		switch {
		case s != nil:
			for _, l := range s.Lines(maxSummaryLines) {
				fmt.Fprintln(w, "  "+l)
			}
		case f.Binary:
			fmt.Fprintln(w, "  binary: no lines to count")
		case f.IsDir() || f.IsSymlink() || f.Added+f.Removed == 0:
			// The status says it all (a mode change, an empty file).
		default:
			fmt.Fprintln(w, "  "+lineWords(f)+" (no parser for this kind of file)")
		}
	}
}

// lineCounts is ", +3 −1" for a text file, "" for one without lines.
func lineCounts(f *review.File) string {
	if f.Added == 0 && f.Removed == 0 {
		return ""
	}
	return fmt.Sprintf(", +%d −%d", f.Added, f.Removed)
}

// lineWords says a file's line counts in words.
func lineWords(f *review.File) string {
	switch {
	case f.Removed == 0:
		return fmt.Sprintf("%d %s added", f.Added, plural(f.Added, "line", "lines"))
	case f.Added == 0:
		return fmt.Sprintf("%d %s removed", f.Removed, plural(f.Removed, "line", "lines"))
	}
	return fmt.Sprintf("%d %s added, %d removed", f.Added, plural(f.Added, "line", "lines"), f.Removed)
}
