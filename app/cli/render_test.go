package cli

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mattn/go-runewidth"

	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

func TestWriteShownPatchKeepsACleanPatch(t *testing.T) {
	patch := "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-old\n+new\n ctx\n@@ -9 +9 @@\n-a\n+b\ndiff --git a/y b/y\nold mode 100644\nnew mode 100755\n"
	var out bytes.Buffer
	writeShownPatch(&out, &review.Changeset{}, []byte(patch), true)
	plain := regexp.MustCompile("\033\\[[0-9;]*m").ReplaceAllString(out.String(), "")
	if strings.Count(plain, "[hunk 1]") != 1 || strings.Count(plain, "[hunk 2]") != 1 {
		t.Errorf("hunks not numbered per file:\n%s", plain)
	}
	plain = regexp.MustCompile(` \[hunk \d+\]`).ReplaceAllString(plain, "")
	if plain != patch {
		t.Errorf("colouring changed the patch:\n%q\nwant\n%q", plain, patch)
	}
}

func TestWriteStat(t *testing.T) {
	cs := &review.Changeset{Files: []*review.File{
		{Path: "a.go", Status: review.Modified, Added: 3, Removed: 1},
		{Path: "bin.dat", Status: review.Added, Binary: true, New: &review.Side{Type: manifest.File, Size: 12}},
		{Path: "run.sh", Status: review.ModeChanged},
		{Path: "docs", Status: review.Added, New: &review.Side{Type: manifest.Dir}},
	}}
	var out bytes.Buffer
	writeStat(&out, cs, 80)
	want := ` a.go    | 4 +++-
 bin.dat | Bin 0 -> 12 bytes
 run.sh  | 0
 3 files changed, 3 insertions(+), 1 deletion(-)
`
	if out.String() != want {
		t.Errorf("stat:\n%s\nwant\n%s", out.String(), want)
	}
	// Modes git cannot show are marked, directories included.
	cs = &review.Changeset{Files: []*review.File{
		{Path: "all.sh", Status: review.Added, Added: 1, New: &review.Side{Type: manifest.File, Mode: 0o777},
			Flags: []review.Flag{{Kind: review.FlagMode, Reason: "mode 0777 from the sandbox, applied as 0755"}}},
		{Path: "open", Status: review.ModeChanged, Old: &review.Side{Type: manifest.Dir, Mode: 0o755}, New: &review.Side{Type: manifest.Dir, Mode: 0o777},
			Flags: []review.Flag{{Kind: review.FlagMode, Reason: "directory mode change 0755 → 0777, not applied"}}},
	}}
	out.Reset()
	writeStat(&out, cs, 80)
	want = ` all.sh | 1 + [mode]
 open/  | dir [mode]
 1 file changed, 1 insertion(+)
 [mode]: the sandbox asked for a mode git cannot show, applied differently; airlock diff says how
`
	if out.String() != want {
		t.Errorf("stat:\n%s\nwant\n%s", out.String(), want)
	}
	// A large change is scaled to the width.
	cs = &review.Changeset{Files: []*review.File{{Path: "big", Status: review.Modified, Added: 1000, Removed: 1000}}}
	out.Reset()
	writeStat(&out, cs, 80)
	if line := strings.Split(out.String(), "\n")[0]; len(line) > 80 || !strings.Contains(line, "2000 +") {
		t.Errorf("scaled stat line %q", line)
	}
}

func TestWriteStatMarksHostExec(t *testing.T) {
	cs := &review.Changeset{Files: []*review.File{
		{Path: ".envrc", Status: review.Added, Added: 1, Flags: []review.Flag{{Kind: review.FlagHostExec, Reason: "runs on your machine: direnv runs it when you cd in"}}},
		{Path: "a.go", Status: review.Modified, Added: 3, Removed: 1},
	}}
	var out bytes.Buffer
	writeStat(&out, cs, 80)
	want := ` .envrc | 1 +  # runs on your machine: direnv runs it when you cd in
 a.go   | 4 +++-
 2 files changed, 4 insertions(+), 1 deletion(-)
 1 file runs on your machine (marked #): airlock apply --all leaves it out; name it, or add --include-host-exec
`
	if out.String() != want {
		t.Errorf("stat:\n%s\nwant\n%s", out.String(), want)
	}
	patch := "diff --git a/y b/y\nold mode 100644\nnew mode 100755\n# runs on your machine: make runs it\ndiff --git a/Makefile b/Makefile\n--- a/Makefile\n+++ b/Makefile\n@@ -1 +1 @@\n-a\n+b\n"
	out.Reset()
	writeShownPatch(&out, &review.Changeset{}, []byte(patch), true)
	if !strings.Contains(out.String(), ansiYellow+"# runs on your machine: make runs it") {
		t.Errorf("marker not highlighted:\n%q", out.String())
	}
}

// TestWriteStatFitsWidth: one deep path no longer makes every line as
// wide as itself: bars shrink, then names are shortened from the front
// as git does ("...", then the end from a slash), and no line but the
// marks after a bar is wider than the width.
func TestWriteStatFitsWidth(t *testing.T) {
	deep := strings.Repeat("very/", 78) + "deep.go" // 397 columns
	wide := strings.Repeat("目录/", 30) + "文件.go"     // 2 columns a character
	cases := []struct {
		name  string
		width int
		files []*review.File
		want  []string // whole lines expected, among others
	}{
		{"a 400-column path", 80, []*review.File{
			{Path: deep, Status: review.Modified, Added: 3, Removed: 2},
			{Path: "a.go", Status: review.Modified, Added: 1},
		}, []string{
			" .../very/very/very/very/very/very/very/very/very/very/very/deep.go   | 5 +++--",
			" a.go                                                                 | 1 +",
		}},
		{"a big change and a long path", 80, []*review.File{
			{Path: deep, Status: review.Modified, Added: 1000, Removed: 1000},
		}, nil},
		{"binary and type changes", 80, []*review.File{
			{Path: deep, Status: review.Added, Binary: true, New: &review.Side{Type: manifest.File, Size: 123456}},
			{Path: "lib", Status: review.TypeChanged, Old: &review.Side{Type: manifest.File}, New: &review.Side{Type: manifest.Dir}},
		}, []string{
			" .../very/very/very/very/very/very/very/very/deep.go    | Bin 0 -> 123456 bytes",
			" lib                                                    | file → directory",
		}},
		{"wide characters", 60, []*review.File{
			{Path: wide, Status: review.Modified, Added: 1},
		}, nil},
		{"a rename", 50, []*review.File{
			{Path: "new/" + deep, OldPath: deep, Status: review.Renamed},
		}, nil},
		{"narrow", 20, []*review.File{
			{Path: deep, Status: review.Modified, Added: 300},
			{Path: "x", Status: review.Modified, Added: 1},
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			writeStat(&out, &review.Changeset{Files: c.files}, c.width)
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			for _, l := range lines[:len(c.files)] {
				if w := runewidth.StringWidth(l); w >= c.width {
					t.Errorf("%d columns, width %d: %q", w, c.width, l)
				}
				if !strings.Contains(l, " | ") {
					t.Errorf("no separator: %q", l)
				}
			}
			for _, want := range c.want {
				if !slices.Contains(lines, want) {
					t.Errorf("no line %q in\n%s", want, out.String())
				}
			}
			if t.Failed() {
				t.Logf("\n%s", out.String())
			}
		})
	}
}

// TestWriteStatTypeChange: a type change is said in words, a file
// counted, no bar.
func TestWriteStatTypeChange(t *testing.T) {
	cs := &review.Changeset{Files: []*review.File{
		{Path: "d", Status: review.TypeChanged, Old: &review.Side{Type: manifest.Dir}, New: &review.Side{Type: manifest.File}},
		{Path: "d/x.txt", Status: review.Deleted, Removed: 1, Old: &review.Side{Type: manifest.File}},
		{Path: "lib", Status: review.TypeChanged, Old: &review.Side{Type: manifest.File}, New: &review.Side{Type: manifest.Dir}},
		{Path: "lib/mod.txt", Status: review.Added, Added: 1, New: &review.Side{Type: manifest.File}},
		{Path: "ln", Status: review.TypeChanged, Old: &review.Side{Type: manifest.File}, New: &review.Side{Type: manifest.Symlink}},
	}}
	var out bytes.Buffer
	writeStat(&out, cs, 80)
	want := ` d           | directory → file
 d/x.txt     | 1 -
 lib         | file → directory
 lib/mod.txt | 1 +
 ln          | file → symbolic link
 5 files changed, 1 insertion(+), 1 deletion(-)
`
	if out.String() != want {
		t.Errorf("stat:\n%s\nwant\n%s", out.String(), want)
	}
}

func TestTermWidthFromColumns(t *testing.T) {
	t.Setenv("COLUMNS", "132")
	if w := termWidth(&bytes.Buffer{}); w != 132 {
		t.Errorf("COLUMNS=132: %d", w)
	}
	t.Setenv("COLUMNS", "")
	if w := termWidth(&bytes.Buffer{}); w != 80 {
		t.Errorf("no terminal, no COLUMNS: %d", w)
	}
}

func TestReplyNote(t *testing.T) {
	if got := replyNote(review.Feedback{}); !strings.Contains(got, "no comments to send") {
		t.Errorf("empty: %q", got)
	}
	fb := review.Feedback{Comments: []review.FileComment{{Path: "a"}, {Path: "b"}}, Rejected: []review.Rejection{{Path: "a", Hunk: 0}}}
	if got, want := replyNote(fb), "sending your message with 2 comments and 1 rejected hunk from the review"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestWriteComments(t *testing.T) {
	var out bytes.Buffer
	writeComments(&out, nil)
	if out.Len() != 0 {
		t.Errorf("no comments: %q", out.String())
	}
	writeComments(&out, []review.FileComment{
		{Path: "main.go", Comment: review.Comment{Text: "keep the name\nplease", Start: 3, End: 4}},
		{Path: "main.go", Comment: review.Comment{Text: "why?", Sent: 2}},
		{Path: "old.txt", Comment: review.Comment{Text: "fine", Start: 1, End: 1, Old: true, Resolved: true}},
	})
	want := "comments  3 (1 not sent yet; airlock reply sends them)\n" +
		"          main.go, lines 3-4 (not sent yet): keep the name …\n" +
		"          main.go, the whole file (sent in round 2): why?\n" +
		"          old.txt, removed line 1 (resolved): fine\n"
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	writeComments(&out, []review.FileComment{{Path: "a", Comment: review.Comment{Text: "x", Sent: 2}}})
	if !strings.HasPrefix(out.String(), "comments  1 (all sent or resolved)\n") {
		t.Errorf("all sent: %q", out.String())
	}
}
