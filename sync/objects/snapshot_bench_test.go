package objects

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// BenchmarkSnapshotTree stores the Go toolchain's own source tree (11.5k
// files) into a new store, against a local `tar -c | tar -x` copy of the
// same tree, in the same run; it reports both and the ratio. The walk
// (hashing) is not timed: it is the same for every sync mode.
func BenchmarkSnapshotTree(b *testing.B) {
	src := filepath.Join(runtime.GOROOT(), "src")
	m, _, err := manifest.Walk(context.Background(), src, manifest.WalkOptions{NoGitignore: true})
	if err != nil {
		b.Fatal(err)
	}
	var snap, tarCopy time.Duration
	n := 0
	for b.Loop() {
		s, err := Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := SnapshotTree(context.Background(), src, m, s); err != nil {
			b.Fatal(err)
		}
		snap += time.Since(start)
		dst := b.TempDir()
		start = time.Now()
		c := exec.Command("sh", "-c", `tar -C "$1" -cf - . | tar -C "$2" -xf - && sync -f "$2"`, "sh", src, dst)
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("tar: %v\n%s", err, out)
		}
		tarCopy += time.Since(start)
		n++
	}
	b.ReportMetric(float64(snap.Milliseconds())/float64(n), "ms/snapshot")
	b.ReportMetric(float64(tarCopy.Milliseconds())/float64(n), "ms/tar+sync")
	b.ReportMetric(float64(snap)/float64(tarCopy), "ratio")
	b.Logf("snapshot %v, tar copy and sync %v, ratio %.2f (%d files, mean of %d)", snap/time.Duration(n), tarCopy/time.Duration(n), float64(snap)/float64(tarCopy), len(m.Entries), n)
}
