package review

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// Skip names a change left out of a patch, and why.
type Skip struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// PatchOptions tunes Patch; the zero value leaves binary files out.
type PatchOptions struct {
	// Binary includes binary (and too large) files as "GIT binary patch"
	// literals, as `git diff --binary` does. Off, they are left out with a
	// note, which keeps the patch readable.
	Binary bool
}

// Patch renders the changes of cs approved by d as a patch `git apply`
// accepts (paths prefixed a/ and b/, applied from the project root).
// New files, deletions, mode changes, renames and symbolic links (mode
// 120000) are included; partially approved files carry only their approved
// hunks. Directories are implied by their files. What is left out is
// listed in the returned skips and in comment lines before the first diff,
// which git apply ignores; so is what git cannot say about a mode
// (FlagMode), in a comment line before the file's diff.
func Patch(cs *Changeset, d Decisions, opts PatchOptions) ([]byte, []Skip) {
	var body bytes.Buffer
	var skips []Skip
	needs := map[string]string{}
	for _, n := range d.Needs(cs) {
		if _, ok := needs[n.Path]; !ok {
			needs[n.Path] = n.Error()
		}
	}
	emptied := emptiedByTypeChange(cs, d)
	for _, f := range patchOrder(cs.Files) {
		sel, touched := d.Selection(f)
		if !touched {
			continue
		}
		// A deletion that lets a type change through is written even for
		// a binary file: git needs only its hash to remove it.
		deletesBinary := f.Binary && !opts.Binary && (f.becomesDir() || (f.Status == Deleted && emptied[f.Path]))
		switch {
		case needs[f.Path] != "":
			skips = append(skips, Skip{f.Path, needs[f.Path]})
			continue
		case f.IsDir() && f.TypeChange() == "":
			skips = append(skips, Skip{f.Path, "directories are not part of git patches; their files are" + modeReasons(f)})
			continue
		case f.Status == ModeChanged && gitMode(f.Old.Type, f.Old.Mode) == gitMode(f.New.Type, f.New.Mode):
			skips = append(skips, Skip{f.Path, "its mode change is not one git can show" + modeReasons(f)})
			continue
		case f.Binary && !opts.Binary && f.Status != Renamed && f.Status != ModeChanged && !deletesBinary:
			reason := "binary file: apply it with airlock apply, or export with binary patches"
			if f.TooLarge {
				reason = "too large to diff as text: apply it with airlock apply, or export with binary patches"
			}
			skips = append(skips, Skip{f.Path, reason})
			continue
		}
		writeFlagNotes(&body, f)
		if tc := f.TypeChange(); tc != "" && f.IsDir() {
			fmt.Fprintf(&body, "# airlock: %s: %s\n", quotePath(f.Path), tc)
		}
		if deletesBinary {
			writeBinaryDeletion(&body, f.Path, f.Old, f.oldData)
			continue
		}
		writeFilePatch(&body, f, sel, d.Files[f.Path].approvesMode())
	}
	var out bytes.Buffer
	for _, s := range skips {
		fmt.Fprintf(&out, "# airlock: %s left out of this patch: %s\n", quotePath(s.Path), s.Reason)
	}
	out.Write(body.Bytes())
	return out.Bytes(), skips
}

// patchOrder is the order of files in a patch: by path, but a directory
// that becomes a file or link comes after every change that empties it
// (the deletions under it, the renames out of it). git apply checks a
// patch in order, and refuses a file over a directory that still holds
// something.
func patchOrder(files []*File) []*File {
	last := map[string]int{} // a directory that stops being one: its last emptying change
	for i, f := range files {
		if f.stopsBeingDir() {
			last[f.Path] = i
		}
	}
	if len(last) == 0 {
		return files
	}
	for i, f := range files {
		for _, p := range []string{f.Path, f.OldPath} {
			for dir := path.Dir(p); p != "" && dir != "."; dir = path.Dir(dir) {
				if _, ok := last[dir]; ok {
					last[dir] = max(last[dir], i)
				}
			}
		}
	}
	type placed struct {
		f        *File
		at       int
		deferred bool
	}
	order := make([]placed, len(files))
	for i, f := range files {
		order[i] = placed{f, i, false}
		if k, ok := last[f.Path]; ok && f.stopsBeingDir() {
			order[i] = placed{f, k, true}
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].at != order[j].at {
			return order[i].at < order[j].at
		}
		return !order[i].deferred && order[j].deferred
	})
	out := make([]*File, len(files))
	for i, p := range order {
		out[i] = p.f
	}
	return out
}

// emptiedByTypeChange is the set of deleted paths under a directory that d
// approves turning into a file or link.
func emptiedByTypeChange(cs *Changeset, d Decisions) map[string]bool {
	byPath := map[string]*File{}
	for _, f := range cs.Files {
		if f.stopsBeingDir() {
			byPath[f.Path] = f
		}
	}
	if len(byPath) == 0 {
		return nil
	}
	out := map[string]bool{}
	for _, f := range cs.Files {
		if f.Status != Deleted {
			continue
		}
		if a := typeChangedAbove(byPath, f.Path, (*File).stopsBeingDir); a != nil {
			if _, taken := d.Selection(a); taken {
				out[f.Path] = true
			}
		}
	}
	return out
}

// writeFlagNotes writes, before a file's diff, lines that git apply
// skips (it skips anything before a "diff --git" line) saying why the file
// deserves a second look: it runs on the user's machine, it asks for a
// mode git cannot show, or any flag of flags.go. (Control characters are
// said once above the whole diff by the CLI.) A reason is one line by
// construction; a line break is replaced all the same, as it would end
// the note and start a line git apply reads.
func writeFlagNotes(w *bytes.Buffer, f *File) {
	for _, fl := range f.Flags {
		reason := strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(fl.Reason)
		switch fl.Kind {
		case FlagControl:
		case FlagMode:
			fmt.Fprintf(w, "# airlock: %s: %s\n", quotePath(f.Path), reason)
		default:
			fmt.Fprintf(w, "# %s\n", reason)
		}
	}
}

func writeFilePatch(w *bytes.Buffer, f *File, sel []bool, approveMode bool) {
	switch {
	case f.Status == TypeChanged || (f.Old != nil && f.New != nil && f.Old.Type != f.New.Type):
		// The directory side of a type change is implied by the files
		// under it, as every directory in a git patch.
		if f.Old.Type != manifest.Dir {
			writeWhole(w, f.Path, f.Old, f.oldData, nil, nil, f.Binary && f.Old.Type == manifest.File)
		}
		if f.New.Type != manifest.Dir {
			writeWhole(w, f.Path, nil, nil, f.New, f.newData, f.Binary && f.New.Type == manifest.File)
		}
	case f.Old == nil:
		writeWhole(w, f.Path, nil, nil, f.New, f.newData, f.Binary)
	case f.New == nil:
		writeWhole(w, f.Path, f.Old, f.oldData, nil, nil, f.Binary)
	default:
		oldPath := f.Path
		if f.Status == Renamed {
			oldPath = f.OldPath
		}
		a, b := quotePath("a/"+oldPath), quotePath("b/"+f.Path)
		fmt.Fprintf(w, "diff --git %s %s\n", a, b)
		newMode := f.New.Mode
		if f.HunkSelectable() && !approveMode {
			newMode = f.Old.Mode
		}
		if om, nm := gitMode(f.Old.Type, f.Old.Mode), gitMode(f.New.Type, newMode); om != nm {
			fmt.Fprintf(w, "old mode %s\nnew mode %s\n", om, nm)
		}
		if f.Status == Renamed {
			fmt.Fprintf(w, "similarity index 100%%\nrename from %s\nrename to %s\n", quotePath(oldPath), quotePath(f.Path))
		}
		if f.Binary && f.Status == Modified {
			fmt.Fprintf(w, "index %s..%s\n", gitBlobID(f.oldData), gitBlobID(f.newData))
			writeBinaryLiteral(w, f.oldData, f.newData)
			return
		}
		var hunks []Hunk
		for i, h := range f.Hunks {
			if sel[i] {
				hunks = append(hunks, h)
			}
		}
		if len(hunks) > 0 {
			fmt.Fprintf(w, "--- %s\n+++ %s\n", a, b)
			delta := 0
			for _, h := range hunks {
				h.NewStart = h.oldOffset() + delta + 1
				if h.NewLines == 0 {
					h.NewStart--
				}
				delta += h.NewLines - h.OldLines
				writeHunk(w, h)
			}
		}
	}
}

// writeWhole writes the creation (old == nil) or deletion (new == nil) of a
// whole file or symlink.
func writeWhole(w *bytes.Buffer, path string, old *Side, oldData []byte, new *Side, newData []byte, binary bool) {
	a, b := quotePath("a/"+path), quotePath("b/"+path)
	fmt.Fprintf(w, "diff --git %s %s\n", a, b)
	var hunks []Hunk
	if old == nil {
		fmt.Fprintf(w, "new file mode %s\n", gitMode(new.Type, new.Mode))
		hunks = buildHunks(nil, splitLines(newData), 0)
		a = "/dev/null"
	} else {
		fmt.Fprintf(w, "deleted file mode %s\n", gitMode(old.Type, old.Mode))
		hunks = buildHunks(splitLines(oldData), nil, 0)
		b = "/dev/null"
	}
	if binary {
		oldID, newID := zeroBlobID, zeroBlobID
		if old != nil {
			oldID = gitBlobID(oldData)
		} else {
			newID = gitBlobID(newData)
		}
		fmt.Fprintf(w, "index %s..%s\n", oldID, newID)
		writeBinaryLiteral(w, oldData, newData)
		return
	}
	if len(hunks) == 0 {
		return
	}
	fmt.Fprintf(w, "--- %s\n+++ %s\n", a, b)
	for _, h := range hunks {
		writeHunk(w, h)
	}
}

// writeBinaryDeletion writes the deletion of a binary file without its
// content: git apply removes it once its hash matches the full index line.
func writeBinaryDeletion(w *bytes.Buffer, p string, old *Side, oldData []byte) {
	a, b := quotePath("a/"+p), quotePath("b/"+p)
	fmt.Fprintf(w, "diff --git %s %s\ndeleted file mode %s\nindex %s..%s\n", a, b, gitMode(old.Type, old.Mode), gitBlobID(oldData), zeroBlobID)
	fmt.Fprintf(w, "Binary files %s and /dev/null differ\n", a)
}

func writeHunk(w *bytes.Buffer, h Hunk) {
	fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(h.OldStart, h.OldLines), hunkRange(h.NewStart, h.NewLines))
	for _, l := range h.Lines {
		w.WriteString(string(l.Kind))
		w.WriteString(l.Text)
		w.WriteByte('\n')
		if l.NoEOL {
			w.WriteString("\\ No newline at end of file\n")
		}
	}
}

func hunkRange(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}

// gitMode is the mode git records: 120000 for a link, 100755 when the
// owner may execute, else 100644 (git keeps no other permission bits).
func gitMode(t manifest.Type, m fs.FileMode) string {
	switch {
	case t == manifest.Symlink:
		return "120000"
	case m&0o100 != 0:
		return "100755"
	}
	return "100644"
}

// quotePath quotes p the way git does when it holds a double quote, a
// backslash, a control character or a non-ASCII byte.
func quotePath(p string) string {
	needs := false
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			needs = true
			break
		}
	}
	if !needs {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\v':
			b.WriteString(`\v`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// modeReasons is "; " and each FlagMode reason of f, or "".
func modeReasons(f *File) string {
	var out string
	for _, fl := range f.Flags {
		if fl.Kind == FlagMode {
			out += "; " + fl.Reason
		}
	}
	return out
}
