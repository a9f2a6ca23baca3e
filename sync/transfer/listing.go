package transfer

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/internal/headtail"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// Known is a manifest of a guest directory that both ends hold: the host
// because it pushed or decoded it, the guest because it remembers it
// under ID (a manifest.State). Naming it in RemoteManifest lets only what
// changed since travel back. The zero Known names nothing.
type Known struct {
	ID       string
	Manifest *manifest.Manifest
	// Skipped is what the guest's walk left out that the user should hear
	// of (manifest.Noteworthy), and the files the host left out for their
	// size (manifest.LeaveOutLarge): untrusted text, for showing and the
	// audit log, and for manifest.KeepLeftOut.
	Skipped []manifest.Exclusion
	// guest is the manifest the guest remembers under ID, when it is not
	// Manifest (files over the size cap left out of Manifest): the base
	// of the next delta.
	guest *manifest.Manifest
}

// base returns the manifest the guest remembers under k.ID.
func (k Known) base() *manifest.Manifest {
	if k.guest != nil {
		return k.guest
	}
	return k.Manifest
}

// DefaultStateDir is where the guest keeps a manifest.State per
// collected directory: in memory (/run), readable by root only, so the agent
// (an unprivileged user) cannot tamper with it and nothing of it
// outlives the VM. StateDirEnv overrides it (tests that play the guest
// on the host).
const (
	DefaultStateDir = "/run/airlock/manifests"
	StateDirEnv     = "AIRLOCK_STATE_DIR"
)

// Seed tells the guest that dir now holds m, which the host has just
// pushed there, so the guest's first manifest of dir reads no file the
// command left alone (it remembers m's hashes with each file's stat data)
// and sends only the changes. It returns what both ends now know. A guest
// agent too old to be seeded is not an error: the zero Known comes back
// and RemoteManifest then lists the whole tree.
func Seed(ctx context.Context, r Remote, dir string, m *manifest.Manifest, opts Options) (Known, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(m.Encode(pw)) }()
	defer pr.Close()
	var stdout, stderr capped
	stdout.Max, stderr.Max = 4<<10, 16<<10
	err := r.Exec(ctx, command(opts.agent(), "manifest", "--seed", "--", dir), pr, &stdout, &stderr)
	if err != nil {
		if strings.Contains(stderr.String(), "flag provided but not defined") {
			opts.logger().Debug("guest agent cannot be seeded; collect will list the whole tree", "dir", dir)
			return Known{}, nil
		}
		return Known{}, fmt.Errorf("seed the guest's manifest of %s: %w%s", dir, err, stderr.suffix())
	}
	var out struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &out); err != nil || !validID(out.ID) {
		return Known{}, fmt.Errorf("seed the guest's manifest of %s: %w: answer %q", dir, ErrHostile, stdout.String())
	}
	return Known{ID: out.ID, Manifest: m}, nil
}

// validID reports whether id looks like one the guest makes: 32 hex digits.
func validID(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// RemoteManifest has the guest describe dir in one request: the guest
// agent's `manifest` subcommand walks it with the host's rules (.gitignore
// files, opts.Excludes, the secret deny-list, .git left out unless
// opts.Limits.AllowGit), reading only files whose stat data changed since
// the manifest it remembers, and answers with a manifest.Listing: only the
// changes when it still remembers since.ID, the whole tree otherwise. The
// answer is decoded as it streams in, with opts.Limits, and resolved into
// the full manifest, which is validated as hostile input whichever form
// it came in (paths, types, setuid bits dropped, caps on entries and
// total bytes). An honest guest stops early when a cap is hit; a
// dishonest one is cut off by the decoder. Errors wrap
// manifest.ErrInvalid or manifest.ErrTooLarge when the answer broke a
// rule. The zero since asks for the whole tree.
//
// With opts.Overlay, dir is an overlay on the baseline disk (the disk
// sync mode) and the guest lists only what its upper layer holds
// (WriteOverlayListing): since must then name the baseline (ID: the
// disk's identity, Manifest: the baseline manifest) to get a delta, and
// the Known returned names it again, for the next collect of the same
// sandbox. The answer is checked as any other.
//
// One file over the per-file cap sinks nothing: the guest leaves it out
// of its listing and names it in Skipped (manifest.ReasonTooLarge, with
// its size); a file over the cap that the listing holds all the same
// (a lying guest) is left out by the host, and named likewise, unless it
// is since's entry unchanged. Callers put the baseline back at those
// paths with manifest.KeepLeftOut.
func RemoteManifest(ctx context.Context, r Remote, dir string, since Known, opts Options) (Known, error) {
	args := []string{opts.agent(), "manifest"}
	if opts.Limits.AllowGit {
		args = append(args, "--include-git")
	}
	for _, x := range opts.Excludes {
		args = append(args, "--exclude", x)
	}
	// The guest stops early at the caps the host will enforce anyway.
	const unlimited = 1<<63 - 1
	c := capsOf(opts.Limits)
	if c.maxEntries < unlimited {
		args = append(args, "--max-entries", itoa(int64(c.maxEntries)))
	}
	if c.maxFile < unlimited {
		args = append(args, "--max-file-size", itoa(c.maxFile))
	}
	if c.maxTotal < unlimited {
		args = append(args, "--max-total-bytes", itoa(c.maxTotal))
	}
	if opts.Overlay.set() {
		args = append(args, "--overlay-lower", opts.Overlay.Lower, "--overlay-upper", opts.Overlay.Upper)
	}
	if since.ID != "" && since.Manifest != nil {
		args = append(args, "--since", since.ID)
	}
	if opts.FullWalk {
		args = append(args, "--full")
	}
	args = append(args, "--", dir)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	stderr := &capped{headtail.Head{Max: 16 << 10}}
	execErr := make(chan error, 1)
	go func() {
		err := r.Exec(ctx, command(args...), nil, pw, stderr)
		pw.CloseWithError(err) // nil: EOF
		execErr <- err
	}()
	var m *manifest.Manifest
	ls, derr := manifest.DecodeListing(pr, opts.Limits)
	if derr == nil {
		// The per-file cap leaves files out (below), it fails nothing.
		whole := opts.Limits
		whole.MaxFileSize = -1
		m, derr = ls.Resolve(since.ID, since.base(), whole)
	}
	if derr != nil {
		pr.CloseWithError(derr) // stops the guest's output
		cancel()
	}
	eerr := <-execErr
	switch {
	case derr != nil && (errors.Is(derr, manifest.ErrInvalid) || errors.Is(derr, manifest.ErrTooLarge)):
		return Known{}, fmt.Errorf("manifest of guest %s: %w", dir, derr)
	case eerr != nil && !errors.Is(eerr, context.Canceled):
		return Known{}, fmt.Errorf("manifest of guest %s: %w%s", dir, eerr, stderr.suffix())
	case derr != nil:
		return Known{}, fmt.Errorf("manifest of guest %s: %w%s", dir, derr, stderr.suffix())
	}
	k := Known{Manifest: m, Skipped: ls.Skipped}
	if kept, left := manifest.LeaveOutLarge(m, since.base(), opts.Limits); len(left) > 0 {
		k.Manifest, k.guest = kept, m
		k.Skipped = append(slices.Clone(k.Skipped), left...)
		slices.SortFunc(k.Skipped, func(a, b manifest.Exclusion) int { return strings.Compare(a.Path, b.Path) })
	}
	switch {
	case opts.Overlay.set():
		// A delta from an overlay is against the baseline, every time:
		// the next one is too, whatever this one held.
		if ls.Base != "" {
			k.ID, k.guest = since.ID, since.base()
		}
	case validID(ls.ID):
		k.ID = ls.ID
	}
	opts.logger().Debug("remote manifest", "dir", dir, "entries", len(m.Entries), "delta", ls.Base != "",
		"changed", len(ls.Changed), "deleted", len(ls.Deleted))
	return k, nil
}

// ListingOptions configures WriteListing, the guest's end of
// RemoteManifest.
type ListingOptions struct {
	// Walk holds the rules of the walk (excludes, .git, progress for caps).
	Walk manifest.WalkOptions
	// Since is the ID of the manifest the host holds: when the guest's
	// state has that ID, only the delta is written.
	Since string
	// StateDir is where the state of each directory is kept; empty means
	// DefaultStateDir, or $AIRLOCK_STATE_DIR when set.
	StateDir string
	// Full walks the whole tree even when the directory's watcher can
	// tell which paths changed (see Watch for what it cannot see).
	Full bool
	// Logger receives how the tree was walked (whole, and why, or the
	// touched paths only) and warnings (a state that could not be kept);
	// nil discards them.
	Logger *slog.Logger
}

func (o ListingOptions) stateFile(dir string) (string, error) {
	sd := o.StateDir
	if sd == "" {
		sd = os.Getenv(StateDirEnv)
	}
	if sd == "" {
		sd = DefaultStateDir
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(sd, 0o700); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(sd, hex.EncodeToString(sum[:16])), nil
}

// inGuest reports whether states are kept where the guest keeps them
// (not a test's directory on a host): a watcher may raise the system's
// limits there.
func (o ListingOptions) inGuest() bool {
	return o.StateDir == "" && os.Getenv(StateDirEnv) == ""
}

// newID names a new state: random, so two states never share a name.
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// rulesOf fingerprints the options that decide what a walk keeps, for
// State.Rules.
func rulesOf(wo manifest.WalkOptions) string {
	b, _ := json.Marshal(struct {
		Excludes             []string
		IncludeGit, NoIgnore bool
		MaxFileSize          int64
	}{wo.Excludes, wo.IncludeGit, wo.NoGitignore, wo.MaxFileSize})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// WriteListing walks dir and writes its manifest.Listing to w: the delta
// against the remembered state when that state is o.Since, the whole
// manifest otherwise. The new manifest becomes the remembered state,
// with the stat data that lets the next walk skip unchanged files. A
// state that cannot be read is ignored (the walk hashes everything); one
// that cannot be written costs only speed next time.
//
// When the directory's watcher (started by SeedState) vouches for the
// paths touched since the state was taken, only those are looked at
// (manifest.Rewalk), with the same result as a whole walk. Whenever it
// cannot (no watcher answers, it lost events, the state is not the one
// it watched, a .gitignore changed, the rules differ, o.Full) the whole
// tree is walked.
func WriteListing(ctx context.Context, dir string, o ListingOptions, w io.Writer) error {
	file, ferr := o.stateFile(dir)
	var prev *manifest.State
	if ferr == nil {
		prev, _ = manifest.ReadStateFile(file)
	}
	cache := &manifest.HashCache{}
	if prev != nil {
		cache = prev.Cache
	}
	wo := o.Walk
	wo.Cache = cache
	rules := rulesOf(o.Walk)
	ls := manifest.Listing{ID: newID()}

	// The watcher starts the new generation now, before the walk: what
	// changes from here on is the next collect's.
	var touched []manifest.Touched
	why := "no state"
	if ferr == nil {
		prevID := ""
		if prev != nil {
			prevID = prev.ID
		}
		var err error
		touched, err = takeTouched(ctx, file, prevID, ls.ID)
		switch {
		case err != nil:
			why = err.Error()
		case prev == nil:
		case prev.Rules != "" && prev.Rules != rules:
			why = "the rules differ from the last walk's"
		case o.Full:
			why = "asked to"
		default:
			why = ""
		}
	}
	var (
		m      *manifest.Manifest
		report *manifest.Report
		err    error
	)
	if why == "" {
		m, report, err = manifest.Rewalk(ctx, dir, prev.Manifest, prev.Skipped, touched, wo)
		if o.Logger != nil {
			o.Logger.Info("looked at the paths the watcher saw touched", "dir", dir, "paths", len(touched))
		}
	} else {
		m, report, err = manifest.Walk(ctx, dir, wo)
		if o.Logger != nil {
			o.Logger.Info("walked the whole tree", "dir", dir, "why", why)
		}
	}
	if err != nil {
		return err
	}
	ls.Skipped = manifest.Noteworthy(report.Excluded)
	if prev != nil && o.Since != "" && prev.ID == o.Since {
		d := manifest.DeltaOf(prev.Manifest, m)
		ls.Base, ls.Changed, ls.Deleted = o.Since, d.Changed, d.Deleted
	} else {
		ls.Entries = m.Entries
	}
	if ferr == nil {
		ferr = manifest.WriteStateFile(file, &manifest.State{ID: ls.ID, Manifest: m, Cache: cache,
			Skipped: manifest.NoteworthyAll(report.Excluded), Rules: rules})
	}
	if ferr != nil {
		ls.ID = "" // nothing remembered: the host must not name it
		if o.Logger != nil {
			o.Logger.Warn("the next manifest will list everything", "dir", dir, "err", ferr)
		}
	}
	return ls.Encode(w)
}

// SeedOptions configures SeedState.
type SeedOptions struct {
	// StateDir is as in ListingOptions.
	StateDir string
	// StartWatcher, when set, starts a watcher of dir (see Watch and
	// SpawnWatcher) serving socket, for the state named generation, and
	// returns once it is ready. Nil: collects walk the whole tree.
	StartWatcher func(ctx context.Context, dir, socket, generation string, raiseLimits bool) error
	// Logger receives a warning when no watcher could be started; nil
	// discards it.
	Logger *slog.Logger
}

// SeedState is the guest's end of Seed: it reads from r the manifest the
// host has just pushed into dir, remembers it as dir's state with the stat
// data of the files that match it, and writes the state's ID to w as
// {"id": "…"}. It stops the watcher of dir's previous state, if any, and
// starts one for the new state (o.StartWatcher) before it looks at the
// tree, so that nothing the command does afterwards goes unseen.
func SeedState(ctx context.Context, dir string, o SeedOptions, r io.Reader, w io.Writer) error {
	m, err := manifest.Decode(r, manifest.Limits{MaxEntries: -1, MaxFileSize: -1, MaxTotalBytes: -1, CaseSensitive: true})
	if err != nil {
		return fmt.Errorf("seed %s: %w", dir, err)
	}
	lo := ListingOptions{StateDir: o.StateDir}
	file, err := lo.stateFile(dir)
	if err != nil {
		return fmt.Errorf("seed %s: %w", dir, err)
	}
	stopWatcher(ctx, file) // the old state's; an error means there was none
	id := newID()
	watching := false
	if o.StartWatcher != nil {
		abs, err := filepath.Abs(dir)
		if err == nil {
			err = o.StartWatcher(ctx, abs, watchSocket(file), id, lo.inGuest())
		}
		watching = err == nil
		if err != nil && o.Logger != nil {
			o.Logger.Warn("no watcher: collects will walk the whole tree", "dir", dir, "err", err)
		}
	}
	cache := &manifest.HashCache{}
	exact, err := cache.SeedExact(ctx, dir, m)
	if err == nil && !exact && watching {
		// What is there is not what the host pushed: only a whole walk
		// finds out what it is.
		stopWatcher(ctx, file)
	}
	if err == nil {
		err = manifest.WriteStateFile(file, &manifest.State{ID: id, Manifest: m, Cache: cache})
	}
	if err != nil {
		if watching {
			stopWatcher(ctx, file)
		}
		return fmt.Errorf("seed %s: %w", dir, err)
	}
	return json.NewEncoder(w).Encode(struct {
		ID string `json:"id"`
	}{id})
}
