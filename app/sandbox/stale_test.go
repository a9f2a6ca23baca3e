package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// TestStaleness: a sandbox knows when its baseline was taken and what it
// held; once the project moves on, Staleness counts how far, by content
// (an edit that keeps the size counts), with the snapshot's rules (a
// secret or an ignored file changing does not).
func TestStaleness(t *testing.T) {
	s := newStore(t)
	project := t.TempDir()
	writeTree(t, project, map[string]string{
		"a.txt": "first line\n", "b.txt": "one\ntwo\nthree\n", ".env": "TOKEN=secret\n", ".gitignore": "build/\n",
	})
	sb, meta := snapshotSandbox(t, s, project)
	st, err := sb.Staleness(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Behind() != 0 || !strings.HasPrefix(st.String(), "baseline is current") {
		t.Fatalf("untouched project: %+v (%s)", st, st)
	}

	// The project moves on: same-size edit, an added and a deleted file,
	// plus changes the snapshot never looks at.
	writeTree(t, project, map[string]string{
		"a.txt":         "first LINE\n",
		"new.txt":       "hello\n",
		".env":          "TOKEN=other\n",
		"build/out.bin": "ignored\n",
	})
	if err := os.Remove(filepath.Join(project, "b.txt")); err != nil {
		t.Fatal(err)
	}
	base := meta.BaselineTime
	s.now = func() time.Time { return base.Add(15*time.Minute + 10*time.Second) }
	st, err = sb.Staleness(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Modified != 1 || st.Added != 1 || st.Deleted != 1 {
		t.Errorf("staleness %+v, want 1 modified, 1 added, 1 deleted", st)
	}
	if want := []string{"a.txt", "b.txt", "new.txt"}; strings.Join(st.Paths, ",") != strings.Join(want, ",") {
		t.Errorf("paths %v, want %v", st.Paths, want)
	}
	if want := "baseline is 15 minutes and 3 files behind the project (1 modified, 1 added, 1 deleted)"; st.String() != want {
		t.Errorf("got %q\nwant %q", st.String(), want)
	}
}

func TestAgo(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Second:  "5 seconds",
		time.Minute:      "1 minute",
		90 * time.Minute: "1 hour",
		30 * time.Hour:   "30 hours",
		72 * time.Hour:   "3 days",
	} {
		if got := ago(d); got != want {
			t.Errorf("ago(%v) = %q, want %q", d, got, want)
		}
	}
}

// snapshotSandbox makes a sandbox whose baseline is project as it is
// now, walked with a run's rules, as a run records it.
func snapshotSandbox(t *testing.T, s *Store, project string) (*Sandbox, Meta) {
	t.Helper()
	base, _, err := manifest.Walk(context.Background(), project, manifest.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := base.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	sb, err := s.Create(Meta{Project: project})
	if err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteFile(sb.Path(BaselineFile), buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := sb.Update(func(m *Meta) { m.Baseline, m.BaselineTime, m.Status = BaselineFile, s.Now().UTC(), StatusReady })
	if err != nil {
		t.Fatal(err)
	}
	return sb, m
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
