package manifest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/airlock-dev/airlock/internal/ctxio"
)

// WalkOptions configures Walk. The zero value walks everything git would
// show, minus .git/ and the secret deny-list, hashing on a few goroutines.
type WalkOptions struct {
	// Excludes are extra patterns in gitignore syntax, relative to the root
	// (airlock.toml's excludes). They win over .gitignore negations.
	Excludes []string
	// IncludeGit walks the .git directory too (never any nested .git).
	IncludeGit bool
	// NoGitignore disables .gitignore and .git/info/exclude processing.
	NoGitignore bool
	// MaxFileSize, when positive, leaves out every file over that many
	// bytes, by its size and before reading any of it, as an Exclusion
	// with ReasonTooLarge and the size: one oversized file is reported,
	// it does not stop the walk.
	MaxFileSize int64
	// Workers bounds how many files are hashed at once; 0 means
	// min(4, GOMAXPROCS), 1 hashes sequentially.
	Workers int
	// Progress, when set, is called from one goroutine at a time with
	// counts so far: after each directory read and each file hashed.
	Progress func(Progress)
	// Logger receives debug messages; nil discards them.
	Logger *slog.Logger
	// Cache, when set, is consulted for the hashes of files whose stat
	// data has not changed since an earlier Walk of the same tree with the
	// same cache, and is updated with this walk's files. Nil hashes every
	// file.
	Cache *HashCache
}

// Phase tells what a Progress event counts.
type Phase string

const (
	PhaseWalk Phase = "walk" // reading directories
	PhaseHash Phase = "hash" // hashing file contents
	PhaseDone Phase = "done"
)

// Progress is a snapshot of Walk's counters, for "snapshot 312/1840".
type Progress struct {
	Phase       Phase
	Entries     int   // entries found so far (files, dirs, symlinks)
	Excluded    int   // paths excluded so far
	FilesHashed int   // files hashed so far
	FilesTotal  int   // files to hash (known from PhaseHash on)
	BytesHashed int64 // bytes hashed so far
	BytesTotal  int64 // bytes to hash (known from PhaseHash on)
}

// Reason says why a path was left out of a manifest.
type Reason string

const (
	ReasonGitignore   Reason = "gitignore"      // a .gitignore or .git/info/exclude pattern
	ReasonConfig      Reason = "config-exclude" // an airlock.toml exclude
	ReasonSecret      Reason = "secret"         // the built-in secret deny-list
	ReasonGitDir      Reason = "git-dir"        // .git (see WalkOptions.IncludeGit)
	ReasonSpecial     Reason = "special-file"   // fifo, socket, device
	ReasonInvalidName Reason = "invalid-name"   // a name ValidPath rejects
	ReasonUnreadable  Reason = "unreadable"     // permission denied
	ReasonTooLarge    Reason = "too-large"      // a file over WalkOptions.MaxFileSize
)

// Exclusion is one path Walk left out. An excluded directory is reported
// once; nothing below it is walked.
type Exclusion struct {
	Path   string `json:"path"`
	Dir    bool   `json:"dir,omitempty"`
	Reason Reason `json:"reason"`
	// Rule is what matched: ".gitignore:3: *.log", "SSH private key …".
	Rule string `json:"rule,omitempty"`
	// Size is the size in bytes of a file left out for ReasonTooLarge.
	Size int64 `json:"size,omitempty"`
}

// Name is the excluded path as people read it: a folder ends in "/".
func (x Exclusion) Name() string {
	if x.Dir {
		return x.Path + "/"
	}
	return x.Path
}

// SecretPaths are the names (Exclusion.Name) of what ex left out as
// secrets, in order.
func SecretPaths(ex []Exclusion) []string {
	var out []string
	for _, x := range ex {
		if x.Reason == ReasonSecret {
			out = append(out, x.Name())
		}
	}
	return out
}

// TooLargeRule is the Rule of an Exclusion for ReasonTooLarge: the size
// and the cap it is over.
func TooLargeRule(size, max int64) string {
	return fmt.Sprintf("%d bytes, over the %d-byte cap", size, max)
}

// Report tells what Walk left out and how much it kept.
type Report struct {
	Excluded []Exclusion `json:"excluded"` // sorted by Path
	Files    int         `json:"files"`
	Dirs     int         `json:"dirs"`
	Symlinks int         `json:"symlinks"`
	Bytes    int64       `json:"bytes"`
}

// Count returns how many exclusions have reason r.
func (r *Report) Count(reason Reason) int {
	n := 0
	for _, e := range r.Excluded {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

// Walk builds the manifest of the directory root. It never follows
// symbolic links (they are recorded with their target) and never leaves
// root, even if a directory is swapped for a link while it runs. Paths left
// out are listed in the Report with the reason; special files are skipped
// and reported too. Only a failure to read the tree is an error.
func Walk(ctx context.Context, root string, opts WalkOptions) (*Manifest, *Report, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, nil, fmt.Errorf("walk %s: %w", root, err)
	}
	defer r.Close()
	w, g, start := newWalker(ctx, r, opts)
	var ignores []ignorePattern
	if !opts.NoGitignore {
		if data, err := r.ReadFile(".git/info/exclude"); err == nil {
			ignores = parseIgnore(data, "", ".git/info/exclude")
		}
	}
	werr := w.walkDir("", r, ignores)
	if err := g.Wait(); werr == nil {
		werr = err
	}
	if werr != nil {
		return nil, nil, werr
	}
	w.ctx = ctx
	if err := w.hashAll(); err != nil {
		return nil, nil, err
	}
	if opts.Cache != nil {
		opts.Cache.replace(w.cached, start)
	}
	sortEntries(w.entries)
	slices.SortFunc(w.report.Excluded, func(a, b Exclusion) int { return strings.Compare(a.Path, b.Path) })
	for _, e := range w.entries {
		switch e.Type {
		case File:
			w.report.Files++
			w.report.Bytes += e.Size
		case Dir:
			w.report.Dirs++
		case Symlink:
			w.report.Symlinks++
		}
	}
	w.progress(PhaseDone)
	w.log.Debug("walked", "root", root, "files", w.report.Files, "excluded", len(w.report.Excluded))
	return &Manifest{Entries: w.entries}, w.report, nil
}

type walker struct {
	ctx    context.Context
	group  *errgroup.Group // directories walked on other goroutines
	root   *os.Root
	opts   WalkOptions
	log    *slog.Logger
	config []ignorePattern

	mu      sync.Mutex // guards what follows while directories are walked
	entries []Entry
	report  *Report
	prog    Progress
	// stats holds the stat data of each file, and cached what the
	// HashCache is to remember, when WalkOptions.Cache is set.
	stats  map[string]fileStat
	cached map[string]cachedFile
}

func (w *walker) progress(phase Phase) {
	if w.opts.Progress == nil {
		return
	}
	w.prog.Phase = phase
	w.prog.Entries = len(w.entries)
	w.prog.Excluded = len(w.report.Excluded)
	w.opts.Progress(w.prog)
}

// dirScan is what the walk of one directory found, merged into the
// walker's results in one step.
type dirScan struct {
	entries  []Entry
	excluded []Exclusion
	stats    []pathStat
}

type pathStat struct {
	path string
	stat fileStat
}

func (w *walker) exclude(sc *dirScan, rel string, isDir bool, reason Reason, rule string) {
	sc.excluded = append(sc.excluded, Exclusion{Path: rel, Dir: isDir, Reason: reason, Rule: rule})
	w.log.Debug("excluded", "path", rel, "reason", reason, "rule", rule)
}

// merge adds what one directory's walk found to the results.
func (w *walker) merge(sc *dirScan) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.entries = append(w.entries, sc.entries...)
	w.report.Excluded = append(w.report.Excluded, sc.excluded...)
	for _, ps := range sc.stats {
		w.stats[ps.path] = ps.stat
	}
	w.progress(PhaseWalk)
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// walkDir records the children of dir ("" for the root), opened as d;
// ignores holds the gitignore patterns in force, shallowest first. Every
// call on d names one element, so each costs one system call and nothing
// is resolved twice (a path from the walk's root would be re-resolved
// element by element for every file); names come without a stat of their
// own (some file systems give no type with them, and each entry is
// lstat'ed once anyway). Subdirectories are walked on another goroutine
// while one is free, here otherwise.
func (w *walker) walkDir(dir string, d *os.Root, ignores []ignorePattern) error {
	if err := w.ctx.Err(); err != nil {
		return fmt.Errorf("walk: %w", err)
	}
	name := dir
	if name == "" {
		name = "."
	}
	f, err := d.Open(".")
	if err != nil {
		return fmt.Errorf("walk %s: %w", name, err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("walk %s: %w", name, err)
	}
	slices.Sort(names)

	if !w.opts.NoGitignore && slices.Contains(names, ".gitignore") {
		rel := join(dir, ".gitignore")
		if info, err := d.Lstat(".gitignore"); err == nil && info.Mode().IsRegular() {
			data, err := d.ReadFile(".gitignore")
			if err != nil {
				return fmt.Errorf("walk %s: %w", rel, err)
			}
			ignores = slices.Clip(ignores)
			ignores = append(ignores, parseIgnore(data, dir, rel)...)
		}
	}

	var sc dirScan
	var subdirs []string
	for _, base := range names {
		isDir, err := w.visit(&sc, dir, d, base, ignores)
		if err != nil {
			return err
		}
		if isDir {
			subdirs = append(subdirs, base)
		}
	}

	// Subdirectories: one that cannot be opened for lack of permission is
	// reported, not fatal (and is no entry).
	for _, base := range subdirs {
		rel := join(dir, base)
		sub, err := d.OpenRoot(base)
		if errors.Is(err, fs.ErrPermission) {
			w.exclude(&sc, rel, true, ReasonUnreadable, err.Error())
			i := slices.IndexFunc(sc.entries, func(e Entry) bool { return e.Path == rel })
			sc.entries = slices.Delete(sc.entries, i, i+1)
			continue
		}
		if err != nil {
			return fmt.Errorf("walk %s: %w", rel, err)
		}
		walk := func() error {
			defer sub.Close()
			return w.walkDir(rel, sub, ignores)
		}
		if !w.group.TryGo(walk) {
			if err := walk(); err != nil {
				return err
			}
		}
	}
	w.merge(&sc)
	return nil
}

// visit records the child base of dir (opened as d) in sc, or its
// exclusion, under the gitignore patterns in force for dir. It reports
// whether base is a directory whose entries belong in the manifest. A
// child that is gone is no entry and no error.
func (w *walker) visit(sc *dirScan, dir string, d *os.Root, base string, ignores []ignorePattern) (bool, error) {
	rel := join(dir, base)
	info, err := d.Lstat(base)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // removed while we walk
	}
	if err != nil {
		return false, fmt.Errorf("walk %s: %w", rel, err)
	}
	mode := info.Mode()
	isDir := mode.IsDir()

	if base == ".git" && (!w.opts.IncludeGit || dir != "") {
		w.exclude(sc, rel, isDir, ReasonGitDir, "")
		return false, nil
	}
	if err := validPath(rel, true); err != nil {
		w.exclude(sc, rel, isDir, ReasonInvalidName, err.Error())
		return false, nil
	}
	if !isDir && !mode.IsRegular() && mode&fs.ModeSymlink == 0 {
		w.exclude(sc, rel, false, ReasonSpecial, mode.Type().String())
		return false, nil
	}
	if r := secretRuleFor(rel, isDir, mode.IsRegular(), func() (io.ReadCloser, error) { return d.Open(base) }); r != nil {
		w.exclude(sc, rel, isDir, ReasonSecret, r.what)
		return false, nil
	}
	if p := lastMatch(w.config, rel, isDir); p != nil && !p.negate {
		w.exclude(sc, rel, isDir, ReasonConfig, p.source+": "+p.text)
		return false, nil
	}
	if p := lastMatch(ignores, rel, isDir); p != nil && !p.negate {
		w.exclude(sc, rel, isDir, ReasonGitignore, p.source+": "+p.text)
		return false, nil
	}

	switch {
	case isDir:
		sc.entries = append(sc.entries, Entry{Path: rel, Type: Dir, Mode: mode.Perm()})
		return true, nil
	case mode&fs.ModeSymlink != 0:
		target, err := d.Readlink(base)
		if err != nil {
			return false, fmt.Errorf("walk %s: %w", rel, err)
		}
		sc.entries = append(sc.entries, Entry{Path: rel, Type: Symlink, Mode: SymlinkMode, Target: target})
	default:
		if max := w.opts.MaxFileSize; max > 0 && info.Size() > max {
			sc.excluded = append(sc.excluded, Exclusion{Path: rel, Reason: ReasonTooLarge, Rule: TooLargeRule(info.Size(), max), Size: info.Size()})
			w.log.Debug("excluded", "path", rel, "reason", ReasonTooLarge, "size", info.Size())
			return false, nil
		}
		sc.entries = append(sc.entries, Entry{Path: rel, Type: File, Mode: mode.Perm(), Size: info.Size()})
		if w.stats != nil {
			if st, ok := statOf(info); ok {
				sc.stats = append(sc.stats, pathStat{rel, st})
			}
		}
	}
	return false, nil
}

// emptySum is the SHA-256 of no bytes.
const emptySum = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// hashAll fills in Size and SHA256 of every file, on up to Workers
// goroutines. The size recorded is the number of bytes hashed; a file
// whose lstat gave size 0 is empty without being read.
func (w *walker) hashAll() error {
	var idx []int
	var hits []int
	if w.stats != nil {
		w.cached = make(map[string]cachedFile, len(w.stats))
	}
	for i, e := range w.entries {
		if e.Type != File {
			continue
		}
		w.prog.FilesTotal++
		w.prog.BytesTotal += e.Size
		if e.Size == 0 {
			// Empty by its lstat: nothing to read, so it is not opened
			// (an agent's npm install makes thousands of empty files,
			// and under emulation each open cost a third of a
			// millisecond). Its content is what the walk saw, as for
			// any file changed after it was read.
			w.entries[i].SHA256 = emptySum
			if st, ok := w.stats[e.Path]; ok {
				w.cached[e.Path] = cachedFile{st, emptySum}
			}
			hits = append(hits, i)
			continue
		}
		if st, ok := w.stats[e.Path]; ok {
			if sum, ok := w.opts.Cache.lookup(e.Path, st); ok {
				w.entries[i].SHA256 = sum
				w.cached[e.Path] = cachedFile{st, sum}
				hits = append(hits, i)
				continue
			}
		}
		idx = append(idx, i)
	}
	w.progress(PhaseHash)
	for _, i := range hits {
		w.prog.FilesHashed++
		w.prog.BytesHashed += w.entries[i].Size
		w.progress(PhaseHash)
	}
	workers := w.opts.Workers
	if workers <= 0 {
		workers = min(4, runtime.GOMAXPROCS(0))
	}
	workers = max(1, min(workers, len(idx)))

	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	jobs := make(chan int)
	type result struct {
		i    int
		sum  string
		size int64
		err  error
	}
	results := make(chan result)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			buf := make([]byte, 256<<10)
			for i := range jobs {
				sum, size, err := hashFile(ctx, w.root, w.entries[i].Path, buf)
				select {
				case results <- result{i, sum, size, err}:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	go func() {
		defer close(jobs)
		for _, i := range idx {
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	var firstErr error
	for r := range results {
		if r.err != nil {
			if firstErr == nil {
				firstErr = r.err
				cancel()
			}
			continue
		}
		w.entries[r.i].SHA256 = r.sum
		w.entries[r.i].Size = r.size
		if st, ok := w.stats[w.entries[r.i].Path]; ok && st.size == r.size {
			w.cached[w.entries[r.i].Path] = cachedFile{st, r.sum}
		}
		w.prog.FilesHashed++
		w.prog.BytesHashed += r.size
		w.progress(PhaseHash)
	}
	if firstErr == nil {
		if err := w.ctx.Err(); err != nil {
			firstErr = fmt.Errorf("walk: %w", err)
		}
	}
	return firstErr
}

// hashFile streams one regular file through SHA-256. It refuses anything
// that is not a regular file by the time it is opened.
func hashFile(ctx context.Context, root *os.Root, rel string, buf []byte) (string, int64, error) {
	f, err := openRegular(root, rel)
	if err != nil {
		return "", 0, fmt.Errorf("hash %s: %w", rel, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, ctxio.Reader(ctx, f), buf)
	if err != nil {
		return "", 0, fmt.Errorf("hash %s: %w", rel, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// openRegular opens rel under root for reading without blocking on a fifo
// and fails unless it is a regular file.
func openRegular(root *os.Root, rel string) (*os.File, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("not a regular file any more (%s)", info.Mode().Type())
	}
	return f, nil
}

// HashFile returns the SHA-256 and size of the regular file rel under
// root, refusing to follow a link out of root. It is what Walk records.
func HashFile(ctx context.Context, root *os.Root, rel string) (sum string, size int64, err error) {
	return hashFile(ctx, root, rel, make([]byte, 256<<10))
}

// newWalker sets up a walk of r, for Walk and Rewalk: directories on up
// to opts.Workers goroutines (g, with the calling one), the stat data to
// remember when opts.Cache is set (start is when the walk began, for the
// racy window), the logger, and airlock.toml's excludes.
func newWalker(ctx context.Context, r *os.Root, opts WalkOptions) (w *walker, g *errgroup.Group, start time.Time) {
	g, gctx := errgroup.WithContext(ctx)
	workers := opts.Workers
	if workers <= 0 {
		workers = min(4, runtime.GOMAXPROCS(0))
	}
	g.SetLimit(workers - 1) // the calling goroutine walks too
	w = &walker{ctx: gctx, group: g, root: r, opts: opts, log: opts.Logger, report: &Report{}}
	if opts.Cache != nil {
		start = opts.Cache.clock()
		w.stats = make(map[string]fileStat)
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	for i, line := range opts.Excludes {
		if p, ok := parseIgnoreLine(line, ""); ok {
			p.source = fmt.Sprintf("airlock.toml exclude %d", i+1)
			w.config = append(w.config, p)
		}
	}
	return w, g, start
}
