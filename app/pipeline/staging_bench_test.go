package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/testkit/testenv"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
)

// BenchmarkStagingClone measures the virtiofs staging clone of a generated
// 10k-file, 100 MB project (CloneBaseline from the content store) against
// a raw `tar -c | tar -x` copy of the same tree, timed in the same run on
// the same file system, and prints both with the ratio:
//
//	go test ./app/sandbox -run '^$' -bench StagingClone -benchtime 5x
//
// clone/tar below 1 means the clone is faster than tar. Set
// AIRLOCK_BENCH_DIR to measure on another file system (one with reflinks,
// btrfs or XFS, shows FICLONE).
func BenchmarkStagingClone(b *testing.B) {
	if _, err := exec.LookPath("tar"); err != nil {
		testenv.Skip(b, testenv.Unix, err.Error())
	}
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
	project := filepath.Join(parent, "project")
	files, bytes := genProject(b, project, 10_000, 100<<20)
	ctx := context.Background()
	base, _, err := manifest.Walk(ctx, project, manifest.WalkOptions{})
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

	var clone, tar time.Duration
	var st CloneStats
	syscall.Sync()
	b.ResetTimer()
	for i := range b.N {
		dst := filepath.Join(parent, fmt.Sprintf("clone-%d", i))
		t0 := time.Now()
		if st, err = CloneBaseline(ctx, dst, base, store, nil); err != nil {
			b.Fatal(err)
		}
		clone += time.Since(t0)

		tdst := filepath.Join(parent, fmt.Sprintf("tar-%d", i))
		tar += tarCopy(b, project, tdst)

		b.StopTimer()
		os.RemoveAll(dst)
		os.RemoveAll(tdst)
		syscall.Sync() // no writeback of this round in the next one's time
		b.StartTimer()
	}
	n := float64(b.N)
	cloneS, tarS := clone.Seconds()/n, tar.Seconds()/n
	b.ReportMetric(cloneS*1000, "clone-ms/op")
	b.ReportMetric(tarS*1000, "tar-ms/op")
	b.ReportMetric(cloneS/tarS, "clone/tar")
	b.Logf("%d files, %.0f MB: staging clone %.0f ms (%.0f MB/s, %d reflinked), tar -c | tar -x %.0f ms (%.0f MB/s); clone/tar = %.2f",
		files, float64(bytes)/1e6, cloneS*1000, float64(bytes)/1e6/cloneS, st.Reflinked, tarS*1000, float64(bytes)/1e6/tarS, cloneS/tarS)
}

// genProject writes about total bytes in n files (sizes spread from 0 to
// twice the mean, in 100 directories), deterministically.
func genProject(b *testing.B, dir string, n int, total int64) (files int, bytes int64) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	mean := total / int64(n)
	buf := make([]byte, 2*mean)
	for i := range buf {
		buf[i] = byte(rng.IntN(256))
	}
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%02d", i%100))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		size := rng.Int64N(2 * mean)
		data := buf[:size]
		data[0] = byte(i) // distinct contents, so the store holds n objects
		if size > 1 {
			data[1] = byte(i >> 8)
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d.dat", i)), data, 0o644); err != nil {
			b.Fatal(err)
		}
		bytes += size
	}
	return n, bytes
}

// tarCopy copies the tree src into the new directory dst with
// `tar -c | tar -x`, the local copy benchmarks measure against, and
// returns how long that took.
func tarCopy(b *testing.B, src, dst string) time.Duration {
	b.Helper()
	if err := os.Mkdir(dst, 0o755); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	cmd := exec.Command("sh", "-c", `tar -C "$1" -cf - . | tar -C "$2" -xf -`, "sh", src, dst)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("tar: %v\n%s", err, out)
	}
	return time.Since(t0)
}
