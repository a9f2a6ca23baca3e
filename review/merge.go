package review

import (
	"bytes"
	"fmt"
	"sort"
)

// MergeChunk is one stretch of a three-way merge: either settled (Conflict
// false, Content holds the merged lines) or a conflict carrying the three
// versions of the stretch so a GUI can show them side by side.
type MergeChunk struct {
	Conflict bool `json:"conflict,omitempty"`
	// Content is the merged text of a settled chunk.
	Content []byte `json:"content,omitempty"`
	// Base, Ours and Theirs are the stretch in each version (conflicts
	// only). BaseStart, OursStart and TheirsStart are 1-based line numbers
	// where each begins.
	Base        []byte `json:"base,omitempty"`
	Ours        []byte `json:"ours,omitempty"`
	Theirs      []byte `json:"theirs,omitempty"`
	BaseStart   int    `json:"base_start,omitempty"`
	OursStart   int    `json:"ours_start,omitempty"`
	TheirsStart int    `json:"theirs_start,omitempty"`
}

// MergeResult is a whole three-way merge, chunk by chunk in file order.
type MergeResult struct {
	Chunks []MergeChunk `json:"chunks"`
}

// Conflicts counts the conflicting chunks.
func (r *MergeResult) Conflicts() int {
	n := 0
	for _, c := range r.Chunks {
		if c.Conflict {
			n++
		}
	}
	return n
}

// Clean reports whether the merge has no conflict.
func (r *MergeResult) Clean() bool { return r.Conflicts() == 0 }

// Content returns the merged bytes, or false when there is a conflict.
func (r *MergeResult) Content() ([]byte, bool) {
	if !r.Clean() {
		return nil, false
	}
	var b bytes.Buffer
	for _, c := range r.Chunks {
		b.Write(c.Content)
	}
	return b.Bytes(), true
}

// MarkerLabels names the sides in conflict markers; empty labels are
// rendered as "ours", "base" and "theirs".
type MarkerLabels struct {
	Ours, Base, Theirs string
}

// WithMarkers renders the merge with git-style diff3 conflict markers
// (<<<<<<<, |||||||, =======, >>>>>>>) around each conflict.
func (r *MergeResult) WithMarkers(l MarkerLabels) []byte {
	label := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	var b bytes.Buffer
	side := func(marker, name string, data []byte) {
		fmt.Fprintf(&b, "%s %s\n", marker, name)
		b.Write(data)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	for _, c := range r.Chunks {
		if !c.Conflict {
			b.Write(c.Content)
			continue
		}
		if b.Len() > 0 && b.Bytes()[b.Len()-1] != '\n' {
			b.WriteByte('\n')
		}
		side("<<<<<<<", label(l.Ours, "ours"), c.Ours)
		side("|||||||", label(l.Base, "base"), c.Base)
		b.WriteString("=======\n")
		b.Write(c.Theirs)
		if len(c.Theirs) > 0 && c.Theirs[len(c.Theirs)-1] != '\n' {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, ">>>>>>> %s\n", label(l.Theirs, "theirs"))
	}
	return b.Bytes()
}

// edit3 is a change of one side against the base, in line indices.
type edit3 struct {
	side       int // 0 ours, 1 theirs
	start, end int // base range replaced
	rs, re     int // range of the side's lines that replace it
}

// Merge3 merges two descendants of base line by line, as diff3 does:
// changes made on only one side are taken; changes both sides made alike
// are taken once; changes that overlap or touch and differ are conflicts.
// Settled text is reproduced byte for byte, missing final newlines
// included.
func Merge3(base, ours, theirs []byte) *MergeResult {
	b, o, t := splitLines(base), splitLines(ours), splitLines(theirs)
	var edits []edit3
	for _, d := range lineDiff(b, o) {
		edits = append(edits, edit3{0, d.Start, d.End, d.ReplStart, d.ReplEnd})
	}
	for _, d := range lineDiff(b, t) {
		edits = append(edits, edit3{1, d.Start, d.End, d.ReplStart, d.ReplEnd})
	}
	sort.SliceStable(edits, func(i, j int) bool { return edits[i].start < edits[j].start })
	sides := [2][]string{o, t}
	// delta[s] maps a base index outside side s's edits to that side's index.
	var delta [2]int
	res := &MergeResult{}
	addClean := func(lines []string) {
		if len(lines) == 0 {
			return
		}
		data := joinLines(lines)
		if n := len(res.Chunks); n > 0 && !res.Chunks[n-1].Conflict {
			res.Chunks[n-1].Content = append(res.Chunks[n-1].Content, data...)
			return
		}
		res.Chunks = append(res.Chunks, MergeChunk{Content: data})
	}
	pos := 0
	for i := 0; i < len(edits); {
		start, end := edits[i].start, edits[i].end
		var has [2]bool
		var grow [2]int
		j := i
		for ; j < len(edits) && edits[j].start <= end && (j == i || edits[j].start < end || touches(edits[i:j], edits[j])); j++ {
			e := edits[j]
			end = max(end, e.end)
			has[e.side] = true
			grow[e.side] += (e.re - e.rs) - (e.end - e.start)
		}
		addClean(b[pos:start])
		var text [2][]string
		var from [2]int
		for s := range 2 {
			from[s] = start + delta[s]
			text[s] = sides[s][from[s] : end+delta[s]+grow[s]]
		}
		switch {
		case !has[1]:
			addClean(text[0])
		case !has[0]:
			addClean(text[1])
		case equalLines(text[0], text[1]):
			addClean(text[0])
		default:
			res.Chunks = append(res.Chunks, MergeChunk{
				Conflict:    true,
				Base:        joinLines(b[start:end]),
				Ours:        joinLines(text[0]),
				Theirs:      joinLines(text[1]),
				BaseStart:   start + 1,
				OursStart:   from[0] + 1,
				TheirsStart: from[1] + 1,
			})
		}
		delta[0] += grow[0]
		delta[1] += grow[1]
		pos = end
		i = j
	}
	addClean(b[pos:])
	return res
}

// touches reports whether e, which starts exactly where the group ends,
// belongs to the group: edits of different sides that touch are merged
// into one chunk (and conflict unless equal), as git does; an edit of the
// same side never touches its neighbour.
func touches(group []edit3, e edit3) bool {
	for _, g := range group {
		if g.side != e.side {
			return true
		}
	}
	return false
}

func equalLines(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
