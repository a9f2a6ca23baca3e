package launch_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
	"github.com/airlock-dev/airlock/sync/transfer"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
)

// The collect benchmark's tree: collectDirs directories of collectPerDir
// small files, each holding a line of its own, and collectChanged of them
// edited after the baseline is taken.
const (
	collectDirs    = 1000
	collectPerDir  = 100
	collectChanged = 10
)

// collectGenScript writes the tree into /workspace with busybox sh alone
// (no fork per file): far faster under TCG than pushing it.
var collectGenScript = fmt.Sprintf(`set -e; rm -rf /workspace; mkdir -p /workspace; cd /workspace
d=0
while [ $d -lt %d ]; do
  mkdir d$d; i=0
  while [ $i -lt %d ]; do echo "file $d/$i" > d$d/f$i.txt; i=$((i+1)); done
  d=$((d+1))
done
`, collectDirs, collectPerDir)

// collectChanges are the files the benchmark edits, relative to the tree.
func collectChanges() []string {
	var out []string
	for k := range collectChanged {
		out = append(out, fmt.Sprintf("d%d/f%d.txt", k*collectDirs/collectChanged, k*7))
	}
	return out
}

// genCollectTree writes on the host the tree collectGenScript writes in
// the guest, byte for byte.
func genCollectTree(b testing.TB, dir string) {
	b.Helper()
	for d := range collectDirs {
		dp := filepath.Join(dir, fmt.Sprintf("d%d", d))
		if err := os.Mkdir(dp, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := range collectPerDir {
			if err := os.WriteFile(filepath.Join(dp, fmt.Sprintf("f%d.txt", i)), fmt.Appendf(nil, "file %d/%d\n", d, i), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkCollect measures collect, what the pipeline does after the
// command, on a 100,000-file tree with 10 changed files, against `git
// status --porcelain` on the same tree:
//
//   - guest-collect: what the pipeline does. Before the command, the host
//     seeds the guest with the manifest it pushed (transfer.Seed, outside
//     the timer, reported as seed-ms: the guest starts its watcher, which
//     watches every directory, and records the stat data; here the tree is
//     written in the guest by a shell loop, since pushing 100k files under
//     TCG takes minutes, and an identical tree on the host gives the
//     manifest); then the edits are made (the command). Timed:
//     transfer.RemoteManifest (the guest looks only at the paths its
//     watcher saw touched and answers with the delta), manifest.Diff
//     against the baseline on the host, and transfer.Pull of the 10
//     changed files into a fresh content store.
//   - guest-collect-full: the same with transfer.Options.FullWalk: the
//     guest walks the whole tree, reading only files whose stat data
//     changed (what collect did before the watcher).
//   - guest-git-status: `git status --porcelain` in the same guest on the
//     same tree, its index committed and refreshed (git's stat cache
//     warm). The minimal image has no git, so the host's git and the
//     shared libraries it needs are copied into the guest's /tmp and run
//     through the dynamic loader. guest-collect against this is the
//     like-for-like ratio.
//   - guest-find-stat: busybox `find -newer`, which lstats every entry of
//     the same tree in the guest and reads no content: a floor for any
//     stat-based collect in the guest.
//   - host-collect: the same work on the host on an identical tree:
//     manifest.Walk (walk + SHA-256 of every file), manifest.Diff against
//     the baseline, the 10 changed files put into a fresh content store.
//   - host-collect-statcache: host-collect with a manifest.HashCache
//     filled by the baseline walk, so only files whose stat data changed
//     are read (what git's index does).
//   - host-git-status: `git status --porcelain` on that host tree, its
//     index committed and refreshed.
//
// Run it with scripts/bench-collect, which prints them with the ratios.
func BenchmarkCollect(b *testing.B) {
	testenv.SkipIfShort(b)
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Skip(b, testenv.Git, "git is not installed on the host")
	}
	g := bootWith(b, vm.Arch(runtime.GOARCH), 2048)
	ctx := context.Background()
	r := remote{g.Client}
	opts := transfer.Options{AgentPath: g.Client.Welcome().Agent}
	changed := collectChanges()
	exec1 := func(script string) string {
		b.Helper()
		var stdout, stderr bytes.Buffer
		if err := r.Exec(ctx, script, nil, &stdout, &stderr); err != nil {
			b.Fatalf("%s: %v\n%s", script, err, stderr.String())
		}
		return stdout.String()
	}

	// The guest's tree, and git in the guest when the host's can be run
	// there.
	start := time.Now()
	exec1(collectGenScript)
	b.Logf("guest: wrote %d files in %s", collectDirs*collectPerDir, time.Since(start).Round(time.Millisecond))
	guestGit := copyGit(b, r)
	if guestGit != "" {
		start = time.Now()
		exec1("cd /workspace && " + guestGit + " init -q && " + guestGit + " add -A && " + guestGit + " commit -q -m base")
		b.Logf("guest: git add and commit of the tree in %s", time.Since(start).Round(time.Millisecond))
	}

	// The host's tree, its baseline and its git index.
	hostDir := filepath.Join(b.TempDir(), "tree")
	if err := os.Mkdir(hostDir, 0o755); err != nil {
		b.Fatal(err)
	}
	genCollectTree(b, hostDir)
	generated := time.Now()
	git := func(args ...string) string {
		b.Helper()
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = hostDir
		cmd.Env = append(os.Environ(), gitEnv...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "baseline")
	// The baseline walk fills the stat cache, as the snapshot would. Files
	// written within two seconds of a walk are not remembered (nor kept
	// clean in git's index), so wait that long after writing the tree.
	time.Sleep(time.Until(generated.Add(2100 * time.Millisecond)))
	cache := &manifest.HashCache{}
	hostBase, _, err := manifest.Walk(ctx, hostDir, manifest.WalkOptions{Cache: cache})
	if err != nil {
		b.Fatal(err)
	}
	if cache.Len() != collectDirs*collectPerDir {
		b.Fatalf("the stat cache remembers %d files, want %d", cache.Len(), collectDirs*collectPerDir)
	}
	// What the pipeline does after the push: seed the guest with the
	// manifest of what it pushed. The guest's tree is the host's, byte for
	// byte (checked below by the first collect finding exactly the edits).
	seed := func(b *testing.B) transfer.Known {
		b.Helper()
		k, err := transfer.Seed(ctx, r, "/workspace", hostBase, opts)
		if err != nil {
			b.Fatal(err)
		}
		if k.ID == "" {
			b.Fatal("the guest agent was not seeded")
		}
		return k
	}
	start = time.Now()
	seed(b)
	b.Logf("guest: seeded in %s", time.Since(start).Round(time.Millisecond))

	// The command's edits, in both trees. In the guest they are undone
	// and made again around each seed (the seed vouches for the baseline,
	// and its watcher must see the command's changes).
	edit, undo := "set -e; cd /workspace", "set -e; cd /workspace"
	for k, p := range changed {
		edit += "; echo changed >> " + p
		undo += fmt.Sprintf("; echo 'file %d/%d' > %s", k*collectDirs/collectChanged, k*7, p)
	}
	exec1("touch /tmp/collect-stamp; sleep 1; " + edit)
	if guestGit != "" {
		exec1("cd /workspace && " + guestGit + " status --porcelain >/dev/null") // refreshes the index
	}
	for _, p := range changed {
		f, err := os.OpenFile(filepath.Join(hostDir, p), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		f.WriteString("changed\n")
		f.Close()
	}
	git("status", "--porcelain") // refreshes the index's stat cache
	// The walk must not see .git as part of the project: it never does.

	checkChanges := func(b *testing.B, changes []manifest.Change) {
		b.Helper()
		if len(changes) != collectChanged {
			b.Fatalf("%d changes, want %d", len(changes), collectChanged)
		}
		for _, c := range changes {
			if c.Kind != manifest.Modified {
				b.Fatalf("unexpected change %+v", c)
			}
		}
	}
	freshStore := func(b *testing.B) *objects.Store {
		b.Helper()
		b.StopTimer()
		defer b.StartTimer()
		s, err := objects.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		return s
	}

	guestCollect := func(b *testing.B, opts transfer.Options) {
		var tManifest, tDiff, tPull, tSeed time.Duration
		for b.Loop() {
			store := freshStore(b)
			b.StopTimer()
			exec1(undo)
			ts := time.Now()
			known := seed(b) // as after the push: the guest knows the baseline
			tSeed += time.Since(ts)
			exec1(edit) // the command
			b.StartTimer()
			t0 := time.Now()
			after, err := transfer.RemoteManifest(ctx, r, "/workspace", known, opts)
			if err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			changes := manifest.Diff(hostBase, after.Manifest)
			t2 := time.Now()
			st, err := transfer.Pull(ctx, r, "/workspace", changes, store, opts)
			if err != nil {
				b.Fatal(err)
			}
			t3 := time.Now()
			checkChanges(b, changes)
			if st.Files != collectChanged {
				b.Fatalf("pulled %d files, want %d", st.Files, collectChanged)
			}
			tManifest += t1.Sub(t0)
			tDiff += t2.Sub(t1)
			tPull += t3.Sub(t2)
		}
		n := float64(b.N)
		b.ReportMetric(float64(tManifest.Milliseconds())/n, "manifest-ms/op")
		b.ReportMetric(float64(tDiff.Milliseconds())/n, "diff-ms/op")
		b.ReportMetric(float64(tPull.Milliseconds())/n, "pull-ms/op")
		b.ReportMetric(float64(tSeed.Milliseconds())/n, "seed-ms/op")
	}
	b.Run("guest-collect", func(b *testing.B) { guestCollect(b, opts) })
	b.Run("guest-collect-full", func(b *testing.B) {
		o := opts
		o.FullWalk = true // what the watcher saves: a whole walk with the stat cache
		guestCollect(b, o)
	})
	if guestGit != "" {
		exec1("cd /workspace && " + guestGit + " status --porcelain >/dev/null") // refreshes the index after the redone edits
	}
	if guestGit != "" {
		b.Run("guest-git-status", func(b *testing.B) {
			for b.Loop() {
				out := exec1("cd /workspace && " + guestGit + " status --porcelain")
				if n := strings.Count(out, "\n"); n != collectChanged {
					b.Fatalf("git status in the guest lists %d paths, want %d:\n%s", n, collectChanged, out)
				}
			}
		})
	}
	b.Run("guest-find-stat", func(b *testing.B) {
		for b.Loop() {
			out := exec1("find /workspace -type f -newer /tmp/collect-stamp")
			if n := strings.Count(out, "\n"); n != collectChanged {
				b.Fatalf("find saw %d changed files, want %d", n, collectChanged)
			}
		}
	})
	hostCollect := func(b *testing.B, wo manifest.WalkOptions) {
		for b.Loop() {
			store := freshStore(b)
			after, _, err := manifest.Walk(ctx, hostDir, wo)
			if err != nil {
				b.Fatal(err)
			}
			changes := manifest.Diff(hostBase, after)
			for _, c := range changes {
				f, err := os.Open(filepath.Join(hostDir, c.Path))
				if err != nil {
					b.Fatal(err)
				}
				err = store.PutExpect(f, c.New.SHA256, c.New.Size)
				f.Close()
				if err != nil {
					b.Fatal(err)
				}
			}
			checkChanges(b, changes)
		}
	}
	b.Run("host-collect", func(b *testing.B) { hostCollect(b, manifest.WalkOptions{}) })
	b.Run("host-collect-statcache", func(b *testing.B) { hostCollect(b, manifest.WalkOptions{Cache: cache}) })
	b.Run("host-git-status", func(b *testing.B) {
		for b.Loop() {
			out := git("status", "--porcelain")
			if n := strings.Count(out, "\n"); n != collectChanged {
				b.Fatalf("git status lists %d paths, want %d:\n%s", n, collectChanged, out)
			}
		}
	})
}

// gitEnv keeps git away from any user or system configuration and
// automatic maintenance.
var gitEnv = []string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "HOME=/tmp",
	"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
	"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com"}

// copyGit copies the host's git and the shared libraries it loads into
// the guest's /tmp/git and returns a shell command line that runs it there
// through the dynamic loader, or "" (with the reason logged) when that is
// not possible: another architecture, or no ldd.
func copyGit(b *testing.B, r remote) string {
	b.Helper()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return ""
	}
	out, err := exec.Command("ldd", gitPath).Output()
	if err != nil {
		b.Logf("no git in the guest: ldd %s: %v", gitPath, err)
		return ""
	}
	files := []string{gitPath}
	loader := ""
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			files = append(files, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			loader = f[0]
			files = append(files, f[0])
		}
	}
	if loader == "" {
		b.Logf("no git in the guest: no dynamic loader in ldd's output for %s", gitPath)
		return ""
	}
	sc, err := r.SFTP()
	if err != nil {
		b.Fatal(err)
	}
	defer sc.Close()
	if err := sc.MkdirAll("/tmp/git"); err != nil {
		b.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		w, err := sc.Create("/tmp/git/" + filepath.Base(f))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			b.Fatal(err)
		}
		w.Close()
		sc.Chmod("/tmp/git/"+filepath.Base(f), 0o755)
	}
	env := strings.Join(gitEnv, " ")
	return "env " + env + " /tmp/git/" + filepath.Base(loader) + " --library-path /tmp/git /tmp/git/git -c gc.auto=0 -c maintenance.auto=false -c core.untrackedCache=false"
}
