package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/guest"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
	"github.com/airlock-dev/airlock/sync/transfer"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/qemu"
)

// layersVM boots warm machines on a project's layered baselines and
// reads back, in the guest, what /workspace holds.
type layersVM struct {
	t       *testing.T
	ctx     context.Context
	project string
	store   *objects.Store
	disks   string // the cache of base disks
	boot    func(ctx context.Context, a pipeline.Attach) (pipeline.Machine, error)
	n       int
	logs    bytes.Buffer
}

func newLayersVM(t *testing.T) *layersVM {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	store, err := objects.Open(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	o := launch.Options{Home: home, Arch: vm.AMD64, Warm: true,
		Backend: qemu.New(qemu.Config{CacheDir: filepath.Join(home, "cache", "qemu")})}
	return &layersVM{t: t, ctx: ctx, project: t.TempDir(), store: store, disks: t.TempDir(), boot: pipeline.LaunchBoot(o)}
}

// write puts files (path → content; a content of "/" makes a
// directory) in the project.
func (v *layersVM) write(files map[string]string) {
	v.t.Helper()
	for p, c := range files {
		full := filepath.Join(v.project, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			v.t.Fatal(err)
		}
		if c == "/" {
			if err := os.MkdirAll(full, 0o755); err != nil {
				v.t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			v.t.Fatal(err)
		}
	}
}

// layers snapshots the project and makes its layers.
func (v *layersVM) layers() (pipeline.BaseLayers, *manifest.Manifest) {
	v.t.Helper()
	m, _, err := manifest.Walk(v.ctx, v.project, manifest.WalkOptions{})
	if err != nil {
		v.t.Fatal(err)
	}
	if err := objects.SnapshotTree(v.ctx, v.project, m, v.store); err != nil {
		v.t.Fatal(err)
	}
	l, err := pipeline.MakeBaseLayers(v.ctx, pipeline.BaseDiskRequest{Dir: v.disks, Project: v.project, Manifest: m,
		Objects: v.store, UID: 1000, GID: 1000, Logger: slog.New(slog.NewTextHandler(&v.logs, nil))})
	if err != nil {
		v.t.Fatal(err)
	}
	return l, m
}

// check boots a machine on l and compares the guest's whole walk of
// /workspace with want; then makes a change in the guest and checks the
// overlay's listing (against the baseline's ID: the upper layer only)
// gives the same tree as a whole walk.
func (v *layersVM) check(step string, l pipeline.BaseLayers, want *manifest.Manifest) {
	v.t.Helper()
	v.n++
	upper := filepath.Join(v.t.TempDir(), "upper.img")
	if err := pipeline.CreateDisk(v.ctx, upper, 256<<20, ""); err != nil {
		v.t.Fatal(err)
	}
	m, err := v.boot(v.ctx, pipeline.Attach{ID: fmt.Sprintf("layers%d-%d", os.Getpid(), v.n),
		Disks: []launch.Disk{{Path: upper, Mount: "/workspace", Lower: l.Base.Path, Delta: l.Delta.Path}}})
	if err != nil {
		v.t.Fatalf("%s: boot: %v", step, err)
	}
	defer m.Shutdown(context.WithoutCancel(v.ctx))
	whole, err := transfer.RemoteManifest(v.ctx, m, "/workspace", transfer.Known{}, transfer.Options{})
	if err != nil {
		v.t.Fatalf("%s: the guest's manifest: %v", step, err)
	}
	if diff := cmp.Diff(want, whole.Manifest); diff != "" {
		v.t.Fatalf("%s: the guest's /workspace is not the baseline (-want +got):\n%s", step, diff)
	}
	if err := m.Exec(v.ctx, "echo from the guest > /workspace/guest.txt && rm -rf /workspace/keep", nil, nil, nil); err != nil {
		v.t.Fatalf("%s: change in the guest: %v", step, err)
	}
	dirs := transfer.OverlayDirs{Lower: guest.OverlayLower("/workspace"), Upper: guest.OverlayUpper("/workspace")}
	listed, err := transfer.RemoteManifest(v.ctx, m, "/workspace", transfer.Known{ID: l.ID, Manifest: want}, transfer.Options{Overlay: dirs})
	if err != nil {
		v.t.Fatalf("%s: the overlay's listing: %v", step, err)
	}
	if listed.ID != l.ID {
		v.t.Errorf("%s: the overlay's listing is of %q, want the delta against %s (the baseline's ID as the guest read it)", step, listed.ID, l.ID)
	}
	after, err := transfer.RemoteManifest(v.ctx, m, "/workspace", transfer.Known{}, transfer.Options{})
	if err != nil {
		v.t.Fatal(err)
	}
	if diff := cmp.Diff(after.Manifest, listed.Manifest); diff != "" {
		v.t.Errorf("%s: the overlay's listing is not the tree (-walk +listing):\n%s", step, diff)
	}
}

// TestBaseLayersInVM runs a chain of edits of a project one after
// another (modify, add, delete, file to directory and back, mode change),
// each a delta over the first full disk, and checks in a real guest
// (warm-started) that /workspace is exactly each baseline; then a large
// edit squashes into a full disk, and damaged layers are written again.
func TestBaseLayersInVM(t *testing.T) {
	v := newLayersVM(t)
	files := map[string]string{"keep/a.txt": "a\n", "dir/sub/b.txt": "b\n", "c.txt": "c\n", "gone/x.txt": "x\n", "later-a-dir": "file\n", "was-a-dir/y": "y\n"}
	for i := range 600 {
		files[fmt.Sprintf("many/f%03d.txt", i)] = fmt.Sprintf("file %d\n", i)
	}
	v.write(files)
	first, m := v.layers()
	v.check("full disk", first, m)
	if first.Base.ID != first.ID {
		t.Fatalf("the first baseline's base is not its own full disk: %+v", first)
	}

	edits := []struct {
		name string
		edit func() error
	}{
		{"modify", func() error { return os.WriteFile(filepath.Join(v.project, "c.txt"), []byte("c changed\n"), 0o644) }},
		{"add", func() error {
			if err := os.MkdirAll(filepath.Join(v.project, "new/deeper"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(v.project, "new/deeper/n.txt"), []byte("n\n"), 0o644)
		}},
		{"delete", func() error { return os.RemoveAll(filepath.Join(v.project, "gone")) }},
		{"file to directory and back", func() error {
			if err := os.Remove(filepath.Join(v.project, "later-a-dir")); err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Join(v.project, "later-a-dir"), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(v.project, "later-a-dir/inside"), []byte("inside\n"), 0o644); err != nil {
				return err
			}
			if err := os.RemoveAll(filepath.Join(v.project, "was-a-dir")); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(v.project, "was-a-dir"), []byte("a file now\n"), 0o644)
		}},
		{"mode", func() error {
			if err := os.Chmod(filepath.Join(v.project, "dir/sub/b.txt"), 0o755); err != nil {
				return err
			}
			return os.Chmod(filepath.Join(v.project, "dir/sub"), 0o700)
		}},
	}
	var last pipeline.BaseLayers
	for _, e := range edits {
		if err := e.edit(); err != nil {
			t.Fatal(err)
		}
		l, m := v.layers()
		if l.Base != first.Base || l.Squashed {
			t.Fatalf("%s: not a delta over the first full disk: %+v", e.name, l)
		}
		v.check(e.name, l, m)
		last = l
	}

	// A damaged delta is written again with a warning, then used.
	if err := os.Chmod(last.Delta.Path, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(last.Delta.Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("damage"), 1024+0x78) // the superblock's volume name
	f.Close()
	v.logs.Reset()
	l, m := v.layers()
	if l != last || !strings.Contains(v.logs.String(), "level=WARN") || !strings.Contains(v.logs.String(), "damaged") {
		t.Fatalf("the damaged delta: %+v (want %+v), log %q", l, last, v.logs.String())
	}
	v.check("damaged delta written again", l, m)

	// A large edit squashes: the next baseline is a full disk of its own.
	for i := range 400 {
		if err := os.WriteFile(filepath.Join(v.project, fmt.Sprintf("many/f%03d.txt", i)), fmt.Appendf(nil, "file %d, edited\n", i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sq, m := v.layers()
	if !sq.Squashed || sq.Base == first.Base || sq.Base.ID != sq.ID {
		t.Fatalf("a large edit did not squash: %+v", sq)
	}
	v.check("squashed", sq, m)

	// A delta over another base is refused by the guest.
	upper := filepath.Join(t.TempDir(), "upper.img")
	if err := pipeline.CreateDisk(v.ctx, upper, 256<<20, ""); err != nil {
		t.Fatal(err)
	}
	if m, err := v.boot(v.ctx, pipeline.Attach{ID: fmt.Sprintf("layers%d-wrong", os.Getpid()),
		Disks: []launch.Disk{{Path: upper, Mount: "/workspace", Lower: sq.Base.Path, Delta: last.Delta.Path}}}); err == nil {
		m.Shutdown(context.WithoutCancel(v.ctx))
		t.Fatal("the guest mounted a delta over another base")
	} else {
		t.Logf("a delta over another base: %v", err)
	}

	// A damaged base is never used: the baseline gets a full disk.
	if err := os.Chmod(sq.Base.Path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(sq.Base.Path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sq.Base.Path, []byte("not a disk"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.project, "c.txt"), []byte("c once more\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v.logs.Reset()
	l, m = v.layers()
	if l.Base.ID != l.ID || !strings.Contains(v.logs.String(), "level=WARN") {
		t.Fatalf("over a damaged base: %+v, log %q", l, v.logs.String())
	}
	v.check("damaged base replaced", l, m)
}
