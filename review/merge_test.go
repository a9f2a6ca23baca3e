package review

import (
	"strings"
	"testing"
)

func TestMerge3(t *testing.T) {
	base := "a\nb\nc\nd\ne\nf\ng\n"
	cases := []struct {
		name, ours, theirs string
		want               string // merged content when clean
		conflicts          int
	}{
		{"theirs only", base, "a\nB\nc\nd\ne\nf\ng\n", "a\nB\nc\nd\ne\nf\ng\n", 0},
		{"ours only", "a\nb\nc\nd\ne\nf\nG\n", base, "a\nb\nc\nd\ne\nf\nG\n", 0},
		{"disjoint", "A\nb\nc\nd\ne\nf\ng\n", "a\nb\nc\nd\ne\nf\nG\n", "A\nb\nc\nd\ne\nf\nG\n", 0},
		{"same edit", "a\nX\nc\nd\ne\nf\ng\n", "a\nX\nc\nd\ne\nf\ng\n", "a\nX\nc\nd\ne\nf\ng\n", 0},
		{"overlap", "a\nX\nc\nd\ne\nf\ng\n", "a\nY\nc\nd\ne\nf\ng\n", "", 1},
		{"adjacent", "a\nX\nc\nd\ne\nf\ng\n", "a\nb\nY\nd\ne\nf\ng\n", "", 1},
		{"insert same point", "a\nb\nc\nX\nd\ne\nf\ng\n", "a\nb\nc\nY\nd\ne\nf\ng\n", "", 1},
		{"delete vs edit", "a\nc\nd\ne\nf\ng\n", "a\nB\nc\nd\ne\nf\ng\n", "", 1},
		{"both delete", "a\nc\nd\ne\nf\ng\n", "a\nc\nd\ne\nf\ng\n", "a\nc\nd\ne\nf\ng\n", 0},
		{"eol ours", "a\nb\nc\nd\ne\nf\ng", "A\nb\nc\nd\ne\nf\ng\n", "A\nb\nc\nd\ne\nf\ng", 0},
		{"insert start and end", "0\n" + base, base + "h\n", "0\n" + base + "h\n", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := Merge3([]byte(base), []byte(tc.ours), []byte(tc.theirs))
			if got := m.Conflicts(); got != tc.conflicts {
				t.Fatalf("conflicts = %d, want %d: %+v", got, tc.conflicts, m.Chunks)
			}
			got, ok := m.Content()
			if ok != (tc.conflicts == 0) {
				t.Fatalf("Content ok = %v", ok)
			}
			if ok && string(got) != tc.want {
				t.Errorf("merged %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMerge3ConflictSides(t *testing.T) {
	m := Merge3([]byte("1\n2\n3\n4\n5\n6\n7\n8\n"), []byte("1\n2\nours\n4\n5\n6\n7\n8\n"), []byte("1\n2\ntheirs\n4\n5\n6\n7\nEIGHT\n"))
	if m.Conflicts() != 1 {
		t.Fatalf("conflicts = %d", m.Conflicts())
	}
	var c MergeChunk
	for _, ch := range m.Chunks {
		if ch.Conflict {
			c = ch
		}
	}
	if string(c.Base) != "3\n" || string(c.Ours) != "ours\n" || string(c.Theirs) != "theirs\n" || c.BaseStart != 3 || c.OursStart != 3 || c.TheirsStart != 3 {
		t.Errorf("conflict chunk = %+v", c)
	}
	want := "1\n2\n<<<<<<< mine\nours\n||||||| base\n3\n=======\ntheirs\n>>>>>>> agent\n4\n5\n6\n7\nEIGHT\n"
	if got := string(m.WithMarkers(MarkerLabels{Ours: "mine", Theirs: "agent"})); got != want {
		t.Errorf("markers:\n%s\nwant:\n%s", got, want)
	}
}

func TestMerge3MarkersNoEOL(t *testing.T) {
	m := Merge3([]byte("a"), []byte("b"), []byte("c"))
	got := string(m.WithMarkers(MarkerLabels{}))
	want := "<<<<<<< ours\nb\n||||||| base\na\n=======\nc\n>>>>>>> theirs\n"
	if got != want {
		t.Errorf("got %q want %q", got, want)
	}
	if !strings.Contains(got, "=======") {
		t.Error("no separator")
	}
}
