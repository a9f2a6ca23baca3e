package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/testkit/testenv"
)

// TestDependencyCache runs a project four times on the minimal image: a
// file written in the cache directory by a run that succeeded is there in
// the next; one written by a run whose verify failed is not; the caches
// never appear among the changes; --no-cache runs without them.
func TestDependencyCache(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	proj := t.TempDir()
	if err := os.WriteFile(filepath.Join(proj, "README"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) runResult {
		t.Helper()
		code, out, errOut := airlockCLI(t, home, append([]string{"--json", "run", "--arch", "amd64", "--project", proj, "--disk", "none"}, args...)...)
		var res runResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("run %q: exit %d, %v\n%s%s", args, code, err, out, errOut)
		}
		return res
	}
	seen := func(res runResult) string {
		t.Helper()
		_, diff, _ := airlockCLI(t, home, "diff", res.Sandbox, "seen")
		return diff
	}
	res := run("--", "sh", "-c", "echo cached > $GOMODCACHE/marker && echo pip > $PIP_CACHE_DIR/p")
	if res.Changes == nil || res.Changes.Files != 0 {
		t.Errorf("the caches are among the changes: %+v", res.Changes)
	}
	run("--verify", "false", "--", "sh", "-c", "echo failed > $GOMODCACHE/marker2")
	res = run("--", "sh", "-c", "cat $GOMODCACHE/marker $PIP_CACHE_DIR/p > seen; ls $GOMODCACHE >> seen")
	got := seen(res)
	if !strings.Contains(got, "+cached") || !strings.Contains(got, "+pip") {
		t.Errorf("the cache of a run that succeeded is not in the next:\n%s", got)
	}
	if strings.Contains(got, "marker2") {
		t.Errorf("the cache of a run whose verify failed became the project's:\n%s", got)
	}
	res = run("--no-cache", "--", "sh", "-c", "if [ -d /var/cache/airlock/go ] || [ -n \"$GOMODCACHE\" ]; then echo cache; else echo none; fi > seen")
	if got := seen(res); !strings.Contains(got, "+none") {
		t.Errorf("--no-cache:\n%s", got)
	}
}
