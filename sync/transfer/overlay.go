package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// The baseline disk of the disk sync mode holds, at its root, the
// baseline's identity and its tree: the overlay's lower layer.
const (
	// BaselineIDFile holds the baseline's identity: 64 lower-case hex
	// digits (a newline after them is allowed).
	BaselineIDFile = "id"
	// BaselineTreeDir holds exactly the baseline manifest's entries.
	BaselineTreeDir = "tree"
)

// maxIDFile caps how much of BaselineIDFile is read.
const maxIDFile = 128

// OverlayDirs names, in the guest, the layers of the overlay mounted at
// the directory being collected (the disk sync mode): RemoteManifest then
// has the guest list only what the upper layer holds
// (WriteOverlayListing). The zero OverlayDirs names none.
type OverlayDirs struct {
	// Lower is where the baseline disk is mounted: it holds
	// BaselineIDFile and BaselineTreeDir, the overlay's lowerdir.
	Lower string
	// Upper is the overlay's upperdir.
	Upper string
}

func (d OverlayDirs) set() bool { return d.Lower != "" || d.Upper != "" }

// OverlayListingOptions configures WriteOverlayListing.
type OverlayListingOptions struct {
	// Walk holds the rules of the walk (excludes, .git, the per-file cap,
	// progress for caps), as in ListingOptions. Its Cache is not used.
	Walk manifest.WalkOptions
	// LowerDisk is the root of the baseline disk: it holds BaselineIDFile
	// and BaselineTreeDir, the overlay's lowerdir.
	LowerDisk string
	// Upper is the overlay's upperdir (mounted with redirect_dir=off,
	// metacopy=off, index=off).
	Upper string
	// Since is the baseline's identity as the host knows it: when it is
	// LowerDisk's, only the changes against the baseline are written.
	Since string
	// MaxEntries, when positive, stops the walk of the upper layer, with
	// manifest.ErrTooLarge, when it holds more than twice that many
	// entries: each is an entry of the tree or a deletion of the
	// baseline's, and the host takes neither tree over MaxEntries.
	MaxEntries int
	// Logger receives how the tree was walked; nil discards it.
	Logger *slog.Logger
}

func (o OverlayListingOptions) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// WriteOverlayListing writes to w the manifest.Listing of merged, an
// overlay whose lower layer is the baseline disk at o.LowerDisk and whose
// upper layer is o.Upper. When o.Since is the disk's identity
// (BaselineIDFile), the listing is the delta against the baseline, with
// ID and Base both o.Since: nothing is remembered in the guest, and the
// host may name the same baseline on every collect of the sandbox.
// Otherwise (no Since, another baseline, an identity that is not 64 hex
// digits) it is the whole tree, with no ID.
//
// What changed is exactly what the upper layer holds: only it is walked
// (never following a link), and only the paths it holds are looked at in
// the baseline and in merged (manifest.Rewalk), with the rules of the
// walk, so the result is what a whole walk of merged would give. A
// copy-up whose content, type and mode are the baseline's is no change.
// A .gitignore whose patterns changed has its directory looked at whole
// in both trees (the whole trees for the root's, or .git/info/exclude).
// Skipped names what the walk left out at those paths that the user
// should hear of (manifest.Noteworthy): special files, files over the
// per-file cap (a baseline file over it reads as deleted and skipped, as
// WriteListing has it, and the host puts the baseline's back).
func WriteOverlayListing(ctx context.Context, merged string, o OverlayListingOptions, w io.Writer) error {
	log := o.logger()
	wo := o.Walk
	wo.Cache = nil
	id, err := readBaselineID(o.LowerDisk)
	why := ""
	switch {
	case o.Since == "":
		why = "no baseline named"
	case err != nil:
		why = err.Error()
	case id != o.Since:
		why = "the disk holds another baseline"
	}
	if why != "" {
		m, report, err := manifest.Walk(ctx, merged, wo)
		if err != nil {
			return err
		}
		log.Info("walked the whole tree", "dir", merged, "why", why)
		ls := manifest.Listing{Entries: m.Entries, Skipped: manifest.Noteworthy(report.Excluded)}
		return ls.Encode(w)
	}
	d, excluded, err := overlayDelta(ctx, merged, o)
	if err != nil {
		return err
	}
	ls := manifest.Listing{ID: id, Base: id, Changed: d.Changed, Deleted: d.Deleted, Skipped: manifest.Noteworthy(excluded)}
	return ls.Encode(w)
}

// readBaselineID returns the identity in dir's BaselineIDFile: a regular
// file (not a link) of 64 lower-case hex digits.
func readBaselineID(dir string) (string, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return "", fmt.Errorf("read the baseline's identity: %w", err)
	}
	defer r.Close()
	li, err := r.Lstat(BaselineIDFile)
	if err != nil {
		return "", fmt.Errorf("read the baseline's identity: %w", err)
	}
	if !li.Mode().IsRegular() {
		return "", fmt.Errorf("read the baseline's identity: %s is not a regular file (%s)", BaselineIDFile, li.Mode().Type())
	}
	f, err := r.OpenFile(BaselineIDFile, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return "", fmt.Errorf("read the baseline's identity: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !os.SameFile(li, fi) {
		return "", fmt.Errorf("read the baseline's identity: %s changed while it was opened", BaselineIDFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxIDFile+1))
	if err != nil {
		return "", fmt.Errorf("read the baseline's identity: %w", err)
	}
	if len(b) > maxIDFile {
		return "", fmt.Errorf("read the baseline's identity: %s is over %d bytes", BaselineIDFile, maxIDFile)
	}
	id := strings.TrimSpace(string(b))
	if !validBaselineID(id) {
		return "", fmt.Errorf("read the baseline's identity: %q is not 64 lower-case hex digits", id)
	}
	return id, nil
}

// validBaselineID reports whether id is 64 lower-case hex digits.
func validBaselineID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for _, c := range []byte(id) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// overlayDelta returns how merged differs from the baseline tree, from
// the paths the upper layer holds, and the exclusions of merged's walk at
// those paths.
func overlayDelta(ctx context.Context, merged string, o OverlayListingOptions) (manifest.Delta, []manifest.Exclusion, error) {
	log := o.logger()
	tree := filepath.Join(o.LowerDisk, BaselineTreeDir)
	lower, err := os.OpenRoot(tree)
	if err != nil {
		return manifest.Delta{}, nil, fmt.Errorf("open the baseline tree: %w", err)
	}
	defer lower.Close()
	up, err := readUpper(ctx, o.Upper, lower, 2*o.MaxEntries)
	if err != nil {
		return manifest.Delta{}, nil, err
	}
	touched := up.touched
	if !o.Walk.NoGitignore {
		mr, err := os.OpenRoot(merged)
		if err != nil {
			return manifest.Delta{}, nil, fmt.Errorf("walk %s: %w", merged, err)
		}
		defer mr.Close()
		for _, dir := range rulesChanged(lower, mr, touched) {
			touched = append(touched, manifest.Touched{Path: dir, Subtree: true})
		}
	}

	mo := o.Walk
	mo.Cache = nil
	lo := mo
	lo.Progress = nil // the baseline's tree is not the agent's
	var (
		lowerM, mergedM *manifest.Manifest
		lowerR, mergedR *manifest.Report
	)
	if slices.ContainsFunc(touched, func(t manifest.Touched) bool { return t.Path == "" }) {
		lowerM, lowerR, err = manifest.Walk(ctx, tree, lo)
		if err == nil {
			mergedM, mergedR, err = manifest.Walk(ctx, merged, mo)
		}
		log.Info("walked both trees whole: the root's rules changed, or the upper layer hides the baseline", "dir", merged)
	} else {
		// Every directory Rewalk is to look at only as an entry must be
		// a directory of prev (else it walks it whole), and every parent
		// of a touched path must be one (else the path reads as
		// excluded). The directories the upper layer holds that are the
		// baseline's are both: every ancestor of a path in the upper
		// layer is in it. Their modes do not matter: each is touched, so
		// each walk replaces it with what it finds.
		prev := &manifest.Manifest{Entries: make([]manifest.Entry, 0, len(up.dirs))}
		for _, d := range up.dirs {
			prev.Entries = append(prev.Entries, manifest.Entry{Path: d, Type: manifest.Dir, Mode: manifest.ImpliedDirMode})
		}
		prev.Sort()
		lowerM, lowerR, err = manifest.Rewalk(ctx, tree, prev, nil, touched, lo)
		if err == nil {
			mergedM, mergedR, err = manifest.Rewalk(ctx, merged, prev, nil, touched, mo)
		}
		log.Info("looked at the paths the upper layer holds", "dir", merged, "paths", len(touched))
	}
	if err != nil {
		return manifest.Delta{}, nil, err
	}
	return manifest.DeltaOf(withLeftOut(lowerM, lowerR.Excluded), mergedM), mergedR.Excluded, nil
}

// withLeftOut returns m with an entry for each file the walk left out
// for its size: a baseline file over the cap is then deleted unless
// merged holds it within the cap, as against WriteListing's state, which
// holds the host's entry; when merged leaves it out too, Skipped names
// it and the host keeps the baseline's.
func withLeftOut(m *manifest.Manifest, excluded []manifest.Exclusion) *manifest.Manifest {
	var add []manifest.Entry
	for _, x := range excluded {
		if x.Reason == manifest.ReasonTooLarge {
			add = append(add, manifest.Entry{Path: x.Path, Type: manifest.File, Size: x.Size})
		}
	}
	if len(add) == 0 {
		return m
	}
	out := &manifest.Manifest{Entries: append(slices.Clone(m.Entries), add...)}
	out.Sort()
	return out
}

// upperLayer is what an overlay's upper layer holds.
type upperLayer struct {
	// touched is every path the upper layer holds, and where it does not
	// merge with the baseline's, Subtree: a whiteout, an opaque directory,
	// a directory that is not one in the baseline.
	touched []manifest.Touched
	// dirs holds the directories the upper layer merges with the
	// baseline's (touched without Subtree).
	dirs []string
}

// readUpper walks the upper layer at dir, never following a link and
// never entering a directory that does not merge with the baseline's
// (lower). It fails with manifest.ErrTooLarge past max entries, when max
// is positive.
func readUpper(ctx context.Context, dir string, lower *os.Root, max int) (*upperLayer, error) {
	if err := canReadTrusted(); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("read the upper layer: %w", err)
	}
	defer r.Close()
	f, err := r.Open(".")
	if err != nil {
		return nil, fmt.Errorf("read the upper layer: %w", err)
	}
	defer f.Close()
	u := &upperWalk{ctx: ctx, top: dir, lower: lower, max: max}
	opaque, err := isOpaque(f)
	if err != nil {
		return nil, fmt.Errorf("read the upper layer %s: %w", dir, err)
	}
	if opaque {
		// The whole baseline is hidden.
		u.out.touched = []manifest.Touched{{Path: "", Subtree: true}}
		return &u.out, nil
	}
	if err := u.dir("", r, f); err != nil {
		return nil, err
	}
	return &u.out, nil
}

type upperWalk struct {
	ctx   context.Context
	top   string
	lower *os.Root
	max   int
	n     int
	out   upperLayer
}

// dir records the children of rel, opened as d (and f, its directory).
func (u *upperWalk) dir(rel string, d *os.Root, f *os.File) error {
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read the upper layer %s: %w", path.Join(u.top, rel), err)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := u.ctx.Err(); err != nil {
			return fmt.Errorf("read the upper layer: %w", err)
		}
		p := name
		if rel != "" {
			p = rel + "/" + name
		}
		u.n++
		if u.max > 0 && u.n > u.max {
			return fmt.Errorf("the upper layer %s holds more than %d entries: %w", u.top, u.max, manifest.ErrTooLarge)
		}
		info, err := d.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read the upper layer %s: %w", path.Join(u.top, p), err)
		}
		switch {
		case isWhiteout(info):
			u.out.touched = append(u.out.touched, manifest.Touched{Path: p, Subtree: true})
		case info.IsDir():
			merges, err := u.subdir(p, d, name)
			if err != nil {
				return err
			}
			u.out.touched = append(u.out.touched, manifest.Touched{Path: p, Subtree: !merges})
		default:
			u.out.touched = append(u.out.touched, manifest.Touched{Path: p})
		}
	}
	return nil
}

// subdir looks at the directory name of d, at p, and walks it when it
// merges with a directory of the baseline (which it reports).
func (u *upperWalk) subdir(p string, d *os.Root, name string) (bool, error) {
	if li, err := u.lower.Lstat(p); err != nil || !li.IsDir() {
		return false, nil // new, or in place of something else
	}
	sub, err := d.OpenRoot(name)
	if err != nil {
		return false, fmt.Errorf("read the upper layer %s: %w", path.Join(u.top, p), err)
	}
	defer sub.Close()
	f, err := sub.Open(".")
	if err != nil {
		return false, fmt.Errorf("read the upper layer %s: %w", path.Join(u.top, p), err)
	}
	defer f.Close()
	opaque, err := isOpaque(f)
	if err != nil {
		return false, fmt.Errorf("read the upper layer %s: %w", path.Join(u.top, p), err)
	}
	if opaque {
		return false, nil
	}
	u.out.dirs = append(u.out.dirs, p)
	return true, u.dir(p, sub, f)
}

// rulesChanged returns the directories whose rules of the walk the
// touched paths changed: that of each .gitignore whose patterns differ
// from the baseline's, "" (the root) for .git/info/exclude. The walk of
// each must look at it whole, in both trees.
func rulesChanged(lower, merged *os.Root, touched []manifest.Touched) []string {
	var out []string
	for _, t := range touched {
		switch {
		case t.Path == "":
			out = append(out, "")
		case t.Path == ".git" || t.Path == ".git/info" || t.Path == ".git/info/exclude":
			// Read as the walk reads it: links inside the tree followed,
			// a file that cannot be read holds no pattern.
			a, _ := lower.ReadFile(".git/info/exclude")
			b, _ := merged.ReadFile(".git/info/exclude")
			if !samePatterns(a, b) {
				out = append(out, "")
			}
		case path.Base(t.Path) == ".gitignore":
			if !samePatterns(readGitignore(lower, t.Path), readGitignore(merged, t.Path)) {
				out = append(out, path.Dir(t.Path))
			}
		}
	}
	for i, d := range out {
		if d == "." {
			out[i] = ""
		}
	}
	return out
}

// readGitignore reads a .gitignore as the walk does: a regular file, or
// nothing.
func readGitignore(r *os.Root, p string) []byte {
	if info, err := r.Lstat(p); err != nil || !info.Mode().IsRegular() {
		return nil
	}
	b, err := r.ReadFile(p)
	if err != nil {
		return []byte("\x00unreadable") // never the same as another
	}
	return b
}

// samePatterns reports whether two gitignore files hold the same patterns
// in the same order: they may differ only in blank lines, comments and
// line endings (what git reads as no pattern; anything else that may be
// none counts as a difference).
func samePatterns(a, b []byte) bool {
	return slices.Equal(patternLines(a), patternLines(b))
}

func patternLines(data []byte) []string {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		out = append(out, line)
	}
	return out
}
