package gui

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/review"
)

// TestCommentModel: comments are added in order (a reversed range set
// right, an empty one refused), edited, resolved and deleted; one sent
// to the agent keeps its text, and a file with only comments is passed
// on with the decisions.
func TestCommentModel(t *testing.T) {
	m := newReviewModel(testChangeset(t))
	const p = "src/main.go"
	if i := m.addComment(p, review.Comment{Text: "  \n", Start: 1, End: 1}); i != -1 {
		t.Errorf("an empty comment was added at %d", i)
	}
	m.addComment(p, review.Comment{Text: "first", Start: 9, End: 4, Sent: 3, Resolved: true})
	m.addComment(p, review.Comment{Text: "second", Start: 2, End: 2, Old: true})
	m.addComment(p, review.Comment{Text: "on the file"})
	if !m.editComment(p, 1, "second, edited") {
		t.Error("an unsent comment could not be edited")
	}
	m.resolveComment(p, 0, true)
	if !m.deleteComment(p, 2) {
		t.Error("an unsent comment could not be deleted")
	}
	want := []review.Comment{
		{Text: "first", Start: 4, End: 9, Resolved: true},
		{Text: "second, edited", Start: 2, End: 2, Old: true},
	}
	if diff := cmp.Diff(want, m.comments(p)); diff != "" {
		t.Errorf("comments (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, m.decisions().Files[p].Comments); diff != "" {
		t.Errorf("comments passed on with the decisions (-want +got):\n%s", diff)
	}
	fd := m.d.Files[p]
	fd.Comments[1].Sent = 2
	m.d.Files[p] = fd
	if m.editComment(p, 1, "rewritten") || m.deleteComment(p, 1) || m.comments(p)[1].Text != "second, edited" {
		t.Error("a comment sent in round 2 was changed")
	}
	if m.editComment(p, 1, "") {
		t.Error("emptying a sent comment deleted it")
	}
}
