package gui

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/bytesize"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// reviewModel is the review window's state, without fyne: the changeset,
// the decisions (verdicts and comments, exactly what Apply is given), the
// filter over paths and the cursor of the keyboard (a file, and a hunk in
// it, or a staged action).
type reviewModel struct {
	cs *review.Changeset
	d  review.Decisions
	// filter is the text the shown paths contain ("" shows every file);
	// tree is the shown files as folders.
	filter string
	// flagged shows only the files that carry a flag (a second look).
	flagged bool
	tree    tree
	// files are the shown files in the order the tree shows them
	// (folders first), the order the keyboard walks.
	files []*review.File
	file  int // index in files, -1 when there are none
	hunk  int // index in the file's hunks
	// action is the staged action under the cursor, shown in the diff's
	// place; 0 when the cursor is on a file.
	action int
	// hidden is the cursor's file (and hunk) while the filter shows no
	// file at all.
	hidden     *review.File
	hiddenHunk int
	// actions are the sandbox's staged actions as last read (their
	// verdicts are d.Actions); none in a round's read-only view.
	actions []sandbox.ActionView
}

func newReviewModel(cs *review.Changeset) *reviewModel {
	m := &reviewModel{cs: cs, d: review.Decisions{Files: map[string]review.FileDecision{}}, file: -1}
	m.setFilter("")
	return m
}

// setFilter shows only the files whose path contains q (ignoring case;
// "" shows all). The cursor stays on its file while that is shown, else
// it goes to the first shown file.
func (m *reviewModel) setFilter(q string) {
	q = strings.TrimSpace(q)
	cur, hunk := m.current(), m.hunk
	if cur == nil {
		cur, hunk = m.hidden, m.hiddenHunk
	}
	m.filter = q
	var shown []*review.File
	low := strings.ToLower(q)
	for _, f := range m.cs.Files {
		if m.flagged && len(f.Flags) == 0 {
			continue
		}
		if low == "" || strings.Contains(strings.ToLower(f.Path), low) || (f.OldPath != "" && strings.Contains(strings.ToLower(f.OldPath), low)) {
			shown = append(shown, f)
		}
	}
	m.tree = treeOf(shown)
	m.files = m.files[:0]
	var walk func(id string)
	walk = func(id string) {
		for _, c := range m.tree.children[id] {
			if isFolder(c) {
				walk(c)
			} else if f := m.cs.File(c); f != nil {
				m.files = append(m.files, f)
			}
		}
	}
	walk("")
	m.file, m.hunk = -1, 0
	if len(m.files) > 0 {
		m.file = 0
	}
	m.hidden = nil
	if i := slices.Index(m.files, cur); cur != nil && i >= 0 {
		m.file, m.hunk = i, hunk
	} else if len(m.files) == 0 {
		// Nothing shown: the cursor comes back to its file when the
		// filter shows it again.
		m.hidden, m.hiddenHunk = cur, hunk
	}
}

// setFlagged shows only the flagged files (with the filter's text), or
// with false every file the filter's text shows.
func (m *reviewModel) setFlagged(on bool) {
	m.flagged = on
	m.setFilter(m.filter)
}

// filtered says the list shows fewer than every file: by a filter's text
// or to the flagged ones.
func (m *reviewModel) filtered() bool { return m.filter != "" || m.flagged }

// under is the shown files in folder (a tree ID ending in "/"; "" for
// every shown file).
func (m *reviewModel) under(folder string) []*review.File {
	var out []*review.File
	for _, f := range m.files {
		if strings.HasPrefix(f.Path, folder) {
			out = append(out, f)
		}
	}
	return out
}

// setFiles approves or rejects each of fs whole.
func (m *reviewModel) setFiles(fs []*review.File, approve bool) {
	for _, f := range fs {
		m.setFile(f, approve)
	}
}

// filesState is the state of files together: all the same state, or
// partly approved when they differ (undecided when there are none).
func (m *reviewModel) filesState(fs []*review.File) fileState {
	if len(fs) == 0 {
		return stateUndecided
	}
	s := m.fileState(fs[0])
	for _, f := range fs[1:] {
		if m.fileState(f) != s {
			return statePartial
		}
	}
	return s
}

// lineCounts adds up the lines fs add and remove.
func lineCounts(fs []*review.File) (added, removed int) {
	for _, f := range fs {
		added += f.Added
		removed += f.Removed
	}
	return added, removed
}

// summary is the changeset in one line: how many files are decided
// (what a reviewer watches, so first), the changes by kind and lines,
// and how many the filter shows ("3 approved · 1 rejected · 198
// undecided   200 M · 1 A · 1 D   +1234 −56").
func (m *reviewModel) summary() string {
	counts := map[string]int{}
	for _, f := range m.cs.Files {
		counts[statusLetter(f)]++
	}
	var kinds []string
	for _, l := range []string{"M", "A", "D", "R", "X", "T", "B"} {
		if n := counts[l]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d %s", n, l))
		}
	}
	add, del := lineCounts(m.cs.Files)
	var approved, partly, rejected int
	for _, f := range m.cs.Files {
		switch m.fileState(f) {
		case stateApproved:
			approved++
		case statePartial:
			partly++
		case stateRejected:
			rejected++
		}
	}
	var states []string
	if approved > 0 {
		states = append(states, fmt.Sprintf("%d approved", approved))
	}
	if partly > 0 {
		states = append(states, fmt.Sprintf("%d partly", partly))
	}
	if rejected > 0 {
		states = append(states, fmt.Sprintf("%d rejected", rejected))
	}
	if left := len(m.cs.Files) - approved - partly - rejected; left > 0 {
		states = append(states, fmt.Sprintf("%d undecided", left))
	}
	s := fmt.Sprintf("%s   %s   +%d −%d", strings.Join(states, " · "), strings.Join(kinds, " · "), add, del)
	if a := m.actionsSummary(); a != "" {
		s += "   " + a
	}
	if m.filtered() {
		s += fmt.Sprintf("   (%d shown)", len(m.files))
	}
	return s
}

// current is the file under the cursor, or nil.
func (m *reviewModel) current() *review.File {
	if m.file < 0 || m.file >= len(m.files) {
		return nil
	}
	return m.files[m.file]
}

// selectPath moves the cursor to a file, at its first hunk.
func (m *reviewModel) selectPath(p string) bool {
	for i, f := range m.files {
		if f.Path == p {
			m.file, m.hunk = i, 0
			return true
		}
	}
	return false
}

// moveFile moves the cursor by delta files, staying in range.
func (m *reviewModel) moveFile(delta int) {
	if len(m.files) == 0 {
		return
	}
	m.file = min(max(m.file+delta, 0), len(m.files)-1)
	m.hunk = 0
	if delta < 0 {
		// Going back lands on the previous file's last hunk, as a reader
		// walking backwards expects.
		m.hunk = max(len(m.files[m.file].Hunks)-1, 0)
	}
}

// moveHunk moves the cursor by one hunk, across files at either end.
func (m *reviewModel) moveHunk(delta int) {
	f := m.current()
	if f == nil {
		return
	}
	next := m.hunk + delta
	switch {
	case next >= 0 && next < len(f.Hunks):
		m.hunk = next
	case delta > 0 && m.file < len(m.files)-1:
		m.moveFile(1)
	case delta < 0 && m.file > 0:
		m.moveFile(-1)
	}
}

// taken reports whether hunk i of f would be applied.
func (m *reviewModel) taken(f *review.File, i int) bool {
	sel, _ := m.d.Selection(f)
	return i < len(sel) && sel[i]
}

// setHunk approves or rejects hunk i of f. A file whose hunks cannot be
// chosen one by one takes the verdict as a whole.
func (m *reviewModel) setHunk(f *review.File, i int, approve bool) {
	v := verdict(approve)
	if !f.HunkSelectable() {
		m.d.SetFile(f.Path, v)
		return
	}
	m.d.SetHunk(f.Path, i, v)
}

// setFile approves or rejects a whole file: its hunks follow.
func (m *reviewModel) setFile(f *review.File, approve bool) {
	fd := m.d.Files[f.Path]
	fd.Verdict = verdict(approve)
	for i, h := range fd.Hunks {
		h.Verdict = review.Undecided // the file's verdict decides again
		fd.Hunks[i] = h
	}
	m.d.Files[f.Path] = fd
}

// setAll approves or rejects every file.
func (m *reviewModel) setAll(approve bool) {
	for _, f := range m.cs.Files {
		m.setFile(f, approve)
	}
}

func verdict(approve bool) review.Verdict {
	if approve {
		return review.Approve
	}
	return review.Reject
}

// fileState is how much of a file the decisions take.
type fileState int

const (
	stateUndecided fileState = iota
	stateApproved
	statePartial
	stateRejected
)

func (s fileState) String() string {
	return [...]string{"undecided", "approved", "partly approved", "rejected"}[s]
}

func (m *reviewModel) fileState(f *review.File) fileState {
	sel, touched := m.d.Selection(f)
	fd := m.d.Files[f.Path]
	if !touched {
		if fd.Verdict == review.Reject || slices.ContainsFunc(hunkDecisions(fd), func(h review.HunkDecision) bool { return h.Verdict == review.Reject }) {
			return stateRejected
		}
		return stateUndecided
	}
	if slices.Contains(sel, false) {
		return statePartial
	}
	return stateApproved
}

func hunkDecisions(fd review.FileDecision) []review.HunkDecision {
	out := make([]review.HunkDecision, 0, len(fd.Hunks))
	for _, h := range fd.Hunks {
		out = append(out, h)
	}
	return out
}

// approved lists the files the decisions touch, and the rest.
func (m *reviewModel) approved() (taken, left []*review.File) {
	for _, f := range m.cs.Files {
		if _, touched := m.d.Selection(f); touched {
			taken = append(taken, f)
		} else {
			left = append(left, f)
		}
	}
	return taken, left
}

// decisions is a copy of the decisions for Apply: only files with a
// verdict or a comment, so what is passed is exactly what was chosen.
func (m *reviewModel) decisions() review.Decisions {
	out := review.Decisions{Files: map[string]review.FileDecision{}, Round: m.d.Round}
	// The verdicts on actions go with the files' (saving one without the
	// other would take them back).
	for id, v := range m.d.Actions {
		if v != review.Undecided {
			if out.Actions == nil {
				out.Actions = map[int]review.Verdict{}
			}
			out.Actions[id] = v
		}
	}
	for p, fd := range m.d.Files {
		hs := map[int]review.HunkDecision{}
		for i, h := range fd.Hunks {
			if h != (review.HunkDecision{}) {
				hs[i] = h
			}
		}
		fd.Hunks = hs
		if len(hs) == 0 {
			fd.Hunks = nil
		}
		if fd.Verdict == review.Undecided && fd.Comment == "" && fd.Hunks == nil && len(fd.Comments) == 0 {
			continue
		}
		out.Files[p] = fd
	}
	return out
}

// tree is the changeset as a folder tree for widget.Tree: IDs are paths,
// folders end in "/", the root is "".
type tree struct {
	children map[string][]string
}

func newTree(cs *review.Changeset) tree { return treeOf(cs.Files) }

// treeOf is files as a folder tree.
func treeOf(files []*review.File) tree {
	t := tree{children: map[string][]string{}}
	seen := map[string]bool{}
	for _, f := range files {
		parent := ""
		dir := path.Dir(f.Path)
		if dir != "." {
			parts := strings.Split(dir, "/")
			for i := range parts {
				id := strings.Join(parts[:i+1], "/") + "/"
				if !seen[id] {
					seen[id] = true
					t.children[parent] = append(t.children[parent], id)
				}
				parent = id
			}
		}
		t.children[parent] = append(t.children[parent], f.Path)
	}
	// Folders first, then files, each by name.
	for k, ids := range t.children {
		slices.SortStableFunc(ids, func(a, b string) int {
			if isFolder(a) != isFolder(b) {
				if isFolder(a) {
					return -1
				}
				return 1
			}
			return strings.Compare(a, b)
		})
		t.children[k] = ids
	}
	return t
}

func isFolder(id string) bool { return strings.HasSuffix(id, "/") }

// statusLetter is the one-letter mark of a change, as git shows it.
func statusLetter(f *review.File) string {
	switch {
	case f.Binary && f.Status == review.Modified:
		return "B"
	case f.Status == review.Added:
		return "A"
	case f.Status == review.Deleted:
		return "D"
	case f.Status == review.Renamed:
		return "R"
	case f.Status == review.ModeChanged:
		return "X"
	case f.Status == review.TypeChanged:
		return "T"
	}
	return "M"
}

// describeFile is the plain account of a change shown above its diff:
// renames, modes, binary content, links.
func describeFile(f *review.File) []string {
	var out []string
	for _, fl := range f.Flags {
		out = append(out, flagText(fl))
	}
	switch f.Status {
	case review.Added:
		out = append(out, "New file")
	case review.Deleted:
		out = append(out, "Deleted")
	case review.Renamed:
		out = append(out, fmt.Sprintf("Renamed from %s", safetext.Line(f.OldPath)))
	case review.TypeChanged:
		out = append(out, typeChangeText(f))
	}
	if f.Old != nil && f.New != nil && f.Old.Type == f.New.Type && f.Old.Mode != f.New.Mode {
		out = append(out, fmt.Sprintf("Mode changed from %04o to %04o", f.Old.Mode, f.New.Mode))
	}
	for _, fl := range f.Flags {
		if fl.Kind == review.FlagMode {
			out = append(out, "Mode: "+fl.Reason)
		}
	}
	if f.IsSymlink() && f.New != nil {
		out = append(out, "Symbolic link to "+safetext.Line(f.New.Target))
	}
	if f.Binary {
		what := "Binary file"
		if f.TooLarge {
			what = "Too large to show line by line"
		}
		out = append(out, fmt.Sprintf("%s: %s before, %s after (not shown)", what, sideSize(f.Old), sideSize(f.New)))
	}
	if len(f.Hunks) > 0 {
		out = append(out, fmt.Sprintf("+%d −%d in %d %s", f.Added, f.Removed, len(f.Hunks), plural(len(f.Hunks), "hunk", "hunks")))
	}
	return out
}

// typeChangeText says what a type change does, and, when a directory is
// involved, which other changes go with it.
func typeChangeText(f *review.File) string {
	s := fmt.Sprintf("Changed from a %s to a %s", review.TypeWord(f.Old.Type), review.TypeWord(f.New.Type))
	switch {
	case f.New.Type == manifest.Dir:
		s += fmt.Sprintf(": the %s is removed, then what is under the directory is made; approve this change with those under it", review.TypeWord(f.Old.Type))
	case f.Old.Type == manifest.Dir:
		s += fmt.Sprintf(": everything under the directory is removed first, then the %s is made; approve this change with those under it", review.TypeWord(f.New.Type))
	}
	return s
}

// controlHint says, under a file flagged review.FlagControl, what the
// escapes in its lines are.
const controlHint = `: shown as \xNN and <U+XXXX>, so what you see is what would be applied`

// flagText is a flag as the file's header shows it.
func flagText(fl review.Flag) string {
	s := "⚠ " + fl.Reason
	if fl.Kind == review.FlagControl {
		s += controlHint
	}
	return s
}

func sideSize(s *review.Side) string {
	if s == nil {
		return "nothing"
	}
	return bytesize.Format(s.Size)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
