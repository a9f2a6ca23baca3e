package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// BenchmarkEnvironmentStart times `airlock exec -- true` on a built
// environment image (a pulled image and a setup step, booted as an overlay
// of its shared disk and the sandbox's own) against the same on the full
// image, both warm (each image's snapshot saved by a first exec), in the
// same run; it reports both and the ratio (environment / full).
func BenchmarkEnvironmentStart(b *testing.B) {
	home, full := fullHome(b)
	pullBusyboxB(b, home, "b-env-base")
	exec := func(img string) time.Duration {
		var out, errOut bytes.Buffer
		start := time.Now()
		if code := Main([]string{"--home", home, "exec", "--arch", "amd64", "--image", img, "--", "true"}, strings.NewReader(""), &out, &errOut); code != 0 {
			b.Fatalf("exec on %s: exit %d\n%s", img, code, errOut.String())
		}
		return time.Since(start)
	}
	var out, errOut bytes.Buffer
	if code := Main([]string{"--home", home, "image", "build", "--arch", "amd64", "b-env", "--from", "b-env-base", "--run", "echo built > /etc/built"},
		strings.NewReader(""), &out, &errOut); code != 0 {
		b.Fatalf("image build: exit %d\n%s", code, errOut.String())
	}
	exec("b-env") // saves the warm snapshots
	exec(full.Name)
	var env, fl time.Duration
	n := 0
	for b.Loop() {
		env += exec("b-env")
		fl += exec(full.Name)
		n++
	}
	b.ReportMetric(float64(env.Milliseconds())/float64(n), "ms/environment")
	b.ReportMetric(float64(fl.Milliseconds())/float64(n), "ms/full")
	b.ReportMetric(float64(env)/float64(fl), "ratio")
	b.Logf("environment %v, full image %v, ratio %.2f (warm, mean of %d)", env/time.Duration(n), fl/time.Duration(n), float64(env)/float64(fl), n)
}
