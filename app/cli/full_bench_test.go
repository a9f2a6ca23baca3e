package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
)

// firstLine records when the first complete line is written to it.
type firstLine struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	start time.Time
	at    time.Duration
}

func (w *firstLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.at == 0 && bytes.Contains(w.buf.Bytes(), []byte("first-output\n")) {
		w.at = time.Since(w.start)
	}
	return len(p), nil
}

// BenchmarkRunToFirstOutput measures `airlock run` from its start to the
// command's first output line, cold (a new sandbox, a new VM, on the full
// image a new clone of the root disk), on the minimal and the full image
// in the same run; and reports the full image's size and a sandbox's clone
// of it. scripts/bench-full prints the comparison.
func BenchmarkRunToFirstOutput(b *testing.B) {
	testenv.SkipIfShort(b)
	im := testenv.FullImage(b, vm.AMD64)
	home := testenv.VMHome(b)
	project := b.TempDir()
	copyTree(b, filepath.Join(testenv.RepoRoot(b), "examples", "demo-project"), project)
	for _, name := range []string{"minimal", "full"} {
		b.Run(name, func(b *testing.B) {
			var total time.Duration
			var cloneBytes int64
			for b.Loop() {
				w := &firstLine{start: time.Now()}
				var errOut bytes.Buffer
				code := Main([]string{"--home", home, "run", "--arch", "amd64", "--image", name, "--project", project, "--no-verify",
					"--", "sh", "-c", "echo first-output"}, strings.NewReader(""), w, &errOut)
				if code != 0 || w.at == 0 {
					b.Fatalf("run on %s: exit %d\n%s%s", name, code, w.buf.String(), errOut.String())
				}
				total += w.at
				if name == "full" {
					st, _ := sandbox.Open(home)
					list, _ := st.List()
					for _, m := range list {
						sb, _ := st.Get(m.ID)
						if fi, err := os.Stat(sb.Path(pipeline.RootDiskFile)); err == nil {
							cloneBytes = fi.Sys().(*syscall.Stat_t).Blocks * 512
						}
						if code := Main([]string{"--home", home, "rm", m.ID}, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
							b.Fatalf("rm %s: exit %d", m.ID, code)
						}
					}
				}
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/first-output")
			if name == "full" {
				fi, err := os.Stat(im.Rootfs)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(fi.Size())/(1<<20), "MiB-image-apparent")
				b.ReportMetric(float64(fi.Sys().(*syscall.Stat_t).Blocks*512)/(1<<20), "MiB-image-allocated")
				b.ReportMetric(float64(cloneBytes)/(1<<20), "MiB-clone-allocated")
			}
		})
	}
}
