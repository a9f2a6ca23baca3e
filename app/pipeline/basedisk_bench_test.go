package pipeline

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
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
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		testenv.Skip(b, testenv.Go, fmt.Sprintf("go env GOROOT: %v", err))
	}
	project := filepath.Join(strings.TrimSpace(string(out)), "src")
	parent := os.Getenv("AIRLOCK_BENCH_DIR")
	if parent == "" {
		parent = b.TempDir()
	} else {
		d, err := os.MkdirTemp(parent, "airlock-bench-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(d)
		parent = d
	}
	ctx := context.Background()
	base, rep, err := manifest.Walk(ctx, project, manifest.WalkOptions{})
	if err != nil {
		b.Fatal(err)
	}
	store, err := objects.Open(filepath.Join(parent, "objects"))
	if err != nil {
		b.Fatal(err)
	}
	if err := objects.SnapshotTree(ctx, project, base, store); err != nil {
		b.Fatal(err)
	}
	var files int
	var bytes int64
	for _, e := range base.Entries {
		if e.Type == manifest.File {
			files++
			bytes += e.Size
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
		files, float64(bytes)/1e6, len(rep.Excluded), diskS*1000, float64(bytes)/1e6/diskS, float64(rec.FSSize)/1e6, tarS*1000, float64(bytes)/1e6/tarS, diskS/tarS)
}
