package review

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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
	// written (and synced) before the project is touched. Keep it: Undo
	// and Recover read it.
	JournalDir string
	// AllowEscapingSymlinks lets Apply create symbolic links that lead
	// out of the project: an absolute target, one that climbs above the
	// root, or a chain of links that does (d1 -> ".", up -> "d1/d1/../..").
	// By default such links are skipped and reported, judged against the
	// project as it will be after the apply, and checked again once
	// written (an apply whose links escape after all is rolled back).
	AllowEscapingSymlinks bool
	// AllOrNothing writes nothing at all when any approved file conflicts:
	// the Result then has Held set, the conflicts, and in Withheld what
	// would have been written. By default the files that do not conflict
	// are written and the conflicting ones left as they are.
	AllOrNothing bool
	// Resolutions are the user's answers to conflicts, by the conflict's
	// path: a file that conflicts is written as its resolution says
	// (Result.Resolved) instead of being left as it is. See Resolution
	// for the check that the project did not change since.
	Resolutions map[string]Resolution
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
	// Resolution is how a conflict of the file was resolved (Resolved).
	Resolution Choice `json:"resolution,omitempty"`
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
	// Resolved files conflicted and were written as the user's
	// resolution says (left as they are for KeepMine).
	Resolved []FileResult `json:"resolved,omitempty"`
	// Held is set when ApplyOptions.AllOrNothing kept Apply from writing
	// anything because of Conflicts; Withheld are the files it would
	// have written.
	Held     bool         `json:"held,omitempty"`
	Withheld []FileResult `json:"withheld,omitempty"`
}

// ConflictError is a file the user changed in the project since the run
// in a way that cannot be combined with the approved change. The file was
// left untouched. Base, Ours (the project now) and Theirs (the approved
// result) hold the three versions; Merge, when the file could be merged
// line by line, shows which stretches conflict.
//
// Project and Approved are what the project held at the path when the
// conflict was found and what the approved change makes of it; File is
// the changed file of the Changeset the path belongs to (the new path of
// a rename whose old path conflicts). Again is set when the path changed
// again after the user chose how to resolve it.
type ConflictError struct {
	Path     string       `json:"path"`
	File     string       `json:"file,omitempty"`
	Reason   string       `json:"reason"`
	Base     []byte       `json:"base,omitempty"`
	Ours     []byte       `json:"ours,omitempty"`
	Theirs   []byte       `json:"theirs,omitempty"`
	Merge    *MergeResult `json:"merge,omitempty"`
	Project  EntryState   `json:"project"`
	Approved EntryState   `json:"approved"`
	Again    bool         `json:"changed_again,omitempty"`
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("apply %s: %s; the file was left as it is: resolve it by hand or reject the change", e.Path, e.Reason)
}

type applier struct {
	pr      *project
	js      journalStore
	opts    ApplyOptions
	log     *slog.Logger
	objects map[string][]byte
	// umask is the user's, read once: new files and directories get the
	// modes a tool of theirs would give them.
	umask fs.FileMode
	// replaced are the paths whose planned steps remove a file or link
	// and make a directory there: what is under them is planned as
	// absent, not as under a file.
	replaced map[string]bool
}

// Apply writes every change of cs approved by d into the project at
// projectDir. Each file is first compared with the baseline: unchanged
// files are written as approved; files the user changed since the run are
// merged three ways (a clean merge is written, a conflict is reported and
// the file left untouched, or written as opts.Resolutions says; with
// opts.AllOrNothing a conflict keeps every file from being written). Nothing is written before the journal and the
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
		pr:       &project{root: root, dir: projectDir},
		js:       newJournalStore(opts.JournalDir),
		opts:     opts,
		log:      logger(opts.Logger),
		objects:  map[string][]byte{},
		umask:    umask(),
		replaced: map[string]bool{},
	}
	res := &Result{JournalDir: opts.JournalDir}
	planned, err := a.plan(ctx, cs, d, res)
	if err != nil {
		return nil, err
	}
	if !opts.AllowEscapingSymlinks {
		var refused []FileResult
		planned, refused = a.refuseEscapingLinks(planned)
		res.Skipped = append(res.Skipped, refused...)
	}
	if opts.AllOrNothing && len(res.Conflicts) > 0 {
		res.Held, res.JournalDir = true, ""
		for _, pf := range planned {
			res.Withheld = append(res.Withheld, pf.result)
		}
		return res, nil
	}
	steps := res.sortPlanned(planned)
	steps, err = a.withParents(steps)
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	if len(steps) == 0 {
		return res, nil
	}
	if err := a.write(projectDir, steps, res); err != nil {
		return nil, err
	}
	return res, nil
}

// plan decides every file of cs that d approves: a conflict, a file
// left out (with its reason, in res), already as approved, or planned
// with its steps.
func (a *applier) plan(ctx context.Context, cs *Changeset, d Decisions, res *Result) ([]plannedFile, error) {
	opts := a.opts
	// A change that cannot be made without one left out is left out too,
	// naming what it needs (Patch does the same).
	needs := map[string]string{}
	for _, n := range d.Needs(cs) {
		if needs[n.Path] == "" {
			needs[n.Path] = n.Error()
		}
	}
	becomeDirs := map[string]*File{}
	for _, f := range cs.Files {
		if f.becomesDir() {
			becomeDirs[f.Path] = f
		}
	}
	var planned []plannedFile
	for _, f := range cs.Files {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("apply: %w", err)
		}
		outs := d.Resolve(f)
		if len(outs) == 0 {
			continue
		}
		if reason := needs[f.Path]; reason != "" {
			res.Skipped = append(res.Skipped, FileResult{Path: f.Path, OldPath: f.OldPath, Reason: reason})
			continue
		}
		pf, err := a.planFile(f, outs)
		var ce *ConflictError
		switch {
		case errors.As(err, &ce):
			res.Conflicts = append(res.Conflicts, ce)
		case err != nil:
			reason := err.Error()
			if a := typeChangedAbove(becomeDirs, f.Path, (*File).becomesDir); a != nil && errors.Is(err, errFileParent) {
				reason = fmt.Sprintf("%s is still a %s: its change to a directory was not applied (see %s); left out", a.Path, TypeWord(a.Old.Type), a.Path)
			}
			if p := answered(opts.Resolutions, outs); p != "" {
				// The user chose for this file, and it can no longer be
				// written at all (a parent became a link, a special
				// file took its place): a conflict again, so that an
				// all-or-nothing apply writes nothing.
				res.Conflicts = append(res.Conflicts, &ConflictError{Path: p, File: f.Path, Again: true,
					Reason: "it changed in the project since you chose how to resolve it and cannot be written now (" + reason + "); nothing was written there"})
				continue
			}
			res.Skipped = append(res.Skipped, FileResult{Path: f.Path, OldPath: f.OldPath, Reason: reason})
		case len(pf.steps) == 0 && pf.resolved != "":
			pf.result.Resolution = pf.resolved
			res.Resolved = append(res.Resolved, pf.result)
		case len(pf.steps) == 0:
			pf.result.Reason = "already as approved in the project"
			res.Skipped = append(res.Skipped, pf.result)
		default:
			planned = append(planned, pf)
			for _, s := range pf.steps {
				if s.After.Type == manifest.Dir && pf.replaces(s.Path) {
					a.replaced[s.Path] = true
				}
			}
		}
	}
	return planned, nil
}

// sortPlanned files the planned files into res (resolved, merged or
// applied) and returns their steps, in order.
func (res *Result) sortPlanned(planned []plannedFile) []Step {
	var steps []Step
	for _, pf := range planned {
		if pf.resolved != "" {
			pf.result.Resolution = pf.resolved
			res.Resolved = append(res.Resolved, pf.result)
			steps = append(steps, pf.steps...)
			continue
		}
		if pf.merged {
			res.Merged = append(res.Merged, pf.result)
		} else {
			res.Applied = append(res.Applied, pf.result)
		}
		steps = append(steps, pf.steps...)
	}
	return steps
}

// write carries out steps in the project: the journal and backups first,
// then each step, rolled back if one fails; a directory the project
// filled meanwhile is kept and left out (in res).
func (a *applier) write(projectDir string, steps []Step, res *Result) error {
	opts := a.opts
	j := &Journal{Version: 1, Project: projectDir, State: Pending, Created: time.Now().UTC(), Steps: steps}
	b := newBatch()
	if err := a.writeJournal(j, b); err != nil {
		return err
	}
	if opts.crash != nil && opts.crash(0) {
		return errCrashed
	}
	staged, err := a.stage(j, b)
	if err != nil {
		return err
	}
	unused := func() {
		for _, tmp := range staged {
			_ = a.pr.root.Remove(tmp)
		}
	}
	kept := map[string]EntryState{} // directories not removed, as they stay
	for i, s := range j.Steps {
		if i > 0 && opts.crash != nil && opts.crash(i) {
			return errCrashed
		}
		if st, ok := kept[s.Path]; ok && !s.Before.Exists {
			// The file or link that was to replace a directory kept
			// below: not made, the step recorded as leaving it.
			j.Steps[i].Before, j.Steps[i].After = st, st
			continue
		}
		tmp := staged[i]
		delete(staged, i)
		err := a.step(s, tmp, b)
		if err != nil && !s.After.Exists && s.Before.Type == manifest.Dir && isNotEmpty(err) {
			// The project has files there that the run did not know of.
			j.Steps[i].After = s.Before
			kept[s.Path] = s.Before
			res.Skipped = append(res.Skipped, FileResult{Path: s.Path, Reason: keptDirReason(j.Steps[i+1:], s.Path)})
			res.Applied = slices.DeleteFunc(res.Applied, func(r FileResult) bool { return r.Path == s.Path })
			res.Merged = slices.DeleteFunc(res.Merged, func(r FileResult) bool { return r.Path == s.Path })
			res.Resolved = slices.DeleteFunc(res.Resolved, func(r FileResult) bool { return r.Path == s.Path })
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("apply %s: %w", s.Path, err)
			unused()
			if rerr := rollBack(a.pr, a.js, j, a.log); rerr != nil {
				return fmt.Errorf("%w; rolling back failed too (%v): run recover on %s", err, rerr, opts.JournalDir)
			}
			return fmt.Errorf("%w; the project was restored as it was", err)
		}
	}
	unused()
	if !opts.AllowEscapingSymlinks {
		// The plan judged every link against the project as it was; a
		// change made meanwhile could still send one outside. Ask the
		// kernel, through the project's root, where each one leads.
		if err := a.checkCreatedLinks(j.Steps); err != nil {
			err = fmt.Errorf("apply: %w", err)
			if rerr := rollBack(a.pr, a.js, j, a.log); rerr != nil {
				return fmt.Errorf("%w; rolling back failed too (%v): run recover on %s", err, rerr, opts.JournalDir)
			}
			return fmt.Errorf("%w; the whole apply was rolled back and the project restored as it was", err)
		}
	}
	if opts.crash != nil && opts.crash(len(j.Steps)) {
		return errCrashed
	}
	if err := b.sync(); err != nil {
		return fmt.Errorf("apply: %w; the changes are made but may not survive a power cut yet: run recover on %s", err, opts.JournalDir)
	}
	if err := a.js.setState(j, Applied); err != nil {
		return err
	}
	return nil
}

// writeJournal writes the objects, syncs them and writes the journal,
// durably: steps 1 to 3 of the protocol at the top of journal.go.
func (a *applier) writeJournal(j *Journal, b *batch) error {
	if err := a.js.putAll(a.objects, b); err != nil {
		return fmt.Errorf("apply: back up: %w", err)
	}
	if err := b.sync(); err != nil {
		return fmt.Errorf("apply: back up: %w", err)
	}
	if err := a.js.write(j); err != nil {
		return fmt.Errorf("apply: write journal: %w", err)
	}
	return nil
}

// stage writes the content of every file the steps write to a temporary
// file, in the file's directory or, where that does not exist yet (or is
// to be removed), in the nearest directory above it that stays, and syncs
// them: steps 4 and 5 of the protocol. It returns them by step index. If
// it fails, nothing was changed and the journal is marked so.
func (a *applier) stage(j *Journal, b *batch) (map[int]string, error) {
	staged, err := a.pr.stageFiles(j.Steps, true, a.object, b)
	if err == nil {
		if err = b.sync(); err != nil {
			for _, tmp := range staged {
				_ = a.pr.root.Remove(tmp)
			}
		}
	}
	if err != nil {
		if rerr := a.js.setState(j, Undone); rerr != nil {
			return nil, fmt.Errorf("apply: %w; nothing was changed (run recover on %s to tidy up: %v)", err, a.js.dir, rerr)
		}
		return nil, fmt.Errorf("apply: %w; nothing was changed", err)
	}
	return staged, nil
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

// step performs s, checking first that the path still holds s.Before:
// renames tmp, the file staged for it, or makes the change itself. b
// records what to sync.
func (a *applier) step(s Step, tmp string, b *batch) error {
	cur, _, err := a.pr.state(s.Path)
	if err != nil {
		return err
	}
	if !cur.Equal(s.Before) {
		return fmt.Errorf("changed while the apply was running")
	}
	a.log.Debug("apply step", "path", s.Path, "before", s.Before.hash(), "after", s.After.hash())
	if tmp == "" {
		return a.pr.setState(s.Path, s.After, a.js.get, b)
	}
	return a.pr.placeStaged(s.Path, tmp, b)
}

// object is the content kept under sum.
func (a *applier) object(sum string) ([]byte, error) {
	data, ok := a.objects[sum]
	if !ok {
		return nil, fmt.Errorf("no content kept for %s", sum)
	}
	return data, nil
}

// keep records content to be stored with the journal; it returns its hash.
func (a *applier) keep(data []byte) string {
	sum := sha256Hex(data)
	a.objects[sum] = data
	return sum
}

// keptDirReason says why the directory at p was left standing: it holds
// files the run did not know of; and, when later steps were to put a file
// or link there, that they were not taken.
func keptDirReason(later []Step, p string) string {
	for _, s := range later {
		if s.Path == p && s.After.Exists {
			return fmt.Sprintf("directory not replaced by a %s: it holds files the run did not know of; move them away and apply again", TypeWord(s.After.Type))
		}
	}
	return "directory not removed: it holds files the run did not know of"
}

// isNotEmpty reports a failed removal of a directory that has entries.
func isNotEmpty(err error) bool {
	return errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)
}
