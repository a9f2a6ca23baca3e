package launch_test

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/transfer"
	"github.com/airlock-dev/airlock/vm"
)

// TestWatchedCollectInGuest pushes and seeds a project in a real guest
// (the seed starts the guest's watcher), edits it in every way a command
// might, and collects twice through the watcher: each time the manifest
// is the one a whole walk of the guest's tree gives, and the guest says
// it looked only at the touched paths. A new seed replaces the watcher;
// none is left over.
func TestWatchedCollectInGuest(t *testing.T) {
	g := boot(t, vm.Arch(runtime.GOARCH))
	proj := t.TempDir()
	for p, c := range map[string]string{
		"README.md": "# demo\n", "main.go": "package main\n", "run.sh": "#!/bin/sh\n",
		".gitignore": "*.log\n", "src/a.txt": "a\n", "src/b.txt": "b\n", "src/deep/x/y.txt": "y\n",
		"old/one.txt": "one\n", "old/sub/two.txt": "two\n",
	} {
		os.MkdirAll(filepath.Join(proj, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(proj, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base, store := snapshot(t, proj)
	r := remote{g.Client}
	opts := transfer.Options{AgentPath: g.Client.Welcome().Agent}
	ctx := t.Context()
	if _, err := transfer.Push(ctx, r, "/workspace", base, store, opts); err != nil {
		t.Fatal(err)
	}
	known, err := transfer.Seed(ctx, r, "/workspace", base, opts)
	if err != nil {
		t.Fatal(err)
	}
	// How many watcher processes run in the guest.
	count := func() string {
		t.Helper()
		out, _, _ := run(t, g, client.Command{Script: `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f"; echo; done | grep -c '^/init watch' || true`})
		return strings.TrimSpace(out)
	}
	if n := count(); n != "1" {
		t.Fatalf("%s watchers after the seed, want 1", n)
	}
	// What a whole walk of the guest's tree gives now.
	whole := func() *manifest.Manifest {
		t.Helper()
		k, err := transfer.RemoteManifest(ctx, r, "/workspace", transfer.Known{}, transfer.Options{AgentPath: opts.AgentPath, FullWalk: true})
		if err != nil {
			t.Fatal(err)
		}
		return k.Manifest
	}
	edit := func(script string) {
		t.Helper()
		if _, stderr, err := run(t, g, client.Command{Script: "set -e; cd /workspace\n" + script}); err != nil {
			t.Fatalf("edit: %v\n%s", err, stderr)
		}
	}

	edit(`printf 'package main\n\nfunc main() {}\n' > main.go
mkdir -p gen/a/b gen/c; echo 1 > gen/a/b/f; echo 2 > gen/c/g; echo 3 > gen/h
mv src/deep moved; echo changed > moved/x/y.txt
mv src/b.txt src/b2.txt
rm -r old; rm README.md
chmod 755 run.sh; chmod 700 src
ln -s ../main.go src/link; mkfifo src/fifo; echo log > debug.log`)
	k2, err := transfer.RemoteManifest(ctx, r, "/workspace", known, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := whole() // also moves the watcher on, as any collect does
	if diff := cmp.Diff(want, k2.Manifest); diff != "" {
		t.Fatalf("watched collect differs from a whole walk (-whole +watched):\n%s", diff)
	}
	if len(k2.Skipped) != 1 || k2.Skipped[0].Path != "src/fifo" {
		t.Errorf("skipped %+v, want the fifo", k2.Skipped)
	}

	// The whole walk above took its own state: seed again from it, as a
	// new push would, then edit and collect by hand to read what the guest
	// says of its walk.
	known, err = transfer.Seed(ctx, r, "/workspace", want, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(); n != "1" {
		t.Fatalf("%s watchers after a second seed, want 1", n)
	}
	edit(`echo more >> gen/a/b/f; rm -r moved; mkdir -p new/deeper; echo n > new/deeper/n; echo z > z.txt`)
	var stdout, stderr bytes.Buffer
	if err := r.Exec(ctx, opts.AgentPath+" manifest --since "+known.ID+" /workspace", nil, &stdout, &stderr); err != nil {
		t.Fatalf("manifest: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "the watcher saw touched") {
		t.Errorf("the guest did not use its watcher: %s", stderr.String())
	}
	ls, err := manifest.DecodeListing(&stdout, manifest.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	m3, err := ls.Resolve(known.ID, known.Manifest, manifest.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(whole(), m3); diff != "" {
		t.Fatalf("watched collect differs from a whole walk (-whole +watched):\n%s", diff)
	}
	t.Logf("guest: %s", strings.TrimSpace(stderr.String()))
}
