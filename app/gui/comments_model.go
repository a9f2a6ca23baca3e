package gui

import (
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/review"
)

// The review's comments on lines of a file (review.Comment), kept in the
// decisions with the verdicts. A comment sent to the agent (Sent > 0) is
// read only: it can be resolved, not changed or deleted.

// comments are the comments on file p, in the order they were written.
func (m *reviewModel) comments(p string) []review.Comment {
	return m.d.Files[p].Comments
}

// addComment adds a comment on file p and returns its index; a comment
// with no text is not added (-1).
func (m *reviewModel) addComment(p string, c review.Comment) int {
	if strings.TrimSpace(c.Text) == "" {
		return -1
	}
	if c.End < c.Start {
		c.Start, c.End = c.End, c.Start
	}
	c.Sent, c.Resolved = 0, false
	fd := m.d.Files[p]
	fd.Comments = append(slices.Clip(fd.Comments), c)
	m.d.Files[p] = fd
	return len(fd.Comments) - 1
}

// editComment replaces the text of comment i of file p, unless it was
// sent; an empty text deletes it.
func (m *reviewModel) editComment(p string, i int, text string) bool {
	fd := m.d.Files[p]
	if i < 0 || i >= len(fd.Comments) || fd.Comments[i].Sent > 0 {
		return false
	}
	if strings.TrimSpace(text) == "" {
		return m.deleteComment(p, i)
	}
	fd.Comments = slices.Clone(fd.Comments)
	fd.Comments[i].Text = text
	m.d.Files[p] = fd
	return true
}

// resolveComment marks comment i of file p resolved (folded, never sent)
// or open again.
func (m *reviewModel) resolveComment(p string, i int, resolved bool) {
	fd := m.d.Files[p]
	if i < 0 || i >= len(fd.Comments) {
		return
	}
	fd.Comments = slices.Clone(fd.Comments)
	fd.Comments[i].Resolved = resolved
	m.d.Files[p] = fd
}

// deleteComment removes comment i of file p, unless it was sent.
func (m *reviewModel) deleteComment(p string, i int) bool {
	fd := m.d.Files[p]
	if i < 0 || i >= len(fd.Comments) || fd.Comments[i].Sent > 0 {
		return false
	}
	fd.Comments = slices.Delete(slices.Clone(fd.Comments), i, i+1)
	if len(fd.Comments) == 0 {
		fd.Comments = nil
	}
	m.d.Files[p] = fd
	return true
}
