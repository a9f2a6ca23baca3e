package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// BenchmarkProjectReady times, on a copy of the Go toolchain's own source
// tree (a real tree nobody here wrote), what a project adds to a sandbox:
// `airlock run --project TREE -- true` minus the same on an empty project,
// in the disk sync mode (first with no baseline disk cached, then again
// with it cached) and in the copy mode, against a local tar copy of the
// same tree, all in the same run; it reports each and the ratio to tar.
func BenchmarkProjectReady(b *testing.B) {
	home := testenv.VMHome(b)
	src := filepath.Join(runtime.GOROOT(), "src")
	tarCopy := func() (string, time.Duration) {
		dst := b.TempDir()
		start := time.Now()
		c := exec.Command("sh", "-c", `tar -C "$1" -cf - . | tar -C "$2" -xf -`, "sh", src, dst)
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("tar: %v\n%s", err, out)
		}
		return dst, time.Since(start)
	}
	tree, _ := tarCopy()
	empty := b.TempDir()
	run := func(project, sync string) time.Duration {
		var out, errOut bytes.Buffer
		start := time.Now()
		if code := Main([]string{"--home", home, "run", "--arch", "amd64", "--no-cache", "--sync", sync, "--project", project, "--", "true"},
			strings.NewReader(""), &out, &errOut); code != 0 {
			b.Fatalf("run --sync %s on %s: exit %d\n%s", sync, project, code, errOut.String())
		}
		return time.Since(start)
	}
	run(empty, "disk") // the warm snapshots of both shapes
	run(empty, "copy")
	var bare, diskFirst, diskAgain, cp, tr time.Duration
	n := 0
	for b.Loop() {
		if err := os.RemoveAll(filepath.Join(home, "cache", "baselines")); err != nil {
			b.Fatal(err)
		}
		bare += run(empty, "disk")
		diskFirst += run(tree, "disk")
		diskAgain += run(tree, "disk")
		cp += run(tree, "copy")
		_, d := tarCopy()
		tr += d
		n++
	}
	per := func(d time.Duration) time.Duration { return d / time.Duration(n) }
	extra := func(d time.Duration) time.Duration { return per(d) - per(bare) }
	ratio := func(d time.Duration) float64 { return float64(extra(d)) / float64(per(tr)) }
	b.ReportMetric(float64(extra(diskFirst).Milliseconds()), "ms/disk-first")
	b.ReportMetric(float64(extra(diskAgain).Milliseconds()), "ms/disk-cached")
	b.ReportMetric(float64(extra(cp).Milliseconds()), "ms/copy")
	b.ReportMetric(float64(per(tr).Milliseconds()), "ms/tar")
	b.ReportMetric(ratio(diskFirst), "ratio-disk-first")
	b.ReportMetric(ratio(diskAgain), "ratio-disk-cached")
	b.Logf("beyond a bare run (%v): disk %v first, %v cached; copy %v; tar copy %v; ratios to tar %.2f, %.2f, %.2f (mean of %d)",
		per(bare), extra(diskFirst), extra(diskAgain), extra(cp), per(tr), ratio(diskFirst), ratio(diskAgain), ratio(cp), n)
}
