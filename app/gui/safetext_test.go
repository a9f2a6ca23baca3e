package gui

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// hostileChangeset is a change whose line erases itself, a trojan-source
// line and a file whose name hides a bidi override.
func hostileChangeset(t *testing.T) *review.Changeset {
	t.Helper()
	objs := testObjects{}
	entry := objs.entry
	changes := []manifest.Change{
		{Kind: manifest.Modified, Path: "setup.py", Old: entry("setup.py", "print('hello')\n"),
			New: entry("setup.py", "import os; os.system('id')\r\x1b[2Kprint('hello')\nok = \u202e} \u2066if admin {\n")},
		{Kind: manifest.Added, Path: "gnp\u202e.sh", New: entry("gnp\u202e.sh", "x\n")},
	}
	cs := objs.changeset(t, changes)
	return cs
}

// hiddenRunes are what must never reach a widget from the guest.
var hiddenRunes = []string{"\x1b", "\r", "\x07", "\u202e", "\u2066", "\u200b"}

// TestReviewShowsGuestTextSafely is the attack in the review window:
// the lines, names, summary and transcript from the guest are shown
// with visible escapes, and the file's header says it is flagged.
func TestReviewShowsGuestTextSafely(t *testing.T) {
	svc := &fakeService{
		infos:      []sandbox.Info{testInfo("1a2b3c4d")},
		changesets: map[string]*review.Changeset{"1a2b3c4d": hostileChangeset(t)},
		summary:    "Fixed a typo.\x1b]0;pwned\x07\x1b[8m hidden\x1b[m \u202eexe.txt\n",
		transcript: "agent: done \u200b\u202e\n\x1b[31mred\x1b[m\n",
	}
	r := newTestReview(t, svc)
	r.files.list.Select("setup.py")
	markup := test.RenderToMarkup(r.Window.Canvas())
	// The code views' rows are the hunk's lines as drawn.
	var grid strings.Builder
	for _, v := range r.diff.dv.codes {
		grid.WriteString(v.Text())
	}
	for _, want := range []string{`import os; os.system('id')\x0d\x1b[2Kprint('hello')`, `ok = <U+202E>} <U+2066>if admin {`} {
		if !strings.Contains(grid.String(), want) {
			t.Errorf("the diff does not show %q:\n%s", want, grid.String())
		}
	}
	if !strings.Contains(markup, "contains control or bidi characters") {
		t.Error("the file's header does not say it holds control or bidi characters")
	}
	for _, what := range []struct{ name, text string }{
		{"diff", grid.String()},
		{"window", markup},
		{"transcript", plainTranscript([]byte(svc.transcript))},
	} {
		for _, bad := range hiddenRunes {
			if strings.Contains(what.text, bad) {
				t.Errorf("the %s shows %q raw", what.name, bad)
			}
		}
	}
	if s := plainTranscript([]byte(svc.transcript)); !strings.Contains(s, "done <U+200B><U+202E>") {
		t.Errorf("transcript = %q, want its invisible characters visible", s)
	}
	r.tabs.SelectIndex(1) // the rationale
	markup = test.RenderToMarkup(r.Window.Canvas())
	// Markdown splits the text at the brackets; each piece is there.
	for _, want := range []string{`Fixed a typo.\x1b]0;pwned\x07\x1b`, `8m hidden\x1b`, "<U+202E>exe.txt"} {
		if !strings.Contains(markup, want) {
			t.Errorf("the rationale does not show %q:\n%s", want, markup)
		}
	}
	for _, bad := range hiddenRunes {
		if strings.Contains(markup, bad) {
			t.Errorf("the rationale shows %q raw", bad)
		}
	}
	// The file list names the file with the bidi override visibly,
	// flagged with a warning that says why.
	r.files.list.Select("gnp\u202e.sh")
	row := r.rowOf(t, "gnp\u202e.sh")
	if row.label != "gnp<U+202E>.sh" || !row.warn.Visible() || !strings.Contains(row.warn.Tip, "control or bidi") {
		t.Errorf("the list shows the name %q, warning shown %v (%q); want it escaped and flagged", row.label, row.warn.Visible(), row.warn.Tip)
	}
}
