package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/testkit/testenv"
)

// TestDependencyCache runs a project six times on the minimal image: a
// file written in the cache directory by a run that succeeded is there in
// the next; one written by a run whose verify failed is not; the caches
// never appear among the changes; airlock status names the sandbox whose
// run left the caches a run started with; --fresh-cache starts without
// them and its own take their place; --no-cache runs without any.
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
		// Every run here collects a changeset (even the one whose verify
		// fails): without one, what the next step reads is meaningless
		// and its failure would not say why.
		if res.Changes == nil {
			t.Fatalf("run %q: exit %d and no changeset:\n%s%s", args, code, out, errOut)
		}
		return res
	}
	seen := func(res runResult) string {
		t.Helper()
		_, diff, _ := airlockCLI(t, home, "diff", res.Sandbox, "seen")
		return diff
	}
	first := run("--", "sh", "-c", "echo cached > $GOMODCACHE/marker && echo pip > $PIP_CACHE_DIR/p")
	if first.Changes == nil || first.Changes.Files != 0 {
		t.Errorf("the caches are among the changes: %+v", first.Changes)
	}
	run("--verify", "false", "--", "sh", "-c", "echo failed > $GOMODCACHE/marker2")
	res := run("--", "sh", "-c", "cat $GOMODCACHE/marker $PIP_CACHE_DIR/p > seen; ls $GOMODCACHE >> seen")
	got := seen(res)
	if !strings.Contains(got, "+cached") || !strings.Contains(got, "+pip") {
		t.Errorf("the cache of a run that succeeded is not in the next:\n%s", got)
	}
	if strings.Contains(got, "marker2") {
		t.Errorf("the cache of a run whose verify failed became the project's:\n%s", got)
	}
	// Where the caches came from is said: a poisoned cache sways a
	// result (issue 32). Run 3 started with run 1's.
	status := func(id string) string {
		t.Helper()
		_, out, _ := airlockCLI(t, home, "status", id)
		return out
	}
	if st := status(res.Sandbox); !strings.Contains(st, "caches    kept by sandbox "+first.Sandbox+"'s run") {
		t.Errorf("status does not say whose caches the run started with:\n%s", st)
	}
	// --fresh-cache: none of them, and its own kept when it succeeds.
	fresh := run("--fresh-cache", "--", "sh", "-c", "ls $GOMODCACHE > seen; echo fresh > $GOMODCACHE/fresh")
	if got := seen(fresh); strings.Contains(got, "marker") {
		t.Errorf("--fresh-cache started with the project's caches:\n%s", got)
	}
	if st := status(fresh.Sandbox); strings.Contains(st, "caches ") {
		t.Errorf("a fresh-cache run says it started with kept caches:\n%s", st)
	}
	after := run("--", "sh", "-c", "ls $GOMODCACHE > seen")
	if got := seen(after); !strings.Contains(got, "+fresh") || strings.Contains(got, "marker") {
		t.Errorf("the fresh run's caches did not take the project's place:\n%s", got)
	}
	if st := status(after.Sandbox); !strings.Contains(st, "kept by sandbox "+fresh.Sandbox+"'s run") {
		t.Errorf("status after the fresh run:\n%s", st)
	}
	if code, _, errOut := airlockCLI(t, home, "run", "--arch", "amd64", "--project", proj, "--no-cache", "--fresh-cache", "--", "true"); code == 0 || !strings.Contains(errOut, "choose one") {
		t.Errorf("--no-cache with --fresh-cache: exit %d %s", code, errOut)
	}
	res = run("--no-cache", "--", "sh", "-c", "if [ -d /var/cache/airlock/go ] || [ -n \"$GOMODCACHE\" ]; then echo cache; else echo none; fi > seen")
	if got := seen(res); !strings.Contains(got, "+none") {
		t.Errorf("--no-cache:\n%s", got)
	}
}
