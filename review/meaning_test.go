package review

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/review/semantic"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// TestOverview is the run's overview on the example: a Python
// function given a parameter and a constant, a test added, a README
// changed, and a binary left without a summary.
func TestOverview(t *testing.T) {
	s := store{}
	changes := []manifest.Change{
		changeOf(s, "wordcount.py",
			"def count_words(text):\n    return len(text.split())\n",
			"STOP_WORDS = {\"a\", \"the\"}\n\n\ndef count_words(text, stop_words=STOP_WORDS):\n    return len([w for w in text.split() if w not in stop_words])\n"),
		changeOf(s, "tests/test_stopwords.py", absent, "def test_stop():\n    assert count_words(\"a cat\") == 1\n"),
		changeOf(s, "README.md", "# wc\n", "# wc\n\nStop words are left out.\n"),
		changeOf(s, "lib/new.go", absent, "package lib\n\nfunc A() {}\n\nfunc B() {}\n"),
		changeOf(s, "lib/old.go", "package lib\n\n// only a comment changes\nfunc C() {}\n", "package lib\n\n// the comment changed\nfunc C() {}\n"),
	}
	cs := summarized(t, s, changes)
	want := "added new.go (A, B); added STOP_WORDS; count_words: new parameter stop_words, body changed; " +
		"tests: added test_stopwords.py; imports, comments or layout only: old.go; also: README.md"
	if got := cs.Overview(); got != want {
		t.Errorf("Overview:\n got %q\nwant %q", got, want)
	}
	if f := cs.File("README.md"); f.Semantic != nil {
		t.Errorf("README.md has a semantic summary: %+v", f.Semantic)
	}
	if f := cs.File("lib/old.go"); !f.Semantic.Parsed() || len(f.Semantic.Changes) != 0 {
		t.Errorf("a comment-only change: %+v", f.Semantic)
	}
}

// TestOverviewCapped: many files make an overview of at most
// maxOverviewPhrases phrases, and names from the guest are shown safely.
func TestOverviewCapped(t *testing.T) {
	s := store{}
	var changes []manifest.Change
	for i := 0; i < 30; i++ {
		changes = append(changes, changeOf(s, "pkg/f"+string(rune('a'+i%26))+strings.Repeat("x", i/26)+".py", absent,
			"def f"+strings.Repeat("y", i)+"():\n    pass\n"))
	}
	changes = append(changes, changeOf(s, "evil\u202e.py", absent, "def \u202eevil():\n    pass\n"))
	cs := summarized(t, s, changes)
	got := cs.Overview()
	if n := strings.Count(got, "; ") + 1; n != maxOverviewPhrases {
		t.Errorf("%d phrases, want %d: %q", n, maxOverviewPhrases, got)
	}
	if !strings.HasSuffix(got, "and 21 more") { // 30 files and evil.py, which does not parse
		t.Errorf("overview does not say how many more: %q", got)
	}
	if strings.Contains(got, "\u202e") {
		t.Errorf("a bidi control from the guest reached the overview: %q", got)
	}
}

// TestOverviewSameChange: the same change in many files is said once,
// with their number.
func TestOverviewSameChange(t *testing.T) {
	s := store{}
	var changes []manifest.Change
	for _, p := range []string{"a/x.go", "b/x.go", "c/y.go"} {
		changes = append(changes, changeOf(s, p, "package p\n\nvar a = 1\n", "package p\n\nvar a = 2\n"))
	}
	changes = append(changes, changeOf(s, "d/z.go", "package p\n\nfunc F() {}\n", "package p\n\nfunc F() { g() }\n"))
	cs := summarized(t, s, changes)
	if got, want := cs.Overview(), "a: value changed (in 3 files); F: body changed"; got != want {
		t.Errorf("Overview = %q, want %q", got, want)
	}
}

// TestOverviewOnlyOther: a run that changed no code says which files it
// changed.
func TestOverviewOnlyOther(t *testing.T) {
	s := store{}
	cs := summarized(t, s, []manifest.Change{changeOf(s, "NOTES.md", "a\n", "b\n")})
	if got, want := cs.Overview(), "changed NOTES.md"; got != want {
		t.Errorf("Overview = %q, want %q", got, want)
	}
}

// TestSummarizeBudget: past the run's budget a code file is left unread
// and says why (its reader shows its line counts), never blocking the
// review on a guest's thousands of slow files.
func TestSummarizeBudget(t *testing.T) {
	s := store{}
	cs, err := New(context.Background(), []manifest.Change{
		changeOf(s, "a.go", absent, "package a\n\nfunc A() {}\n"),
		changeOf(s, "b.md", absent, "# b\n"),
	}, s.source, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.summarize(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if f := cs.File("a.go"); f.Semantic == nil || f.Semantic.Parsed() || !strings.Contains(f.Semantic.Skipped, "took over") {
		t.Errorf("a.go past the budget: %+v", f.Semantic)
	}
	if f := cs.File("b.md"); f.Semantic != nil {
		t.Errorf("b.md has a summary: %+v", f.Semantic)
	}
	if got, want := cs.Overview(), "changed a.go, b.md"; got != want {
		t.Errorf("Overview = %q, want %q", got, want)
	}
}

// TestOverviewMany: a change to hundreds of files keeps the overview to a
// line: each phrase names a few files and counts the rest.
func TestOverviewMany(t *testing.T) {
	s := store{}
	var changes []manifest.Change
	changes = append(changes, changeOf(s, "strings/strings.go",
		"package strings\n\nfunc Fields(s string) []string { return nil }\n",
		"package strings\n\nfunc Fields(s string, limit int) []string { return nil }\n"))
	for i := range 200 {
		changes = append(changes, changeOf(s, fmt.Sprintf("net/t%03d_test.go", i), "package net\n", "package net // x\n"))
	}
	changes = append(changes, changeOf(s, "net/new_test.go", absent, "package net\n"))
	for i := range 300 {
		changes = append(changes, changeOf(s, fmt.Sprintf("net/f%03d.go", i), "package net\n", "// Copyright\npackage net\n"))
	}
	for i := range 100 {
		changes = append(changes, changeOf(s, fmt.Sprintf("doc/d%03d.md", i), "a\n", "b\n"))
	}
	cs := summarized(t, s, changes)
	want := "Fields: new parameter limit; tests: 200 changed, 1 added; " +
		"imports, comments or layout only: f000.go, f001.go, f002.go, f003.go and 296 more files; " +
		"also: d000.md, d001.md, d002.md, d003.md and 96 more files"
	if got := cs.Overview(); got != want {
		t.Errorf("Overview:\n got %q\nwant %q", got, want)
	}
}

// TestOverviewTopLevel: code outside every declaration is named by its
// file in the overview, and never said to be imports or comments only.
func TestOverviewTopLevel(t *testing.T) {
	s := store{}
	cs := summarized(t, s, []manifest.Change{
		changeOf(s, "hook.py", "import os\n\ndef f():\n    pass\n", "import os\n\ndef f():\n    pass\n\nos.system(\"sh\")\n"),
		changeOf(s, "util.py", "import os\n\ndef g():\n    pass\n", "import os, sys\n\ndef g():\n    pass\n"),
	})
	if lang, ok := semantic.Language("a.py"); !ok {
		t.Skipf("this build has no %s parser (tree-sitter needs cgo)", lang)
	}
	want := "hook.py: added top-level code; imports, comments or layout only: util.py"
	if got := cs.Overview(); got != want {
		t.Errorf("Overview:\n got %q\nwant %q", got, want)
	}
}

// TestOverviewBroken: a file whose new side does not parse is said so,
// never counted among the files whose declarations did not change.
func TestOverviewBroken(t *testing.T) {
	s := store{}
	cs := summarized(t, s, []manifest.Change{
		changeOf(s, "a.go", "package a\n\nfunc F() {}\n", "package a\n\nfunc F() {}\n\nfunc G( {\n"),
	})
	if got := cs.Overview(); !strings.Contains(got, "a.go: does not parse as Go") || strings.Contains(got, "layout only") {
		t.Errorf("Overview = %q", got)
	}
}

// summarized is the changeset of changes, their contents in s, with what
// each change means read.
func summarized(t *testing.T, s store, changes []manifest.Change) *Changeset {
	t.Helper()
	cs, err := New(context.Background(), changes, s.source, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.Summarize(context.Background()); err != nil {
		t.Fatal(err)
	}
	return cs
}
