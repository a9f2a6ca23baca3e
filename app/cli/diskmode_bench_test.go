package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/testkit/testenv"
)

// BenchmarkProjectReady times, on a copy of the Go toolchain's own source
// tree (a real tree nobody here wrote), what a project adds to a sandbox:
// `airlock run --project TREE -- true` minus the same on an empty project,
// in the disk sync mode (first with no baseline disk cached, then again
// with it cached) and in the copy mode, against a local tar copy of the
// same tree, all in the same run; it reports each and the ratio to tar.
func BenchmarkProjectReady(b *testing.B) {
	home := testenv.VMHome(b)
	tarCopy := func() (string, time.Duration) { return tarCopyOf(b, filepath.Join(runtime.GOROOT(), "src")) }
	tree, _ := tarCopy()
	empty := b.TempDir()
	run := func(project, sync string) time.Duration {
		var out, errOut bytes.Buffer
		settle()
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

// BenchmarkEditRun times the edit-run loop on a copy of the Go toolchain's
// source tree, on a warm snapshot, all in one run: a bare `airlock exec --
// true` (the boot), a local tar copy of the tree, the first run ever on
// the tree, the second run on the unchanged tree and the run after a
// one-file edit, those two also with the stat cache off
// (AIRLOCK_NO_STAT_CACHE, what came before it). It reports each run beyond
// the bare one and its ratio to tar; the targets are 1.0× unchanged and
// 1.5× after an edit.
func BenchmarkEditRun(b *testing.B) {
	if testing.Short() {
		b.Skip("boots VMs")
	}
	home := testenv.VMHome(b)
	tarCopy := func() (string, time.Duration) { return tarCopyOf(b, filepath.Join(runtime.GOROOT(), "src")) }
	tree, _ := tarCopy()
	edited := filepath.Join(tree, "fmt", "print.go")
	airlock := func(args ...string) time.Duration {
		var out, errOut bytes.Buffer
		settle()
		start := time.Now()
		if code := Main(append([]string{"--home", home}, args...), strings.NewReader(""), &out, &errOut); code != 0 {
			b.Fatalf("%v: exit %d\n%s", args, code, errOut.String())
		}
		return time.Since(start)
	}
	run := func(noCache bool) time.Duration {
		if noCache {
			os.Setenv("AIRLOCK_NO_STAT_CACHE", "1")
			defer os.Unsetenv("AIRLOCK_NO_STAT_CACHE")
		}
		return airlock("run", "--arch", "amd64", "--no-cache", "--project", tree, "--", "true")
	}
	edit := func(i int) {
		f, err := os.OpenFile(edited, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(f, "// edit %d\n", i)
		f.Close()
	}
	airlock("exec", "--arch", "amd64", "--", "true") // the warm snapshot
	var bare, tr, first, again, edit1, againOff, edit1Off time.Duration
	n := 0
	for b.Loop() {
		for _, dir := range []string{"baselines", "stat"} {
			if err := os.RemoveAll(filepath.Join(home, "cache", dir)); err != nil {
				b.Fatal(err)
			}
		}
		bare += airlock("exec", "--arch", "amd64", "--", "true")
		_, d := tarCopy()
		tr += d
		first += run(false)
		againOff += run(true)
		again += run(false)
		edit(2 * n)
		edit1Off += run(true)
		edit(2*n + 1)
		edit1 += run(false)
		n++
	}
	per := func(d time.Duration) time.Duration { return d / time.Duration(n) }
	extra := func(d time.Duration) time.Duration { return per(d) - per(bare) }
	ratio := func(d time.Duration) float64 { return float64(extra(d)) / float64(per(tr)) }
	b.ReportMetric(float64(per(bare).Milliseconds()), "ms/bare")
	b.ReportMetric(float64(per(tr).Milliseconds()), "ms/tar")
	b.ReportMetric(float64(extra(first).Milliseconds()), "ms/first")
	b.ReportMetric(float64(extra(again).Milliseconds()), "ms/unchanged")
	b.ReportMetric(float64(extra(edit1).Milliseconds()), "ms/edit")
	b.ReportMetric(ratio(again), "ratio-unchanged")
	b.ReportMetric(ratio(edit1), "ratio-edit")
	b.ReportMetric(ratio(againOff), "ratio-unchanged-nocache")
	b.ReportMetric(ratio(edit1Off), "ratio-edit-nocache")
	b.Logf("bare %v, tar %v; beyond bare: first %v, unchanged %v (no stat cache %v), after an edit %v (no stat cache %v); ratios to tar: unchanged %.2f (%.2f), edit %.2f (%.2f) (mean of %d)",
		per(bare), per(tr), extra(first), extra(again), extra(againOff), extra(edit1), extra(edit1Off),
		ratio(again), ratio(againOff), ratio(edit1), ratio(edit1Off), n)
}

// tarCopyOf copies the tree src with a local `tar -c | tar -x` into a new
// directory, the baseline the project benchmarks measure against, and
// says how long it took.
// settle writes back what earlier steps left dirty in the page cache
// before a timed step: the first run's baseline disk is hundreds of
// megabytes, and its writeback billed to the next step made a tar copy of
// the Go tree take 1 to 12 s in the same run.
func settle() { syscall.Sync() }

func tarCopyOf(b *testing.B, src string) (string, time.Duration) {
	b.Helper()
	dst := b.TempDir()
	settle()
	start := time.Now()
	c := exec.Command("sh", "-c", `tar -C "$1" -cf - . | tar -C "$2" -xf -`, "sh", src, dst)
	if out, err := c.CombinedOutput(); err != nil {
		b.Fatalf("tar: %v\n%s", err, out)
	}
	return dst, time.Since(start)
}
