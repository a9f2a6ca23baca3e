package transfer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
	"github.com/airlock-dev/airlock/sync/transfer"
)

// recording runs scripts on the host like localRemote and keeps what the
// last one printed.
func recording(t *testing.T, last *bytes.Buffer) *localRemote {
	return &localRemote{t: t, exec: func(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error {
		last.Reset()
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, io.MultiWriter(stdout, last), stderr
		return cmd.Run()
	}}
}

// After a push and a seed, the guest answers with only the changes, and
// the host's resolved manifest is exactly a fresh walk of the tree; a host
// that names a state the guest no longer holds gets the whole tree.
func TestSeedThenDelta(t *testing.T) {
	var out bytes.Buffer
	r := recording(t, &out)
	base, ws, known, opts := pushAndSeed(t, r)
	if len(known.ID) != 32 || known.Manifest != base {
		t.Fatalf("seed gave %+v", known)
	}

	must(t, os.WriteFile(filepath.Join(ws, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644))
	must(t, os.Remove(filepath.Join(ws, "README.md")))
	must(t, os.Chmod(filepath.Join(ws, "run.sh"), 0o644))
	must(t, os.Symlink("../main.go", filepath.Join(ws, "src/main-link")))

	k2, err := transfer.RemoteManifest(t.Context(), r, ws, known, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"base":"`+known.ID+`"`) || strings.Contains(out.String(), `"entries"`) {
		t.Errorf("the guest did not answer with a delta:\n%s", out.String())
	}
	if n := strings.Count(out.String(), `"path"`); n != 3 {
		t.Errorf("the delta carries %d entries, want 3 (main.go, run.sh, src/main-link):\n%s", n, out.String())
	}
	want := walk(t, ws)
	if diff := cmp.Diff(want, k2.Manifest); diff != "" {
		t.Fatalf("resolved manifest differs from a walk (-want +got):\n%s", diff)
	}
	if len(k2.ID) != 32 || k2.ID == known.ID {
		t.Errorf("new state %q after %q", k2.ID, known.ID)
	}

	// The guest now holds k2: naming the seed's state again gets the
	// whole tree, still right.
	k3, err := transfer.RemoteManifest(t.Context(), r, ws, known, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"entries"`) || strings.Contains(out.String(), `"base"`) {
		t.Errorf("a stale state was answered with a delta:\n%s", out.String())
	}
	if diff := cmp.Diff(want, k3.Manifest); diff != "" {
		t.Fatalf("whole manifest differs from a walk (-want +got):\n%s", diff)
	}
	// And nothing changed since k3.
	k4, err := transfer.RemoteManifest(t.Context(), r, ws, k3, opts)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), `"path"`) {
		t.Errorf("an unchanged tree was answered with entries:\n%s", out.String())
	}
	if diff := cmp.Diff(want, k4.Manifest); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// A delta is hostile input like a whole manifest: one that escapes the
// tree, names a state the host does not hold, or deletes what was never
// there is refused.
func TestHostileDelta(t *testing.T) {
	base, _ := baseline(t)
	known := transfer.Known{ID: "0123456789abcdef0123456789abcdef", Manifest: base}
	file := `"type":"file","mode":420,"size":2,` + sumA
	for _, tc := range []struct{ name, out string }{
		{"dot-dot", `{"id":"x","base":"` + known.ID + `","changed":[{"path":"../etc/passwd",` + file + `}]}`},
		{"other-base", `{"id":"x","base":"ffffffffffffffffffffffffffffffff","changed":[{"path":"new",` + file + `}]}`},
		{"delete-unknown", `{"id":"x","base":"` + known.ID + `","deleted":["no-such-file"]}`},
		{"dir-becomes-link", `{"id":"x","base":"` + known.ID + `","changed":[{"path":"src","type":"symlink","mode":511,"target":"/etc"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := transfer.RemoteManifest(t.Context(), lyingGuest(t, tc.out), "/workspace", known, transfer.Options{})
			if !errors.Is(err, manifest.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
}

// An image built before seeding existed has a guest agent that refuses
// the flag: collect then lists the whole tree, as before.
func TestSeedOldGuest(t *testing.T) {
	r := &localRemote{t: t, exec: func(ctx context.Context, _ string, _ io.Reader, _, stderr io.Writer) error {
		io.WriteString(stderr, "flag provided but not defined: -seed\n")
		return errors.New("exit status 2")
	}}
	k, err := transfer.Seed(t.Context(), r, "/workspace", &manifest.Manifest{}, transfer.Options{})
	if err != nil || k.ID != "" {
		t.Fatalf("got %+v, %v; want the zero Known and no error", k, err)
	}
}

// BenchmarkWriteListing times the guest's end of a collect, run on the
// host: a 100,000-file tree (1,000 directories of 100 small files),
// seeded, 10 files edited, then WriteListing against the seeded state
// (read the state, walk with its stat data, write the delta and the new
// state). Set AIRLOCK_BENCH_DIR to put the tree on another file system.
func BenchmarkWriteListing(b *testing.B) {
	dir := filepath.Join(benchDir(b), "tree")
	for d := range 1000 {
		dp := filepath.Join(dir, "d"+strconv.Itoa(d))
		if err := os.MkdirAll(dp, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := range 100 {
			if err := os.WriteFile(filepath.Join(dp, "f"+strconv.Itoa(i)+".txt"), []byte("file "+strconv.Itoa(d)+"/"+strconv.Itoa(i)+"\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	old := time.Now().Add(-time.Hour)
	filepath.WalkDir(dir, func(p string, _ fs.DirEntry, _ error) error { return os.Chtimes(p, old, old) })
	m, _, err := manifest.Walk(context.Background(), dir, manifest.WalkOptions{})
	if err != nil {
		b.Fatal(err)
	}
	state := b.TempDir()
	var seed bytes.Buffer
	if err := m.Encode(&seed); err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	if err := transfer.SeedState(context.Background(), dir, transfer.SeedOptions{StateDir: state}, &seed, &out); err != nil {
		b.Fatal(err)
	}
	var ls struct{ ID string }
	json.Unmarshal(out.Bytes(), &ls)
	for k := range 10 {
		f, _ := os.OpenFile(filepath.Join(dir, "d"+strconv.Itoa(k*100), "f7.txt"), os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString("changed\n")
		f.Close()
	}
	for b.Loop() {
		out.Reset()
		if err := transfer.WriteListing(context.Background(), dir, transfer.ListingOptions{Since: ls.ID, StateDir: state}, &out); err != nil {
			b.Fatal(err)
		}
		if err := json.Unmarshal(out.Bytes(), &ls); err != nil {
			b.Fatal(err)
		}
	}
}

// benchDir is AIRLOCK_BENCH_DIR, or a temporary directory.
func benchDir(b *testing.B) string {
	if d := os.Getenv("AIRLOCK_BENCH_DIR"); d != "" {
		d, err := os.MkdirTemp(d, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return b.TempDir()
}

// What the guest leaves out of its listing for the user to hear of (a
// fifo here) comes back with the manifest, every time, delta or not.
func TestListingReportsSkipped(t *testing.T) {
	r := &localRemote{t: t}
	_, ws, known, opts := pushAndSeed(t, r)
	must(t, syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644))
	k, err := transfer.RemoteManifest(t.Context(), r, ws, known, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(k.Skipped) != 1 || k.Skipped[0].Path != "pipe" || k.Skipped[0].Reason != manifest.ReasonSpecial {
		t.Fatalf("skipped %+v, want the fifo", k.Skipped)
	}
	if _, ok := k.Manifest.Lookup("pipe"); ok {
		t.Fatal("the fifo is in the manifest")
	}
}

// The attack of issue 19: the command grows a baseline file to 5 GiB
// (sparse), makes a new 3 GiB one, and edits another file. Both big files
// are left out and named with their size; with the baseline put back at
// their paths the only change is the edit (big.bin is not deleted). A
// later collect after the guest removes big.bin sees it deleted.
func TestListingLeavesOutLargeFiles(t *testing.T) {
	r := &localRemote{t: t}
	base, ws, known, opts := pushAndSeed(t, r)
	must(t, os.Truncate(filepath.Join(ws, "big.bin"), 5<<30))
	f, err := os.Create(filepath.Join(ws, "new.bin"))
	must(t, err)
	must(t, f.Truncate(3<<30))
	f.Close()
	must(t, os.WriteFile(filepath.Join(ws, "main.go"), []byte("package main // edited\n"), 0o644))
	k, err := transfer.RemoteManifest(t.Context(), r, ws, known, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []manifest.Exclusion{
		{Path: "big.bin", Reason: manifest.ReasonTooLarge, Rule: "5368709120 bytes, over the 1073741824-byte cap", Size: 5 << 30},
		{Path: "new.bin", Reason: manifest.ReasonTooLarge, Rule: "3221225472 bytes, over the 1073741824-byte cap", Size: 3 << 30},
	}
	if diff := cmp.Diff(want, k.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	changes := manifest.Diff(base, manifest.KeepLeftOut(k.Manifest, base, k.Skipped))
	if len(changes) != 1 || changes[0].Path != "main.go" || changes[0].Kind != manifest.Modified {
		t.Errorf("changes %+v, want main.go modified only", changes)
	}

	must(t, os.Remove(filepath.Join(ws, "big.bin")))
	k2, err := transfer.RemoteManifest(t.Context(), r, ws, k, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(k2.Skipped) != 1 || k2.Skipped[0].Path != "new.bin" {
		t.Errorf("skipped %+v, want new.bin", k2.Skipped)
	}
	changes = manifest.Diff(base, manifest.KeepLeftOut(k2.Manifest, base, k2.Skipped))
	if len(changes) != 2 || changes[0].Path != "big.bin" || changes[0].Kind != manifest.Deleted {
		t.Errorf("changes %+v, want big.bin deleted and main.go modified", changes)
	}
}

// A guest cannot flood the host through the skipped list, nor pass off a
// reason of its own.
func TestHostileSkipped(t *testing.T) {
	many := make([]string, manifest.MaxSkipped+1)
	for i := range many {
		many[i] = `{"path":"p` + strconv.Itoa(i) + `","reason":"special-file"}`
	}
	for _, tc := range []struct {
		name, out string
		want      error
	}{
		{"too-many", `{"id":"x","entries":[],"skipped":[` + strings.Join(many, ",") + `]}`, manifest.ErrTooLarge},
		{"other-reason", `{"id":"x","entries":[],"skipped":[{"path":"a","reason":"secret"}]}`, manifest.ErrInvalid},
		{"long-rule", `{"id":"x","entries":[],"skipped":[{"path":"a","reason":"special-file","rule":"` + strings.Repeat("r", 300) + `"}]}`, manifest.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := transfer.RemoteManifest(t.Context(), lyingGuest(t, tc.out), "/workspace", transfer.Known{}, transfer.Options{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// pushAndSeed pushes the test baseline into a new workspace through r and
// seeds the guest with it, as the pipeline does before the command.
func pushAndSeed(t *testing.T, r transfer.Remote) (base *manifest.Manifest, ws string, known transfer.Known, opts transfer.Options) {
	t.Helper()
	var store *objects.Store
	base, store = baseline(t)
	ws = filepath.Join(t.TempDir(), "workspace")
	opts = transfer.Options{AgentPath: agentBin(t)}
	if _, err := transfer.Push(t.Context(), r, ws, base, store, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(ws, "ro"), 0o755) })
	known, err := transfer.Seed(t.Context(), r, ws, base, opts)
	if err != nil {
		t.Fatal(err)
	}
	return base, ws, known, opts
}
