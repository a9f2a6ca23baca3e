package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// BenchmarkBaseDisk measures MakeBaseDisk of the Go source tree
// ($(go env GOROOT)/src, snapshotted into a content store first, not
// timed) against a raw `tar -c | tar -x` copy of the same tree, timed in
// the same run on the same file system, and prints both with the ratio:
//
//	go test ./app/pipeline -run '^$' -bench BaseDisk -benchtime 3x
//
// disk/tar below 1 means writing the disk is faster than the copy. Set
// AIRLOCK_BENCH_DIR to measure on another file system.
func BenchmarkBaseDisk(b *testing.B) {
	if _, err := exec.LookPath("tar"); err != nil {
		testenv.Skip(b, testenv.Unix, err.Error())
	}
	ctx := context.Background()
	project, parent, base, rep, store := goTreeSnapshot(b)
	var files int
	var total int64
	for _, e := range base.Entries {
		if e.Type == manifest.File {
			files++
			total += e.Size
		}
	}

	var disk, tar time.Duration
	var rec baseDiskRecord
	syscall.Sync()
	b.ResetTimer()
	for i := range b.N {
		dir := filepath.Join(parent, fmt.Sprintf("disks-%d", i))
		t0 := time.Now()
		d, err := MakeBaseDisk(ctx, BaseDiskRequest{Dir: dir, Manifest: base, Objects: store, UID: 1000, GID: 1000})
		if err != nil {
			b.Fatal(err)
		}
		disk += time.Since(t0)
		if rec, err = readBaseDiskRecord(recordPath(d.Path)); err != nil {
			b.Fatal(err)
		}

		tdst := filepath.Join(parent, fmt.Sprintf("tar-%d", i))
		tar += tarCopy(b, project, tdst)

		b.StopTimer()
		os.RemoveAll(dir)
		os.RemoveAll(tdst)
		syscall.Sync() // no writeback of this round in the next one's time
		b.StartTimer()
	}
	n := float64(b.N)
	diskS, tarS := disk.Seconds()/n, tar.Seconds()/n
	b.ReportMetric(diskS*1000, "disk-ms/op")
	b.ReportMetric(tarS*1000, "tar-ms/op")
	b.ReportMetric(diskS/tarS, "disk/tar")
	b.Logf("%d files, %.0f MB (%d left out by the walk): base disk %.0f ms (%.0f MB/s, file system %.0f MB), tar -c | tar -x %.0f ms (%.0f MB/s); disk/tar = %.2f",
		files, float64(total)/1e6, len(rep.Excluded), diskS*1000, float64(total)/1e6/diskS, float64(rec.FSSize)/1e6, tarS*1000, float64(total)/1e6/tarS, diskS/tarS)
}

// BenchmarkBaseDiskEdit measures the run after a one-file edit of the Go
// source tree: the baseline's disks written with layers (MakeBaseLayers:
// a delta over the project's full disk, written before and not timed)
// against without (MakeBaseDisk: a whole new full disk, as before
// layers), in the same run, with the bytes each writes (the file
// systems' sizes; the images are sparse past them) and the ratios:
//
//	go test ./app/pipeline -run '^$' -bench BaseDiskEdit -benchtime 3x
func BenchmarkBaseDiskEdit(b *testing.B) {
	ctx := context.Background()
	project, parent, base, _, store := goTreeSnapshot(b)
	layered := filepath.Join(parent, "layered")
	req := BaseDiskRequest{Dir: layered, Project: project, Manifest: base, Objects: store, UID: 1000, GID: 1000}
	if _, err := MakeBaseLayers(ctx, req); err != nil {
		b.Fatal(err)
	}
	edited := slices.IndexFunc(base.Entries, func(e manifest.Entry) bool { return e.Path == "fmt/print.go" })
	if edited < 0 {
		b.Fatal("no fmt/print.go in the Go source tree")
	}
	fsSize := func(d BaseDisk) int64 {
		rec, err := readBaseDiskRecord(recordPath(d.Path))
		if err != nil {
			b.Fatal(err)
		}
		return rec.FSSize
	}

	var withT, withoutT time.Duration
	var withB, withoutB int64
	syscall.Sync()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		// The edit: one line appended to one file.
		m := &manifest.Manifest{Entries: slices.Clone(base.Entries)}
		rc, err := store.Open(m.Entries[edited].SHA256)
		if err != nil {
			b.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			b.Fatal(err)
		}
		sum, size, err := store.Put(bytes.NewReader(fmt.Appendf(data, "\n// edit %d\n", i)))
		if err != nil {
			b.Fatal(err)
		}
		m.Entries[edited].SHA256, m.Entries[edited].Size = sum, size
		full := filepath.Join(parent, fmt.Sprintf("full-%d", i))
		syscall.Sync()
		b.StartTimer()

		t0 := time.Now()
		r := req
		r.Manifest = m
		l, err := MakeBaseLayers(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		withT += time.Since(t0)
		if l.Squashed || l.Base.ID == l.ID {
			b.Fatalf("a one-file edit was not a delta: %+v", l)
		}
		withB += fsSize(l.Delta)

		t0 = time.Now()
		d, err := MakeBaseDisk(ctx, BaseDiskRequest{Dir: full, Manifest: m, Objects: store, UID: 1000, GID: 1000})
		if err != nil {
			b.Fatal(err)
		}
		withoutT += time.Since(t0)
		withoutB += fsSize(d)

		b.StopTimer()
		os.RemoveAll(full)
		syscall.Sync()
		b.StartTimer()
	}
	n := float64(b.N)
	w, wo := withT.Seconds()/n, withoutT.Seconds()/n
	b.ReportMetric(w*1000, "layers-ms/op")
	b.ReportMetric(wo*1000, "full-ms/op")
	b.ReportMetric(float64(withB)/n, "layers-B/op")
	b.ReportMetric(float64(withoutB)/n, "full-B/op")
	b.Logf("one-file edit of %d entries: with layers %.0f ms, %.2f MB written (delta disk); without (a full disk) %.0f ms, %.1f MB written; time ratio %.3f, bytes ratio %.4f",
		len(base.Entries), w*1000, float64(withB)/n/1e6, wo*1000, float64(withoutB)/n/1e6, w/wo, float64(withB)/float64(withoutB))
}

// goTreeSnapshot snapshots the Go source tree ($(go env GOROOT)/src) into
// a content store under a new directory (in AIRLOCK_BENCH_DIR when set,
// to measure on another file system), untimed: the tree, the directory,
// its manifest and walk report, and the store.
func goTreeSnapshot(b *testing.B) (project, parent string, base *manifest.Manifest, rep *manifest.Report, store *objects.Store) {
	b.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		testenv.Skip(b, testenv.Go, fmt.Sprintf("go env GOROOT: %v", err))
	}
	project = filepath.Join(strings.TrimSpace(string(out)), "src")
	parent = os.Getenv("AIRLOCK_BENCH_DIR")
	if parent == "" {
		parent = b.TempDir()
	} else {
		d, err := os.MkdirTemp(parent, "airlock-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		parent = d
	}
	ctx := context.Background()
	base, rep, err = manifest.Walk(ctx, project, manifest.WalkOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if store, err = objects.Open(filepath.Join(parent, "objects")); err != nil {
		b.Fatal(err)
	}
	if err := objects.SnapshotTree(ctx, project, base, store); err != nil {
		b.Fatal(err)
	}
	return project, parent, base, rep, store
}
