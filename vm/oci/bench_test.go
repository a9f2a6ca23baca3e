package oci

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/testkit/ocitest"
	"github.com/airlock-dev/airlock/vm"
)

// BenchmarkPullConvert pulls an image of one layer, the Go toolchain's own
// sources (GOROOT/src, about 12k files), from a registry on loopback and
// writes it as a root disk, against the host's tar -xzf of the same
// layer blob into a directory, in the same run; it reports both and the
// ratio (pull+convert / tar, below 1 is faster).
func BenchmarkPullConvert(b *testing.B) {
	work := b.TempDir()
	layer := filepath.Join(work, "src.tar.gz")
	if out, err := exec.Command("tar", "-czf", layer, "-C", runtime.GOROOT(), "src").CombinedOutput(); err != nil {
		b.Fatalf("tar: %v %s", err, out)
	}
	reg := ocitest.NewRegistry(b)
	ref := reg.Push(b, "go/src:1", ocitest.Image(b, "amd64", nil, ocitest.LayerFromFile(b, layer)))
	var ours, tarx time.Duration
	n := 0
	for b.Loop() {
		dir := b.TempDir()
		start := time.Now()
		s := Store{Dir: filepath.Join(dir, "oci")}
		im, err := s.Pull(context.Background(), ref, PullOptions{Arch: vm.AMD64})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.WriteRootfs(context.Background(), im, filepath.Join(dir, "lower.img")); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(start)

		x := filepath.Join(dir, "x")
		if err := os.Mkdir(x, 0o755); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		if out, err := exec.Command("tar", "-xzf", layer, "-C", x).CombinedOutput(); err != nil {
			b.Fatalf("tar -x: %v %s", err, out)
		}
		tarx += time.Since(start)
		n++
	}
	b.ReportMetric(float64(ours.Milliseconds())/float64(n), "ms/pull+convert")
	b.ReportMetric(float64(tarx.Milliseconds())/float64(n), "ms/tar-x")
	b.ReportMetric(float64(ours)/float64(tarx), "ratio")
	b.Logf("pull+convert %v, tar -xzf %v, ratio %.2f (mean of %d)", ours/time.Duration(n), tarx/time.Duration(n), float64(ours)/float64(tarx), n)
}
