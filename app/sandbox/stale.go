package sandbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// maxStalePaths bounds how many of the project's moved-on paths a
// Staleness names; the counts are always complete.
const maxStalePaths = 20

// Staleness is how far the real project has moved on since a sandbox's
// baseline was taken: the project walked now, with the snapshot's rules,
// against the stored baseline manifest.
type Staleness struct {
	// Baseline is when the baseline was taken.
	Baseline time.Time `json:"baseline_time"`
	// Checked is when the project was compared with it.
	Checked time.Time `json:"checked"`
	// Modified, Added and Deleted count the project's paths that differ
	// from the baseline (a rename counts as one modified path).
	Modified int `json:"modified"`
	Added    int `json:"added"`
	Deleted  int `json:"deleted"`
	// Paths names the first paths that differ, sorted.
	Paths []string `json:"paths,omitempty"`
}

// Behind is how many paths of the project differ from the baseline.
func (s Staleness) Behind() int { return s.Modified + s.Added + s.Deleted }

// Age is how old the baseline was when the project was checked.
func (s Staleness) Age() time.Duration { return s.Checked.Sub(s.Baseline) }

// String says it for people: "baseline is 15 minutes and 3 files behind
// the project (2 modified, 1 added)", or that it is current.
func (s Staleness) String() string {
	if s.Behind() == 0 {
		return "baseline is current: the project has not changed since " + s.Baseline.Local().Format("15:04")
	}
	var parts []string
	for _, p := range []struct {
		n    int
		word string
	}{{s.Modified, "modified"}, {s.Added, "added"}, {s.Deleted, "deleted"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.word))
		}
	}
	files := "files"
	if s.Behind() == 1 {
		files = "file"
	}
	return fmt.Sprintf("baseline is %s and %d %s behind the project (%s)", ago(s.Age()), s.Behind(), files, strings.Join(parts, ", "))
}

// ago is a duration as "15 minutes", "2 hours", "3 days".
func ago(d time.Duration) string {
	unit := func(n int, one string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %ss", n, one)
	}
	switch {
	case d < time.Minute:
		return unit(int(d/time.Second), "second")
	case d < time.Hour:
		return unit(int(d/time.Minute), "minute")
	case d < 48*time.Hour:
		return unit(int(d/time.Hour), "hour")
	default:
		return unit(int(d/(24*time.Hour)), "day")
	}
}

// Staleness compares the real project, as it is now, with the sandbox's
// baseline. The project is walked with the rules its snapshot used (its
// .gitignore, airlock.toml's excludes and the secret deny-list) and every
// file is hashed, so an edit that keeps a file's size is seen too. It
// reads the project only; it needs no VM.
func (sb *Sandbox) Staleness(ctx context.Context) (Staleness, error) {
	m, err := sb.Meta()
	if err != nil {
		return Staleness{}, err
	}
	base, err := sb.ReadManifest(BaselineFile, true)
	if err != nil {
		return Staleness{}, err
	}
	cfg, err := config.Load(m.Project)
	if err != nil {
		return Staleness{}, fmt.Errorf("staleness of %s: %w", sb.ID, err)
	}
	now, _, err := manifest.Walk(ctx, m.Project, manifest.WalkOptions{Excludes: cfg.Exclude})
	if err != nil {
		return Staleness{}, fmt.Errorf("staleness of %s: walk the project: %w", sb.ID, err)
	}
	st := Staleness{Baseline: m.BaselineTime, Checked: sb.store.now().UTC()}
	if st.Baseline.IsZero() { // sandboxes from before the time was recorded
		st.Baseline = m.Created
	}
	for _, c := range manifest.Diff(WithoutMeta(base), WithoutMeta(now)) {
		switch c.Kind {
		case manifest.Added:
			st.Added++
		case manifest.Deleted:
			st.Deleted++
		default:
			st.Modified++
		}
		if len(st.Paths) < maxStalePaths {
			st.Paths = append(st.Paths, c.Path)
		}
	}
	return st, nil
}
