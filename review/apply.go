package review

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// ApplyOptions configures Apply. JournalDir is required; the rest has a
// useful zero value.
type ApplyOptions struct {
	// JournalDir is an empty or missing directory outside the project
	// where the journal and the backups of every file about to change are
	// written (and fsynced) before the project is touched. Keep it: Undo
	// and Recover read it.
	JournalDir string
	// AllowEscapingSymlinks lets Apply create symbolic links whose target
	// is absolute or climbs out of the project. By default such links are
	// skipped and reported: a link is harmless until something follows it.
	AllowEscapingSymlinks bool
	// Logger receives one debug line per step; nil discards.
	Logger *slog.Logger

	// crash, in tests, is called with the number of steps done before each
	// step and once after the last; true stops Apply there as if the
	// process had died.
	crash func(done int) bool
}

// FileResult is one path of an apply, for the audit log: its SHA-256
// before and after ("" for absent; the hash of the target for a link).
type FileResult struct {
	Path         string `json:"path"`
	OldPath      string `json:"old_path,omitempty"`
	BeforeSHA256 string `json:"before_sha256,omitempty"`
	AfterSHA256  string `json:"after_sha256,omitempty"`
	// Reason says why a file was skipped.
	Reason string `json:"reason,omitempty"`
}

// Result is what an Apply did.
type Result struct {
	JournalDir string `json:"journal_dir"`
	// Applied files still matched the baseline and were written as
	// approved; Merged files had been changed in the project since the run
	// and took the approved change through a clean three-way merge.
	Applied []FileResult `json:"applied,omitempty"`
	Merged  []FileResult `json:"merged,omitempty"`
	// Conflicts were left untouched.
	Conflicts []*ConflictError `json:"conflicts,omitempty"`
	// Skipped were left untouched for another reason (already as
	// approved, unsafe, a special file in the way).
	Skipped []FileResult `json:"skipped,omitempty"`
}

// ConflictError is a file the user changed in the project since the run
// in a way that cannot be combined with the approved change. The file was
// left untouched. Base, Ours (the project now) and Theirs (the approved
// result) hold the three versions; Merge, when the file could be merged
// line by line, shows which stretches conflict.
type ConflictError struct {
	Path   string       `json:"path"`
	Reason string       `json:"reason"`
	Base   []byte       `json:"base,omitempty"`
	Ours   []byte       `json:"ours,omitempty"`
	Theirs []byte       `json:"theirs,omitempty"`
	Merge  *MergeResult `json:"merge,omitempty"`
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("apply %s: %s; the file was left as it is: resolve it by hand or reject the change", e.Path, e.Reason)
}

// plannedFile is the steps one file needs and what to report for it.
type plannedFile struct {
	steps  []Step
	result FileResult
	merged bool
}

type applier struct {
	pr      *project
	js      journalStore
	opts    ApplyOptions
	log     *slog.Logger
	objects map[string][]byte
}

// Apply writes every change of cs approved by d into the project at
// projectDir. Each file is first compared with the baseline: unchanged
// files are written as approved; files the user changed since the run are
// merged three ways (a clean merge is written, a conflict is reported and
// the file left untouched). Nothing is written before the journal and the
// backups are durable in opts.JournalDir. Writes are atomic per file;
// paths are untrusted and never lead outside the project or through a
// symbolic link. If a step fails, what was done is rolled back.
func Apply(ctx context.Context, projectDir string, cs *Changeset, d Decisions, opts ApplyOptions) (*Result, error) {
	if err := d.Validate(cs); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	projectDir, err := filepath.Abs(projectDir)
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	if err := checkJournalDir(projectDir, opts.JournalDir); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(projectDir)
	if err != nil {
		return nil, fmt.Errorf("apply: open project: %w", err)
	}
	defer root.Close()
	a := &applier{
		pr:      &project{root: root},
		js:      journalStore{dir: opts.JournalDir},
		opts:    opts,
		log:     logger(opts.Logger),
		objects: map[string][]byte{},
	}
	res := &Result{JournalDir: opts.JournalDir}
	var steps []Step
	for _, f := range cs.Files {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("apply: %w", err)
		}
		outs := d.Resolve(f)
		if len(outs) == 0 {
			continue
		}
		pf, err := a.planFile(f, outs)
		var ce *ConflictError
		switch {
		case errors.As(err, &ce):
			res.Conflicts = append(res.Conflicts, ce)
		case err != nil:
			res.Skipped = append(res.Skipped, FileResult{Path: f.Path, OldPath: f.OldPath, Reason: err.Error()})
		case len(pf.steps) == 0:
			pf.result.Reason = "already as approved in the project"
			res.Skipped = append(res.Skipped, pf.result)
		case pf.merged:
			res.Merged = append(res.Merged, pf.result)
			steps = append(steps, pf.steps...)
		default:
			res.Applied = append(res.Applied, pf.result)
			steps = append(steps, pf.steps...)
		}
	}
	steps, err = a.withParents(steps)
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	if len(steps) == 0 {
		return res, nil
	}
	j := &Journal{Version: 1, Project: projectDir, State: Pending, Created: time.Now().UTC(), Steps: steps}
	if err := a.writeJournal(j); err != nil {
		return nil, err
	}
	for i, s := range j.Steps {
		if opts.crash != nil && opts.crash(i) {
			return nil, errCrashed
		}
		err := a.step(s)
		if err != nil && !s.After.Exists && s.Before.Type == manifest.Dir && isNotEmpty(err) {
			// The project has files there that the run did not know of.
			j.Steps[i].After = s.Before
			res.Skipped = append(res.Skipped, FileResult{Path: s.Path, Reason: "directory not removed: it holds files the run did not know of"})
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("apply %s: %w", s.Path, err)
			if rerr := rollBack(a.pr, a.js, j, a.log); rerr != nil {
				return nil, fmt.Errorf("%w; rolling back failed too (%v): run recover on %s", err, rerr, opts.JournalDir)
			}
			return nil, fmt.Errorf("%w; the project was restored as it was", err)
		}
	}
	if opts.crash != nil && opts.crash(len(j.Steps)) {
		return nil, errCrashed
	}
	if err := a.js.setState(j, Applied); err != nil {
		return nil, err
	}
	return res, nil
}

var errCrashed = errors.New("simulated crash")

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

func checkJournalDir(project, dir string) error {
	if dir == "" {
		return fmt.Errorf("apply: no journal directory given; Apply needs one to keep backups")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if rel, err := filepath.Rel(project, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("apply: journal directory %s is inside the project; choose one outside it", dir)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return fmt.Errorf("apply: journal directory: %w", err)
	}
	if _, err := os.Stat(filepath.Join(abs, journalFile)); err == nil {
		return fmt.Errorf("apply: %s already holds a journal; use a new directory per apply", dir)
	}
	return nil
}

func (a *applier) writeJournal(j *Journal) error {
	for sum, data := range a.objects {
		if _, err := a.js.put(data); err != nil {
			return fmt.Errorf("apply: back up %s: %w", sum, err)
		}
	}
	if err := a.js.write(j); err != nil {
		return fmt.Errorf("apply: write journal: %w", err)
	}
	return nil
}

// step performs s, checking first that the path still holds s.Before.
func (a *applier) step(s Step) error {
	cur, _, err := a.pr.state(s.Path)
	if err != nil {
		return err
	}
	if !cur.Equal(s.Before) {
		return fmt.Errorf("changed while the apply was running")
	}
	a.log.Debug("apply step", "path", s.Path, "before", s.Before.hash(), "after", s.After.hash())
	return a.pr.setState(s.Path, s.After, a.js.get)
}

// keep records content to be stored with the journal; it returns its hash.
func (a *applier) keep(data []byte) string {
	sum := sha256Hex(data)
	a.objects[sum] = data
	return sum
}

// baseOf is what path held in the baseline according to f.
func baseOf(f *File, p string) (EntryState, []byte) {
	if f.Old == nil || (f.Status == Renamed && p != f.OldPath) {
		return EntryState{}, nil
	}
	s := EntryState{Exists: true, Type: f.Old.Type, Mode: f.Old.Mode.Perm(), SHA256: f.Old.SHA256, Target: f.Old.Target}
	switch s.Type {
	case manifest.Dir:
		s.SHA256, s.Target = "", ""
	case manifest.Symlink:
		s.Mode, s.SHA256 = 0, ""
	}
	return s, f.oldData
}

func (a *applier) planFile(f *File, outs []Outcome) (plannedFile, error) {
	var pf plannedFile
	pf.result = FileResult{Path: f.Path, OldPath: f.OldPath}
	for _, out := range outs {
		if err := ValidatePath(out.Path); err != nil {
			return pf, err
		}
		base, baseData := baseOf(f, out.Path)
		cur, curData, err := a.pr.state(out.Path)
		if err != nil {
			return pf, fmt.Errorf("%s: %w", out.Path, err)
		}
		target := EntryState{Exists: out.Exists}
		content := out.Content
		if out.Exists {
			target.Type, target.Mode = out.Type, out.Mode.Perm()
			switch out.Type {
			case manifest.File:
				target.SHA256 = sha256Hex(content)
			case manifest.Symlink:
				target.Mode, target.Target = 0, string(content)
				if !a.opts.AllowEscapingSymlinks && symlinkEscapes(out.Path, target.Target) {
					return pf, fmt.Errorf("symbolic link %s points outside the project (%q); not created", out.Path, target.Target)
				}
			}
			// A mode the agent did not change follows the project's.
			if cur.Exists && cur.Type == target.Type && base.Exists && base.Type == target.Type && base.Mode == target.Mode {
				target.Mode = cur.Mode
			}
		}
		if out.Path == f.Path {
			pf.result.BeforeSHA256, pf.result.AfterSHA256 = cur.hash(), target.hash()
		}
		if cur.Equal(target) {
			continue
		}
		if target.Type == manifest.Dir && cur.Type == manifest.Dir && !base.Exists {
			continue // the user made the directory too: keep theirs
		}
		if !cur.sameContent(base) {
			merged, err := a.merge(f, out, base, baseData, cur, curData, content)
			if err != nil {
				return pf, err
			}
			content, target.SHA256 = merged, sha256Hex(merged)
			pf.merged = true
			if out.Path == f.Path {
				pf.result.AfterSHA256 = target.SHA256
			}
			if cur.Equal(target) {
				continue
			}
		}
		if cur.Type == manifest.File {
			a.keep(curData)
		}
		if target.Type == manifest.File {
			a.keep(content)
		}
		if cur.Exists && target.Exists && cur.Type != target.Type && (cur.Type == manifest.Dir || target.Type == manifest.Dir) {
			pf.steps = append(pf.steps, Step{Path: out.Path, Before: cur}, Step{Path: out.Path, After: target})
		} else {
			pf.steps = append(pf.steps, Step{Path: out.Path, Before: cur, After: target})
		}
	}
	return pf, nil
}

// merge combines the user's edits (cur) with the approved content when the
// path changed in the project since the run.
func (a *applier) merge(f *File, out Outcome, base EntryState, baseData []byte, cur EntryState, curData, theirs []byte) ([]byte, error) {
	ce := &ConflictError{Path: out.Path, Base: baseData, Ours: curData, Theirs: theirs}
	textual := out.Exists && out.Type == manifest.File && cur.Type == manifest.File &&
		(!base.Exists || base.Type == manifest.File) &&
		!looksBinary(baseData) && !looksBinary(curData) && !looksBinary(theirs)
	switch {
	case !out.Exists:
		ce.Reason = "you changed it in the project since the run, and the approved change removes it"
		return nil, ce
	case !cur.Exists:
		ce.Reason = "you removed it from the project since the run, and the approved change edits it"
		return nil, ce
	case !textual:
		ce.Reason = "you changed it in the project since the run, and it cannot be merged line by line"
		return nil, ce
	}
	m := Merge3(baseData, curData, theirs)
	merged, ok := m.Content()
	if !ok {
		ce.Merge = m
		ce.Reason = fmt.Sprintf("your edits since the run overlap the approved change (%d conflicting stretches)", m.Conflicts())
		return nil, ce
	}
	return merged, nil
}

// withParents adds the creation of missing parent directories and orders
// the steps: removals of files and links, removals of directories deepest
// first, creations of directories shallowest first, then writes.
func (a *applier) withParents(steps []Step) ([]Step, error) {
	created := map[string]bool{}
	removedDir := map[string]bool{}
	for _, s := range steps {
		if !s.After.Exists && s.Before.Type == manifest.Dir {
			removedDir[s.Path] = true
		}
		if s.After.Type == manifest.Dir && !s.Before.Exists {
			created[s.Path] = true
		}
	}
	var out []Step
	for _, s := range steps {
		out = append(out, s)
		if !s.After.Exists {
			continue
		}
		missing, err := a.pr.checkParents(s.Path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Path, err)
		}
		for _, dir := range missing {
			if created[dir] {
				continue
			}
			created[dir] = true
			out = append(out, Step{Path: dir, After: EntryState{Exists: true, Type: manifest.Dir, Mode: 0o755}})
		}
	}
	for dir := range removedDir {
		if created[dir] {
			// Removed and created again: leave it standing.
			delete(removedDir, dir)
		}
	}
	phase := func(s Step) int {
		switch {
		case !s.After.Exists && s.Before.Type != manifest.Dir:
			return 0
		case !s.After.Exists:
			return 1
		case s.After.Type == manifest.Dir && !s.Before.Exists:
			return 2
		}
		return 3
	}
	sort.SliceStable(out, func(i, j int) bool {
		pi, pj := phase(out[i]), phase(out[j])
		if pi != pj {
			return pi < pj
		}
		if pi == 1 {
			return out[i].Path > out[j].Path // deepest first
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
}

// rollBack returns every path of j to its Before state, newest step first.
// Steps not done yet, or already undone, are recognised and skipped.
func rollBack(pr *project, js journalStore, j *Journal, log *slog.Logger) error {
	if err := js.setState(j, Undoing); err != nil {
		return err
	}
	var errs []error
	for i := len(j.Steps) - 1; i >= 0; i-- {
		s := j.Steps[i]
		cur, _, err := pr.state(s.Path)
		if err != nil {
			errs = append(errs, fmt.Errorf("undo %s: %w", s.Path, err))
			continue
		}
		if cur.Equal(s.Before) || matchesEarlierBefore(j.Steps[:i], s.Path, cur) {
			continue
		}
		if !cur.Equal(s.After) {
			errs = append(errs, fmt.Errorf("undo %s: it changed after the apply; left as it is", s.Path))
			continue
		}
		log.Debug("undo step", "path", s.Path)
		if err := pr.setState(s.Path, s.Before, js.get); err != nil {
			errs = append(errs, fmt.Errorf("undo %s: %w", s.Path, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return js.setState(j, Undone)
}

// rollForward finishes the steps of j not done yet.
func rollForward(pr *project, js journalStore, j *Journal, log *slog.Logger) error {
	for i, s := range j.Steps {
		cur, _, err := pr.state(s.Path)
		if err != nil {
			return fmt.Errorf("recover %s: %w", s.Path, err)
		}
		if cur.Equal(s.After) || matchesLaterAfter(j.Steps[i+1:], s.Path, cur) {
			continue
		}
		if !cur.Equal(s.Before) {
			return fmt.Errorf("recover %s: it changed since the interrupted apply; roll back instead", s.Path)
		}
		log.Debug("recover step", "path", s.Path)
		if err := pr.setState(s.Path, s.After, js.get); err != nil {
			return fmt.Errorf("recover %s: %w", s.Path, err)
		}
	}
	return js.setState(j, Applied)
}

func matchesEarlierBefore(steps []Step, p string, cur EntryState) bool {
	for _, s := range steps {
		if s.Path == p && cur.Equal(s.Before) {
			return true
		}
	}
	return false
}

func matchesLaterAfter(steps []Step, p string, cur EntryState) bool {
	for _, s := range steps {
		if s.Path == p && cur.Equal(s.After) {
			return true
		}
	}
	return false
}

// UndoError lists paths changed after an apply, which Undo will not
// overwrite.
type UndoError struct {
	Paths []string
}

func (e *UndoError) Error() string {
	return fmt.Sprintf("undo: %s changed after the apply; nothing was undone (undoing would lose those edits)", strings.Join(e.Paths, ", "))
}

// Undo reverts the apply recorded in journalDir: every touched path gets
// back its content, mode, type or absence byte for byte, and created
// directories are removed. If any touched path changed since the apply,
// Undo changes nothing and returns an *UndoError.
func Undo(ctx context.Context, journalDir string) error {
	js := journalStore{dir: journalDir}
	j, err := ReadJournal(journalDir)
	if err != nil {
		return fmt.Errorf("undo: %w", err)
	}
	switch j.State {
	case Undone:
		return nil
	case Pending:
		return fmt.Errorf("undo: the apply in %s did not finish; run recover first", journalDir)
	}
	root, err := os.OpenRoot(j.Project)
	if err != nil {
		return fmt.Errorf("undo: open project: %w", err)
	}
	defer root.Close()
	pr := &project{root: root}
	if j.State == Applied {
		last := map[string]EntryState{}
		for _, s := range j.Steps {
			last[s.Path] = s.After
		}
		var changed []string
		for p, want := range last {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("undo: %w", err)
			}
			cur, _, err := pr.state(p)
			if err != nil || !cur.Equal(want) {
				changed = append(changed, p)
			}
		}
		if len(changed) > 0 {
			sort.Strings(changed)
			return &UndoError{Paths: changed}
		}
	}
	if err := rollBack(pr, js, j, slog.New(slog.DiscardHandler)); err != nil {
		return fmt.Errorf("undo: %w", err)
	}
	return nil
}

// RecoverMode chooses what Recover does with an interrupted apply.
type RecoverMode int

const (
	// RollForward finishes the interrupted apply: the user approved it and
	// every step was checked before the journal was written.
	RollForward RecoverMode = iota
	// RollBack returns the project to what it was before the apply.
	RollBack
)

// Recover looks at the journal in journalDir and, if its apply was
// interrupted (a crash, a power cut), finishes or rolls it back as mode
// says; an interrupted undo is always finished. It returns the journal's
// final state; a finished or undone journal is left alone.
func Recover(ctx context.Context, journalDir string, mode RecoverMode) (JournalState, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("recover: %w", err)
	}
	js := journalStore{dir: journalDir}
	j, err := ReadJournal(journalDir)
	if err != nil {
		return "", fmt.Errorf("recover: %w", err)
	}
	if j.State == Applied || j.State == Undone {
		return j.State, nil
	}
	root, err := os.OpenRoot(j.Project)
	if err != nil {
		return j.State, fmt.Errorf("recover: open project: %w", err)
	}
	defer root.Close()
	pr := &project{root: root}
	log := slog.New(slog.DiscardHandler)
	pr.removeTemps(j.Steps)
	if j.State == Undoing || mode == RollBack {
		err = rollBack(pr, js, j, log)
	} else {
		err = rollForward(pr, js, j, log)
	}
	return j.State, err
}

// isNotEmpty reports a failed removal of a directory that has entries.
func isNotEmpty(err error) bool {
	return errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)
}
