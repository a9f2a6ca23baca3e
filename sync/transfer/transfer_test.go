package transfer_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
	"github.com/airlock-dev/airlock/sync/transfer"
)

var modes = []transfer.Mode{transfer.ModeSFTP, transfer.ModeTar}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// writeTree creates files (content), dirs (trailing slash) and symlinks
// ("-> target") under root, then applies modes.
func writeTree(t *testing.T, root string, tree map[string]string, modes map[string]fs.FileMode) {
	t.Helper()
	for p, v := range tree {
		full := filepath.Join(root, p)
		switch {
		case strings.HasSuffix(p, "/"):
			must(t, os.MkdirAll(full, 0o755))
		case strings.HasPrefix(v, "-> "):
			must(t, os.MkdirAll(filepath.Dir(full), 0o755))
			must(t, os.Symlink(strings.TrimPrefix(v, "-> "), full))
		default:
			must(t, os.MkdirAll(filepath.Dir(full), 0o755))
			must(t, os.WriteFile(full, []byte(v), 0o644))
		}
	}
	for p, m := range modes {
		must(t, os.Chmod(filepath.Join(root, p), m))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func walk(t *testing.T, root string) *manifest.Manifest {
	t.Helper()
	m, _, err := manifest.Walk(t.Context(), root, manifest.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// baseline walks a generated project and snapshots it into a new store.
func baseline(t *testing.T) (*manifest.Manifest, *objects.Store) {
	t.Helper()
	proj := t.TempDir()
	long := strings.Repeat("deep/", 25) + "file-with-a-path-over-100-bytes.txt"
	writeTree(t, proj, map[string]string{
		"README.md":          "# demo\n",
		"main.go":            "package main\n",
		"run.sh":             "#!/bin/sh\necho hi\n",
		"secret-ish.txt":     "private but not a secret\n",
		"src/a.txt":          "a\n",
		"src/b.txt":          "b\n",
		"src/dup.txt":        "a\n", // same content as a.txt: stored once
		"src/empty.txt":      "",
		"src/link":           "-> a.txt",
		"src/abs-link":       "-> /etc/passwd",
		"empty/":             "",
		"private/":           "",
		"ro/inside.txt":      "in a read-only dir\n",
		long:                 "long\n",
		"big.bin":            strings.Repeat("0123456789abcdef", 1<<16), // 1 MiB
		"weird name ü'$.txt": "quoted\n",
	}, map[string]fs.FileMode{
		"run.sh":         0o755,
		"secret-ish.txt": 0o600,
		"private":        0o700,
		"ro":             0o555,
	})
	m := walk(t, proj)
	store, err := objects.Open(t.TempDir())
	must(t, err)
	must(t, objects.SnapshotTree(t.Context(), proj, m, store))
	return m, store
}

func TestPushPull(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			base, store := baseline(t)
			r := &localRemote{t: t}
			ws := filepath.Join(t.TempDir(), "workspace")
			var events []transfer.Progress
			opts := transfer.Options{Mode: mode, AgentPath: agentBin(t), Progress: func(p transfer.Progress) { events = append(events, p) }}
			st, err := transfer.Push(t.Context(), r, ws, base, store, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(filepath.Join(ws, "ro"), 0o755) })
			if st.Mode != mode || st.Files == 0 || st.Dirs == 0 || st.Symlinks != 2 {
				t.Errorf("stats %+v", st)
			}
			last := events[len(events)-1]
			if last.Files != last.FilesTotal || last.Bytes != last.BytesTotal || last.FilesTotal != st.Files {
				t.Errorf("last progress %+v, stats %+v", last, st)
			}
			if diff := cmp.Diff(base, walk(t, ws)); diff != "" {
				t.Fatalf("pushed tree differs from the baseline (-want +got):\n%s", diff)
			}

			// The "agent" edits the workspace.
			must(t, os.WriteFile(filepath.Join(ws, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644))
			must(t, os.WriteFile(filepath.Join(ws, "src/new.txt"), []byte("brand new\n"), 0o644))
			must(t, os.Rename(filepath.Join(ws, "src/b.txt"), filepath.Join(ws, "src/renamed-b.txt")))
			must(t, os.Remove(filepath.Join(ws, "README.md")))
			must(t, os.Chmod(filepath.Join(ws, "run.sh"), 0o644))
			must(t, os.Symlink("../main.go", filepath.Join(ws, "src/main-link")))
			must(t, os.WriteFile(filepath.Join(ws, "src/copy-of-new.txt"), []byte("brand new\n"), 0o644))

			got, err := remoteManifest(t.Context(), r, ws, opts)
			if err != nil {
				t.Fatal(err)
			}
			changes := manifest.Diff(base, got)
			before := objectCount(t, store)
			st, err = transfer.Pull(t.Context(), r, ws, changes, store, opts)
			if err != nil {
				t.Fatal(err)
			}
			// main.go's new content and new.txt (once for two files); the
			// rename's content is already stored.
			if st.Files != 2 || st.Bytes != int64(len("package main\n\nfunc main() {}\n")+len("brand new\n")) {
				t.Errorf("pull stats %+v", st)
			}
			if n := objectCount(t, store); n != before+2 {
				t.Errorf("store has %d objects, want %d", n, before+2)
			}
			for _, c := range []string{"package main\n\nfunc main() {}\n", "brand new\n"} {
				if !store.Has(sum([]byte(c))) {
					t.Errorf("store lacks %q", c)
				}
			}
			// Nothing left to pull the second time.
			st, err = transfer.Pull(t.Context(), r, ws, changes, store, opts)
			if err != nil || st.Files != 0 {
				t.Errorf("second pull: %+v, %v", st, err)
			}
		})
	}
}

func objectCount(t *testing.T, s *objects.Store) int {
	t.Helper()
	n := 0
	must(t, filepath.WalkDir(s.Dir(), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "tmp" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			n++
		}
		return nil
	}))
	return n
}

func TestPushRefusesNonEmptyDest(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			base, store := baseline(t)
			ws := t.TempDir()
			must(t, os.WriteFile(filepath.Join(ws, "already"), nil, 0o644))
			_, err := transfer.Push(t.Context(), &localRemote{t: t}, ws, base, store, transfer.Options{Mode: mode, AgentPath: agentBin(t)})
			if err == nil || !strings.Contains(err.Error(), "not empty") {
				t.Fatalf("push into a non-empty dir: %v", err)
			}
		})
	}
}

func TestPushMissingObject(t *testing.T) {
	base, _ := baseline(t)
	empty, err := objects.Open(t.TempDir())
	must(t, err)
	_, err = transfer.Push(t.Context(), &localRemote{t: t}, t.TempDir(), base, empty, transfer.Options{AgentPath: agentBin(t)})
	if !errors.Is(err, objects.ErrNotFound) {
		t.Fatalf("push without content: %v", err)
	}
}

func TestPushCanceled(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			base, store := baseline(t)
			ctx, cancel := context.WithCancel(t.Context())
			opts := transfer.Options{Mode: mode, AgentPath: agentBin(t), Progress: func(p transfer.Progress) {
				if p.Files > 2 {
					cancel()
				}
			}}
			_, err := transfer.Push(ctx, &localRemote{t: t}, filepath.Join(t.TempDir(), "ws"), base, store, opts)
			if err == nil {
				t.Fatal("push succeeded after cancel")
			}
		})
	}
}

func TestRemoteManifestRules(t *testing.T) {
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{
		".gitignore":     "*.log\n",
		"build.log":      "noise\n",
		"kept.txt":       "kept\n",
		".env":           "TOKEN=1\n",
		".git/config":    "[core]\n",
		"vendor/x.txt":   "x\n",
		"setuid-bin":     "elf\n",
		"node_modules/":  "",
		"dir/nested.txt": "n\n",
	}, map[string]fs.FileMode{"setuid-bin": 0o755})
	r := &localRemote{t: t}
	m, err := remoteManifest(t.Context(), r, ws, transfer.Options{AgentPath: agentBin(t), Excludes: []string{"vendor/"}})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range m.Entries {
		paths = append(paths, e.Path)
	}
	want := []string{".gitignore", "dir", "dir/nested.txt", "kept.txt", "node_modules", "setuid-bin"}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("guest manifest paths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(walk(t, ws).Entries[0], m.Entries[0]); diff != "" {
		t.Errorf("guest and host disagree:\n%s", diff)
	}
}
