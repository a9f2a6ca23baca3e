package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/testkit/testenv"
)

// BenchmarkFanOut times `airlock run --fan-out N --parallel N` of a
// trivial command on the demo project, for N = 1, 2, 4: from the start to
// every attempt ready for review (one snapshot, N VMs booted, pushed,
// run, collected). It reports ms per attempt and the host disk each
// sandbox keeps (allocated blocks, after the run).
func BenchmarkFanOut(b *testing.B) {
	benchFanOut(b, testenv.VMHome(b), "minimal", "256MiB")
}

// BenchmarkFanOutFull is BenchmarkFanOut on the full image: each sandbox
// keeps its copy-on-write clone of the image's root disk, so its disk
// figure is what one more sandbox of the image costs the host.
func BenchmarkFanOutFull(b *testing.B) {
	home, _ := fullHome(b)
	benchFanOut(b, home, "full", "512MiB")
}

func benchFanOut(b *testing.B, home, image, memory string) {
	project := b.TempDir()
	copyTree(b, filepath.Join(testenv.RepoRoot(b), "examples", "demo-project"), project)
	// Warm up: the first VM of a process pays for the accelerator probe.
	var out, errOut bytes.Buffer
	if code := Main([]string{"--home", home, "exec", "--arch", "amd64", "--image", image, "--", "true"}, strings.NewReader(""), &out, &errOut); code != 0 {
		b.Fatalf("warm-up exec: exit %d\n%s", code, errOut.String())
	}
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			var disk int64
			for b.Loop() {
				var out, errOut bytes.Buffer
				code := Main([]string{"--home", home, "--json", "run", "--arch", "amd64", "--image", image, "--memory", memory, "--disk", "none",
					"--project", project, "--fan-out", fmt.Sprint(n), "--parallel", fmt.Sprint(n), "--", "sh", "-c", "echo $AIRLOCK_ATTEMPT > attempt.txt"},
					strings.NewReader(""), &out, &errOut)
				var res fanOutResult
				var err error
				if n == 1 { // a plain run: its own JSON
					var one runResult
					err = json.Unmarshal(out.Bytes(), &one)
					res.Attempts = []runResult{one}
				} else {
					err = json.Unmarshal(out.Bytes(), &res)
				}
				if code != 0 || err != nil || len(res.Attempts) != n {
					b.Fatalf("fan-out %d: exit %d, %v\n%s%s", n, code, err, out.String(), errOut.String())
				}
				b.StopTimer()
				disk = 0
				for _, a := range res.Attempts {
					disk += allocated(b, filepath.Join(home, "sandboxes", a.Sandbox))
					Main([]string{"--home", home, "rm", a.Sandbox}, strings.NewReader(""), &out, &errOut)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)/float64(n), "ms/attempt")
			b.ReportMetric(float64(disk)/float64(n)/1024, "KiB-disk/sandbox")
		})
	}
}

// allocated is the disk space a tree takes (allocated blocks, so sparse
// and shared-nothing files count what they really use).
func allocated(tb testing.TB, dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}
