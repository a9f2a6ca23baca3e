package transfer_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/sync/manifest"
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
	base, store := baseline(t)
	var out bytes.Buffer
	r := recording(t, &out)
	ws := filepath.Join(t.TempDir(), "workspace")
	opts := transfer.Options{AgentPath: agentBin(t)}
	if _, err := transfer.Push(t.Context(), r, ws, base, store, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(ws, "ro"), 0o755) })
	known, err := transfer.Seed(t.Context(), r, ws, base, opts)
	if err != nil {
		t.Fatal(err)
	}
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
