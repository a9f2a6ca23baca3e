package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/internal/filelock"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// ErrNotReady means a sandbox has no changeset yet (its run is going or
// failed before collecting).
var ErrNotReady = errors.New("sandbox has no changes to review yet")

// Changes returns the manifest changes of the sandbox: its baseline
// against the guest's manifest after the run, .airlock/ left out. It needs
// no VM.
func (sb *Sandbox) Changes() ([]manifest.Change, error) {
	base, err := sb.ReadManifest(BaselineFile, true)
	if err != nil {
		return nil, err
	}
	gm, err := sb.ReadManifest(GuestFile, false)
	if err != nil {
		return nil, err
	}
	return manifest.Diff(WithoutMeta(base), WithoutMeta(gm)), nil
}

// ReadManifest reads a stored manifest (BaselineFile, GuestFile, a
// round's). The guest's is decoded as the
// untrusted input it is, every time.
func (sb *Sandbox) ReadManifest(name string, trusted bool) (*manifest.Manifest, error) {
	f, err := os.Open(sb.Path(name))
	if errors.Is(err, fs.ErrNotExist) {
		m, merr := sb.Meta()
		if merr == nil {
			return nil, fmt.Errorf("sandbox %s (%s): %w", sb.ID, m.Status, ErrNotReady)
		}
		return nil, fmt.Errorf("sandbox %s: %w", sb.ID, ErrNotReady)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	defer f.Close()
	if trusted {
		var m manifest.Manifest
		if err := json.NewDecoder(f).Decode(&m); err != nil {
			return nil, fmt.Errorf("read %s of %s: %w", name, sb.ID, err)
		}
		return &m, nil
	}
	m, err := manifest.Decode(f, manifest.Limits{})
	if err != nil {
		return nil, fmt.Errorf("read %s of %s: %w", name, sb.ID, err)
	}
	return m, nil
}

// Changeset builds the sandbox's review.Changeset from the stored
// manifests and the content store.
func (sb *Sandbox) Changeset(ctx context.Context) (*review.Changeset, error) {
	changes, err := sb.Changes()
	if err != nil {
		return nil, err
	}
	return sb.ChangesetOf(ctx, changes)
}

// ChangesetOf builds a review.Changeset of changes (of this sandbox's tree
// against its baseline) from the content store. Files that run on the
// user's machine are flagged from the built-in list and the store's
// HostExec patterns.
func (sb *Sandbox) ChangesetOf(ctx context.Context, changes []manifest.Change) (*review.Changeset, error) {
	var opts review.Options
	if sb.store.HostExec != nil {
		pats, err := sb.store.HostExec()
		if err != nil {
			return nil, fmt.Errorf("changeset of %s: the patterns of files that run on your machine: %w", sb.ID, err)
		}
		opts.HostExec = pats
	}
	cs, err := review.New(ctx, changes, func(sum string) ([]byte, error) {
		return ReadObject(sb.store.objects, sum)
	}, opts)
	if err != nil {
		return nil, fmt.Errorf("changeset of %s: %w", sb.ID, err)
	}
	return cs, nil
}

// Transcript returns what the command printed (stdout and stderr, as
// they came), or nothing if it never ran.
func (sb *Sandbox) Transcript() ([]byte, error) {
	data, err := os.ReadFile(sb.Path(TranscriptFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// Summary returns the agent's .airlock/summary.md, or "" if it wrote none.
func (sb *Sandbox) Summary() (string, error) {
	data, err := os.ReadFile(sb.Path(SummaryFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return string(data), err
}

// FinalMessage returns the agent's final message, read from its output
// (an agent preset's JSON), or "" if there is none.
func (sb *Sandbox) FinalMessage() (string, error) {
	data, err := os.ReadFile(sb.Path(FinalFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return string(data), err
}

// StatsOf counts cs by kind and lines, and says what it means in one
// line (reading each code file with its parser, once).
func StatsOf(cs *review.Changeset) ChangeStats {
	var st ChangeStats
	for _, f := range cs.Files {
		st.Files++
		switch f.Status {
		case review.Added:
			st.Added++
		case review.Modified:
			st.Modified++
		case review.Deleted:
			st.Deleted++
		case review.Renamed:
			st.Renamed++
		case review.ModeChanged:
			st.ModeChanged++
		case review.TypeChanged:
			st.TypeChanged++
		}
	}
	st.LinesAdded, st.LinesRemoved = cs.Stats()
	if cs.Summarize(context.Background()) == nil {
		st.Overview = cs.Overview()
	}
	return st
}

// Selection names what to approve: whole files, and hunks of files
// (numbered from 1 in the order the diff shows them).
//
// A file that runs on the user's machine (review.FlagHostExec) is taken
// when it is named (its path, or hunks of it); All and a directory leave
// it out (see LeftOut) unless IncludeHostExec is set.
type Selection struct {
	All   bool
	Paths []string
	Hunks map[string][]int
	// IncludeHostExec lets All and directories take files that run on
	// the user's machine too.
	IncludeHostExec bool
}

// LeftOut returns the files that run on the user's machine which All or
// a directory of sel reaches but Decisions leaves out, because they are
// not named and IncludeHostExec is not set.
func (sel Selection) LeftOut(cs *review.Changeset) []*review.File {
	if sel.IncludeHostExec {
		return nil
	}
	named := map[string]bool{}
	for _, p := range sel.Paths {
		named[cleanArg(p)] = true
	}
	for p := range sel.Hunks {
		named[cleanArg(p)] = true
	}
	var out []*review.File
	for _, f := range cs.Files {
		if !f.HasFlag(review.FlagHostExec) || named[f.Path] {
			continue
		}
		if sel.All || slices.ContainsFunc(sel.Paths, func(p string) bool { return strings.HasPrefix(f.Path, cleanArg(p)+"/") }) {
			out = append(out, f)
		}
	}
	return out
}

// Flagged is a file with the reason it was flagged, for the audit log.
type Flagged struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// ParseHunks parses "PATH:1,3" (hunks 1 and 3 of PATH) into sel.Hunks.
func (sel *Selection) ParseHunks(spec string) error {
	i := strings.LastIndexByte(spec, ':')
	if i <= 0 || i == len(spec)-1 {
		return fmt.Errorf("--hunks %q: want PATH:N[,N…], hunks numbered from 1 as airlock diff shows them", spec)
	}
	p, list := spec[:i], spec[i+1:]
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("--hunks %q: %q is not a hunk number (they start at 1)", spec, s)
		}
		if sel.Hunks == nil {
			sel.Hunks = map[string][]int{}
		}
		sel.Hunks[p] = append(sel.Hunks[p], n)
	}
	return nil
}

// Decisions turns a selection into review.Decisions for cs, reporting
// every path or hunk that cs does not have. Files that run on the user's
// machine are taken by All or a directory only with IncludeHostExec
// (LeftOut lists the others); a file named is always taken.
func (sel Selection) Decisions(cs *review.Changeset) (review.Decisions, error) {
	hostExecOut := !sel.IncludeHostExec
	if sel.All {
		d := review.ApproveAll(cs)
		for _, f := range cs.Files {
			if hostExecOut && f.HasFlag(review.FlagHostExec) {
				delete(d.Files, f.Path)
			}
		}
		return d, nil
	}
	d := review.Decisions{Files: map[string]review.FileDecision{}}
	var errs []error
	for _, p := range sel.Paths {
		p = cleanArg(p)
		if f := cs.File(p); f != nil {
			d.SetFile(f.Path, review.Approve)
			continue
		}
		// A directory approves everything under it but what runs on
		// the user's machine, which is taken only by name.
		n := 0
		for _, f := range cs.Files {
			if strings.HasPrefix(f.Path, p+"/") {
				n++
				if !hostExecOut || !f.HasFlag(review.FlagHostExec) {
					d.SetFile(f.Path, review.Approve)
				}
			}
		}
		if n == 0 {
			errs = append(errs, fmt.Errorf("%s is not in the changes of this sandbox (airlock diff --stat lists them)", p))
		}
	}
	for p, hs := range sel.Hunks {
		p = cleanArg(p)
		f := cs.File(p)
		switch {
		case f == nil:
			errs = append(errs, fmt.Errorf("--hunks: %s is not in the changes of this sandbox", p))
			continue
		case !f.HunkSelectable():
			errs = append(errs, fmt.Errorf("--hunks: %s is %s and is taken or left whole; name it without hunks", p, describe(f)))
			continue
		}
		for _, h := range slices.Sorted(slices.Values(hs)) {
			if h > len(f.Hunks) {
				errs = append(errs, fmt.Errorf("--hunks: %s has %d hunks, not %d", p, len(f.Hunks), h))
				continue
			}
			d.SetHunk(f.Path, h-1, review.Approve)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return review.Decisions{}, err
	}
	if len(d.Files) == 0 {
		if left := sel.LeftOut(cs); len(left) > 0 {
			return d, fmt.Errorf("nothing selected: every file named runs on your machine (%s is one: %s); name each, or add --include-host-exec", left[0].Path, left[0].FlagReason(review.FlagHostExec))
		}
		return d, errors.New("nothing selected: name files, use --hunks PATH:N, or --all")
	}
	return d, nil
}

func cleanArg(p string) string {
	p = filepath.ToSlash(filepath.Clean(p))
	return strings.TrimPrefix(p, "./")
}

func describe(f *review.File) string {
	switch {
	case f.Binary:
		return "a binary file"
	case f.IsSymlink():
		return "a symbolic link"
	case f.IsDir():
		return "a directory"
	}
	return string(f.Status)
}

// journalDirs lists applies/NNN in order.
func (sb *Sandbox) journalDirs() ([]string, error) {
	des, err := os.ReadDir(sb.Path(appliesDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, de := range des {
		if _, err := strconv.Atoi(de.Name()); err == nil && de.IsDir() {
			out = append(out, sb.Path(filepath.Join(appliesDir, de.Name())))
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		x, _ := strconv.Atoi(filepath.Base(a))
		y, _ := strconv.Atoi(filepath.Base(b))
		return x - y
	})
	return out, nil
}

// Recover finishes every interrupted apply of the sandbox (review.Recover
// rolling forward: the user approved it and every step was checked before
// anything changed) and finishes an interrupted undo. Every command that
// touches a sandbox calls it first. It returns the journals it recovered.
func (sb *Sandbox) Recover(ctx context.Context) ([]string, error) {
	unlock, err := filelock.Lock(sb.Path("apply.lock"))
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", sb.ID, err)
	}
	defer unlock()
	return sb.recover(ctx)
}

func (sb *Sandbox) recover(ctx context.Context) ([]string, error) {
	dirs, err := sb.journalDirs()
	if err != nil {
		return nil, fmt.Errorf("recover %s: %w", sb.ID, err)
	}
	var done []string
	for _, dir := range dirs {
		j, err := review.ReadJournal(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue // an apply that changed nothing
		}
		if err != nil {
			return done, err
		}
		if j.State == review.Applied || j.State == review.Undone {
			continue
		}
		from := j.State
		state, err := review.Recover(ctx, dir, review.RollForward)
		if err != nil {
			return done, fmt.Errorf("sandbox %s: finish the interrupted apply in %s: %w", sb.ID, dir, err)
		}
		done = append(done, dir)
		if err := sb.Audit(Event{Event: EventRecovered, Data: map[string]any{"journal": dir, "from": from, "state": state}}); err != nil {
			return done, err
		}
	}
	return done, nil
}

// ApplyResult is what Apply did, with the journal that Undo uses.
type ApplyResult struct {
	*review.Result
	// Recovered lists interrupted applies finished first.
	Recovered []string `json:"recovered,omitempty"`
	// LeftOut lists the files that run on the user's machine which the
	// selection reached but left out (Selection.LeftOut), with reasons;
	// the caller fills it in.
	LeftOut []review.Skip `json:"left_out,omitempty"`
}

// ApplyOptions are the choices of one apply of a sandbox.
type ApplyOptions struct {
	// AllOrNothing writes nothing when any approved file conflicts
	// (review.ApplyOptions.AllOrNothing); the result says which.
	AllOrNothing bool
	// Resolutions are the user's answers to conflicts, by path
	// (review.ApplyOptions.Resolutions).
	Resolutions map[string]review.Resolution
}

// Apply writes the changes approved by d into the real project with
// review.Apply, journalled under applies/NNN in the sandbox. Files changed
// in the project since the run are merged three ways; conflicts are
// reported and those files left untouched. Decisions and results go to
// the audit log with before/after hashes. It is ApplyWith without options.
func (sb *Sandbox) Apply(ctx context.Context, d review.Decisions) (*ApplyResult, error) {
	return sb.ApplyWith(ctx, d, ApplyOptions{})
}

// ApplyWith is Apply with opts: all or nothing, and resolutions of
// conflicts, which are written in the same journal as the rest of the
// apply (Undo reverts them with it).
func (sb *Sandbox) ApplyWith(ctx context.Context, d review.Decisions, opts ApplyOptions) (*ApplyResult, error) {
	unlock, err := filelock.Lock(sb.Path("apply.lock"))
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", sb.ID, err)
	}
	defer unlock()
	rec, err := sb.recover(ctx)
	if err != nil {
		return nil, err
	}
	m, err := sb.Meta()
	if err != nil {
		return nil, err
	}
	if m.Status != StatusReady && m.Status != StatusApplied {
		return nil, fmt.Errorf("apply %s: it is %s: %w", sb.ID, m.Status, ErrNotReady)
	}
	cs, err := sb.Changeset(ctx)
	if err != nil {
		return nil, err
	}
	dirs, err := sb.journalDirs()
	if err != nil {
		return nil, err
	}
	next := 1
	if len(dirs) > 0 {
		n, _ := strconv.Atoi(filepath.Base(dirs[len(dirs)-1]))
		next = n + 1
	}
	jdir := sb.Path(filepath.Join(appliesDir, fmt.Sprintf("%03d", next)))
	if err := os.MkdirAll(filepath.Dir(jdir), 0o700); err != nil {
		return nil, err
	}
	if err := sb.Audit(Event{Event: EventDecisions, Data: decisionsEvent(cs, d)}); err != nil {
		return nil, err
	}
	res, err := review.Apply(ctx, m.Project, cs, d, review.ApplyOptions{JournalDir: jdir, AllOrNothing: opts.AllOrNothing, Resolutions: opts.Resolutions})
	if err != nil {
		_ = sb.Audit(Event{Event: EventFailed, Data: map[string]any{"apply": err.Error()}})
		return nil, err
	}
	conflicts := make([]map[string]string, 0, len(res.Conflicts))
	for _, c := range res.Conflicts {
		conflicts = append(conflicts, map[string]string{"path": c.Path, "reason": c.Reason})
	}
	ev := map[string]any{
		"journal": jdir, "project": m.Project,
		"applied": res.Applied, "merged": res.Merged, "conflicts": conflicts, "skipped": res.Skipped,
	}
	if len(res.Resolved) > 0 {
		ev["resolved"] = res.Resolved
	}
	if res.Held {
		// Nothing was written: the files that would have been. The
		// journal's directory is empty; it goes.
		ev["journal"], ev["held"], ev["withheld"] = "", true, res.Withheld
		_ = os.Remove(jdir)
	}
	if err := sb.Audit(Event{Event: EventApplied, Data: ev}); err != nil {
		return nil, err
	}
	if _, err := review.ReadJournal(jdir); err == nil {
		// Something was written (a resolution as "mine" alone writes
		// nothing, and leaves no journal).
		if _, err := sb.Update(func(m *Meta) { m.Status = StatusApplied }); err != nil {
			return nil, err
		}
	}
	return &ApplyResult{Result: res, Recovered: rec}, nil
}

// decisionsEvent is the audit record of an apply's decisions: the
// decisions themselves ("files"), and every file that runs on the
// user's machine, taken ("host_exec_approved") or left out
// ("host_exec_left_out"), with its reason.
func decisionsEvent(cs *review.Changeset, d review.Decisions) map[string]any {
	approved, left := []Flagged{}, []Flagged{}
	for _, f := range cs.Files {
		r := f.FlagReason(review.FlagHostExec)
		if r == "" {
			continue
		}
		if _, touched := d.Selection(f); touched {
			approved = append(approved, Flagged{f.Path, r})
		} else {
			left = append(left, Flagged{f.Path, r})
		}
	}
	ev := map[string]any{"files": d.Files}
	if len(approved)+len(left) > 0 {
		ev["host_exec_approved"], ev["host_exec_left_out"] = approved, left
	}
	return ev
}

// ErrNothingToUndo means the sandbox has no apply left to undo.
var ErrNothingToUndo = errors.New("nothing to undo")

// Undo reverts the sandbox's last apply that is not undone yet, byte for
// byte (review.Undo). If a file it touched changed since, nothing is
// undone and the error (a *review.UndoError) names those files. It
// returns the journal undone.
func (sb *Sandbox) Undo(ctx context.Context) (string, error) {
	unlock, err := filelock.Lock(sb.Path("apply.lock"))
	if err != nil {
		return "", fmt.Errorf("lock %s: %w", sb.ID, err)
	}
	defer unlock()
	if _, err := sb.recover(ctx); err != nil {
		return "", err
	}
	dirs, err := sb.journalDirs()
	if err != nil {
		return "", err
	}
	var last string
	applied := 0
	for _, dir := range dirs {
		j, err := review.ReadJournal(dir)
		if err != nil {
			continue
		}
		if j.State == review.Applied {
			last = dir
			applied++
		}
	}
	if last == "" {
		return "", fmt.Errorf("undo %s: %w", sb.ID, ErrNothingToUndo)
	}
	if err := review.Undo(ctx, last); err != nil {
		return "", err
	}
	j, _ := review.ReadJournal(last)
	var paths []string
	if j != nil {
		for _, s := range j.Steps {
			if !slices.Contains(paths, s.Path) {
				paths = append(paths, s.Path)
			}
		}
	}
	if err := sb.Audit(Event{Event: EventUndone, Data: map[string]any{"journal": last, "paths": paths}}); err != nil {
		return "", err
	}
	if applied == 1 {
		if _, err := sb.Update(func(m *Meta) { m.Status = StatusReady }); err != nil {
			return "", err
		}
	}
	return last, nil
}
