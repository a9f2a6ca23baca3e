package transfer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/transfer"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// The per-file cap of these tests: small, so a sparse file goes over it.
const overlayFileCap = 1 << 20

// overlayGuest is the disk sync mode played on this host: a baseline
// disk's root (id, tree), an overlay on it with its upper layer on tmpfs,
// and the real guest binary run by a localRemote.
type overlayGuest struct {
	disk, tree, upper, merged string
	id                        string
	base                      *manifest.Manifest
	wo                        manifest.WalkOptions
	opts                      transfer.Options
	r                         *localRemote
	out                       *bytes.Buffer // what the last collect printed
}

// newOverlayGuest writes the baseline tree with build, walks it (the
// baseline manifest), lets tamper touch the upper layer before the mount
// (nil: nothing), and mounts the overlay as the guest does.
func newOverlayGuest(t *testing.T, build func(tree string), tamper func(upper string)) *overlayGuest {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Skip(t, testenv.Overlayfs, "mounting an overlay needs root")
	}
	g := &overlayGuest{disk: t.TempDir(), out: &bytes.Buffer{}}
	g.tree = filepath.Join(g.disk, transfer.BaselineTreeDir)
	must(t, os.Mkdir(g.tree, 0o755))
	build(g.tree)
	g.id = strings.Repeat("0123456789abcdef", 4)
	must(t, os.WriteFile(filepath.Join(g.disk, transfer.BaselineIDFile), []byte(g.id+"\n"), 0o444))
	g.wo = manifest.WalkOptions{MaxFileSize: overlayFileCap}
	// The host's baseline holds files over the cap that it pushed.
	m, _, err := manifest.Walk(t.Context(), g.tree, manifest.WalkOptions{})
	must(t, err)
	g.base = m

	rw, merged := t.TempDir(), t.TempDir()
	if err := unix.Mount("tmpfs", rw, "tmpfs", 0, "size=64m"); err != nil {
		testenv.Skip(t, testenv.Overlayfs, fmt.Sprintf("mount a tmpfs for the upper layer: %v", err))
	}
	t.Cleanup(func() { unmount(t, rw) })
	g.upper = filepath.Join(rw, "upper")
	must(t, os.Mkdir(g.upper, 0o755))
	must(t, os.Mkdir(filepath.Join(rw, "work"), 0o755))
	if tamper != nil {
		tamper(g.upper)
	}
	opts := "lowerdir=" + g.tree + ",upperdir=" + g.upper + ",workdir=" + filepath.Join(rw, "work") +
		",redirect_dir=off,metacopy=off,index=off"
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		testenv.Skip(t, testenv.Overlayfs, fmt.Sprintf("mount an overlay: %v", err))
	}
	t.Cleanup(func() { unmount(t, merged) })
	g.merged = merged
	g.r = recording(t, g.out)
	g.opts = transfer.Options{
		AgentPath: agentBin(t),
		Limits:    manifest.Limits{MaxFileSize: overlayFileCap},
		Overlay:   transfer.OverlayDirs{Lower: g.disk, Upper: g.upper},
	}
	return g
}

func unmount(t *testing.T, dir string) {
	if err := unix.Unmount(dir, 0); err != nil {
		t.Errorf("unmount %s: %v", dir, err)
		unix.Unmount(dir, unix.MNT_DETACH)
	}
}

// known is what the host knows before the first collect: the baseline.
func (g *overlayGuest) known() transfer.Known {
	return transfer.Known{ID: g.id, Manifest: g.base}
}

// collect runs RemoteManifest against the guest and returns the listing
// the guest printed with what the host made of it.
func (g *overlayGuest) collect(t *testing.T, since transfer.Known) (*manifest.Listing, transfer.Known) {
	t.Helper()
	k, err := transfer.RemoteManifest(t.Context(), g.r, g.merged, since, g.opts)
	if err != nil {
		t.Fatal(err)
	}
	var ls manifest.Listing
	must(t, json.Unmarshal(g.out.Bytes(), &ls))
	return &ls, k
}

// truth is what the copy mode gives: a whole walk of the merged tree,
// with the baseline's entries kept where files were left out for size.
func (g *overlayGuest) truth(t *testing.T) *manifest.Manifest {
	t.Helper()
	m, report, err := manifest.Walk(t.Context(), g.merged, g.wo)
	must(t, err)
	return manifest.KeepLeftOut(m, g.base, manifest.Noteworthy(report.Excluded))
}

// check asserts that the host resolved the truth from a delta against
// the baseline that holds only real changes, and returns the delta as
// "+path" (changed) and "-path" (deleted) in path order.
func (g *overlayGuest) check(t *testing.T, ls *manifest.Listing, k transfer.Known) []string {
	t.Helper()
	if ls.Base != g.id || ls.ID != g.id || len(ls.Entries) > 0 {
		t.Errorf("the guest did not answer with a delta against the baseline: id %q base %q, %d entries", ls.ID, ls.Base, len(ls.Entries))
	}
	if k.ID != g.id {
		t.Errorf("the host holds %q, want the baseline %q", k.ID, g.id)
	}
	want := g.truth(t)
	if diff := cmp.Diff(want, manifest.KeepLeftOut(k.Manifest, g.base, k.Skipped)); diff != "" {
		t.Errorf("resolved manifest differs from a walk of the merged tree (-walk +resolved):\n%s", diff)
	}
	large := map[string]bool{}
	for _, x := range ls.Skipped {
		if x.Reason == manifest.ReasonTooLarge {
			large[x.Path] = true
		}
	}
	var delta []string
	for _, e := range ls.Changed {
		if b, ok := g.base.Lookup(e.Path); ok && b == e {
			t.Errorf("%s is listed as changed but is the baseline's", e.Path)
		}
		delta = append(delta, "+"+e.Path)
	}
	for _, p := range ls.Deleted {
		if _, ok := g.base.Lookup(p); !ok {
			t.Errorf("%s is listed as deleted but is not the baseline's", p)
		}
		if _, ok := want.Lookup(p); ok && !large[p] {
			t.Errorf("%s is listed as deleted but is there", p)
		}
		delta = append(delta, "-"+p)
	}
	slices.SortFunc(delta, func(a, b string) int { return strings.Compare(a[1:], b[1:]) })
	return delta
}

// overlayTree is the baseline of the named cases.
func overlayTree(t *testing.T) func(string) {
	return func(tree string) {
		writeTree(t, tree, map[string]string{
			".gitignore":         "node_modules/\n*.log\n",
			"README.md":          "hello\n",
			"main.go":            "package main\n",
			"run.sh":             "#!/bin/sh\n",
			"data.bin":           "data\n",
			"lib":                "lib file\n",
			"link":               "-> main.go",
			"src/a.go":           "package src\n",
			"src/b.go":           "package src // b\n",
			"src/deep/x/y.txt":   "y\n",
			"docs/guide.md":      "guide\n",
			"docs/img/logo.svg":  "<svg/>\n",
			"empty/":             "",
			"weird name ü'$.txt": "quoted\n",
		}, map[string]fs.FileMode{"run.sh": 0o755})
		f, err := os.Create(filepath.Join(tree, "big.bin"))
		must(t, err)
		must(t, f.Truncate(2*overlayFileCap))
		must(t, f.Close())
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, out)
	}
}

// A collect from the upper layer gives what a whole walk of the merged
// tree gives, from a delta holding only real changes, for every kind of
// change an agent makes.
func TestOverlayCollect(t *testing.T) {
	write := func(t *testing.T, p, s string) {
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(s), 0o644))
	}
	sparse := func(t *testing.T, p string, size int64) {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
		must(t, err)
		must(t, f.Truncate(size))
		must(t, f.Close())
	}
	for _, tc := range []struct {
		name    string
		change  func(t *testing.T, ws string)
		want    []string
		skipped []string // "path reason"
	}{
		{"edit", func(t *testing.T, ws string) {
			write(t, filepath.Join(ws, "main.go"), "package main // edited\n")
		}, []string{"+main.go"}, nil},
		{"add", func(t *testing.T, ws string) {
			write(t, filepath.Join(ws, "src/c.go"), "package src // c\n")
			write(t, filepath.Join(ws, "new/dir/f.txt"), "f\n")
		}, []string{"+new", "+new/dir", "+new/dir/f.txt", "+src/c.go"}, nil},
		{"delete", func(t *testing.T, ws string) {
			must(t, os.Remove(filepath.Join(ws, "README.md")))
		}, []string{"-README.md"}, nil},
		{"delete-dir", func(t *testing.T, ws string) {
			must(t, os.RemoveAll(filepath.Join(ws, "docs")))
		}, []string{"-docs", "-docs/guide.md", "-docs/img", "-docs/img/logo.svg"}, nil},
		{"rename-dir", func(t *testing.T, ws string) {
			// EXDEV with redirect_dir=off: mv copies, then deletes.
			if err := os.Rename(filepath.Join(ws, "src/deep"), filepath.Join(ws, "src/shallow")); !errors.Is(err, syscall.EXDEV) {
				t.Fatalf("rename of a lower directory: %v, want EXDEV", err)
			}
			run(t, "mv", filepath.Join(ws, "src/deep"), filepath.Join(ws, "src/shallow"))
		}, []string{"-src/deep", "-src/deep/x", "-src/deep/x/y.txt", "+src/shallow", "+src/shallow/x", "+src/shallow/x/y.txt"}, nil},
		{"rename-file", func(t *testing.T, ws string) {
			must(t, os.Rename(filepath.Join(ws, "main.go"), filepath.Join(ws, "cmd.go")))
		}, []string{"+cmd.go", "-main.go"}, nil},
		{"mode", func(t *testing.T, ws string) {
			must(t, os.Chmod(filepath.Join(ws, "run.sh"), 0o644))
			must(t, os.Chmod(filepath.Join(ws, "src"), 0o700))
		}, []string{"+run.sh", "+src"}, nil},
		{"symlinks", func(t *testing.T, ws string) {
			must(t, os.Symlink("../main.go", filepath.Join(ws, "src/l")))
			must(t, os.Remove(filepath.Join(ws, "link")))
			must(t, os.Symlink("README.md", filepath.Join(ws, "link")))
			must(t, os.Remove(filepath.Join(ws, "README.md")))
			must(t, os.Symlink("/etc/passwd", filepath.Join(ws, "README.md")))
		}, []string{"+README.md", "+link", "+src/l"}, nil},
		{"file-to-dir", func(t *testing.T, ws string) {
			must(t, os.Remove(filepath.Join(ws, "lib")))
			write(t, filepath.Join(ws, "lib/mod.txt"), "mod\n")
		}, []string{"+lib", "+lib/mod.txt"}, nil},
		{"dir-to-file", func(t *testing.T, ws string) {
			must(t, os.RemoveAll(filepath.Join(ws, "docs")))
			write(t, filepath.Join(ws, "docs"), "now a file\n")
		}, []string{"+docs", "-docs/guide.md", "-docs/img", "-docs/img/logo.svg"}, nil},
		{"hard-links", func(t *testing.T, ws string) {
			must(t, os.Link(filepath.Join(ws, "main.go"), filepath.Join(ws, "main2.go")))
			write(t, filepath.Join(ws, "n.txt"), "n\n")
			must(t, os.Link(filepath.Join(ws, "n.txt"), filepath.Join(ws, "src/n2.txt")))
		}, []string{"+main2.go", "+n.txt", "+src/n2.txt"}, nil},
		{"empty-dirs", func(t *testing.T, ws string) {
			must(t, os.Remove(filepath.Join(ws, "empty")))
			must(t, os.Mkdir(filepath.Join(ws, "newempty"), 0o755))
		}, []string{"-empty", "+newempty"}, nil},
		{"touch", func(t *testing.T, ws string) {
			now := time.Now()
			must(t, os.Chtimes(filepath.Join(ws, "main.go"), now, now))
			must(t, os.Chtimes(filepath.Join(ws, "src/deep/x"), now, now))
			must(t, os.Chtimes(filepath.Join(ws, "link"), now, now)) // its target, main.go
		}, nil, nil},
		{"same-content", func(t *testing.T, ws string) {
			write(t, filepath.Join(ws, "README.md"), "hello\n")
			must(t, os.Chmod(filepath.Join(ws, "run.sh"), 0o755))
			must(t, os.Chmod(filepath.Join(ws, "docs/img"), 0o755))
			must(t, os.Remove(filepath.Join(ws, "src/a.go")))
			write(t, filepath.Join(ws, "src/a.go"), "package src\n")
		}, nil, nil},
		{"gitignore-edit", func(t *testing.T, ws string) {
			// The root's rules changed: both trees are walked whole, and
			// the baseline's file over the cap is named again, as a whole
			// walk in the copy mode names it; the host keeps it.
			write(t, filepath.Join(ws, ".gitignore"), "node_modules/\n*.log\n*.md\n")
		}, []string{"+.gitignore", "-README.md", "-big.bin", "-docs/guide.md"}, []string{"big.bin too-large"}},
		{"gitignore-comment", func(t *testing.T, ws string) {
			write(t, filepath.Join(ws, ".gitignore"), "# deps\nnode_modules/\r\n\n*.log\n")
		}, []string{"+.gitignore"}, nil},
		{"gitignore-nested", func(t *testing.T, ws string) {
			write(t, filepath.Join(ws, "src/.gitignore"), "b.go\n")
		}, []string{"+src/.gitignore", "-src/b.go"}, nil},
		{"ignored-new-files", func(t *testing.T, ws string) {
			for i := range 50 {
				write(t, filepath.Join(ws, "node_modules/pkg"+strconv.Itoa(i%5)+"/lib/f"+strconv.Itoa(i)+".js"), "x\n")
			}
			write(t, filepath.Join(ws, "src/debug.log"), "log\n")
		}, nil, nil},
		{"over-the-cap", func(t *testing.T, ws string) {
			sparse(t, filepath.Join(ws, "huge.bin"), 3*overlayFileCap)
			sparse(t, filepath.Join(ws, "data.bin"), 2*overlayFileCap)
			write(t, filepath.Join(ws, "main.go"), "package main // and an edit\n")
		}, []string{"-data.bin", "+main.go"}, []string{"data.bin too-large", "huge.bin too-large"}},
		{"over-the-cap-baseline", func(t *testing.T, ws string) {
			must(t, os.Chmod(filepath.Join(ws, "big.bin"), 0o600)) // a copy-up
		}, []string{"-big.bin"}, []string{"big.bin too-large"}},
		{"over-the-cap-deleted", func(t *testing.T, ws string) {
			must(t, os.Remove(filepath.Join(ws, "big.bin")))
		}, []string{"-big.bin"}, nil},
		{"over-the-cap-shrunk", func(t *testing.T, ws string) {
			must(t, os.Truncate(filepath.Join(ws, "big.bin"), 10))
		}, []string{"+big.bin"}, nil},
		{"fifo", func(t *testing.T, ws string) {
			must(t, syscall.Mkfifo(filepath.Join(ws, "src/pipe"), 0o644))
		}, nil, []string{"src/pipe special-file"}},
		{"device", func(t *testing.T, ws string) {
			must(t, unix.Mknod(filepath.Join(ws, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		}, nil, []string{"null special-file"}},
		{"opaque", func(t *testing.T, ws string) {
			must(t, os.RemoveAll(filepath.Join(ws, "src/deep")))
			write(t, filepath.Join(ws, "src/deep/z.txt"), "z\n")
		}, []string{"-src/deep/x", "-src/deep/x/y.txt", "+src/deep/z.txt"}, nil},
		{"whiteout-of-new", func(t *testing.T, ws string) {
			write(t, filepath.Join(ws, "tmp.txt"), "tmp\n")
			must(t, os.Remove(filepath.Join(ws, "tmp.txt")))
			must(t, os.Mkdir(filepath.Join(ws, "tmpdir"), 0o755))
			must(t, os.Remove(filepath.Join(ws, "tmpdir")))
		}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newOverlayGuest(t, overlayTree(t), nil)
			tc.change(t, g.merged)
			ls, k := g.collect(t, g.known())
			if diff := cmp.Diff(tc.want, g.check(t, ls, k)); diff != "" {
				t.Errorf("delta (-want +got):\n%s", diff)
			}
			var skipped []string
			for _, x := range k.Skipped {
				skipped = append(skipped, x.Path+" "+string(x.Reason))
			}
			if diff := cmp.Diff(tc.skipped, skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
		})
	}
}

// A .gitignore edit that changes no pattern, and a new .gitignore in a
// directory, cost no walk of the whole tree; a changed root .gitignore
// does.
func TestOverlayRulesWalk(t *testing.T) {
	for _, tc := range []struct {
		name, path, content string
		whole               bool
	}{
		{"comment", ".gitignore", "# deps\nnode_modules/\n*.log\n", false},
		{"nested", "src/.gitignore", "b.go\n", false},
		{"root", ".gitignore", "node_modules/\n", true},
		{"git-init", ".git/info/exclude", "# git ls-files --others --exclude-from=.git/info/exclude\n", false},
		{"git-exclude", ".git/info/exclude", "*.go\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newOverlayGuest(t, overlayTree(t), nil)
			must(t, os.MkdirAll(filepath.Dir(filepath.Join(g.merged, tc.path)), 0o755))
			must(t, os.WriteFile(filepath.Join(g.merged, tc.path), []byte(tc.content), 0o644))
			var log, out bytes.Buffer
			err := transfer.WriteOverlayListing(t.Context(), g.merged, transfer.OverlayListingOptions{
				Walk: g.wo, LowerDisk: g.disk, Upper: g.upper, Since: g.id,
				Logger: slog.New(slog.NewTextHandler(&log, nil)),
			}, &out)
			must(t, err)
			if got := strings.Contains(log.String(), "whole"); got != tc.whole {
				t.Errorf("walked the whole trees: %v, want %v\n%s", got, tc.whole, log.String())
			}
			ls, err := manifest.DecodeListing(&out, g.opts.Limits)
			must(t, err)
			m, err := ls.Resolve(g.id, g.base, manifest.Limits{MaxFileSize: -1})
			must(t, err)
			if diff := cmp.Diff(g.truth(t), manifest.KeepLeftOut(m, g.base, ls.Skipped)); diff != "" {
				t.Errorf("resolved (-walk +resolved):\n%s", diff)
			}
		})
	}
}

// Randomized trees and change scripts, in rounds: after each, the host
// resolves exactly what a whole walk gives, naming the baseline again.
func TestOverlayCollectRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("AIRLOCK_TEST_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (AIRLOCK_TEST_SEED=%d repeats this run)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for i := range 6 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			g := newOverlayGuest(t, func(tree string) { randomTree(t, rng, tree) }, nil)
			k := g.known()
			for round := range 3 {
				var script []string
				for range 1 + rng.IntN(25) {
					script = append(script, randomChange(t, rng, g.merged))
				}
				ls, k2 := g.collect(t, k)
				delta := g.check(t, ls, k2)
				t.Logf("round %d: %d changes made, delta of %d", round, len(script), len(delta))
				if t.Failed() {
					t.Fatalf("round %d, after:\n%s", round, strings.Join(script, "\n"))
				}
				k = k2
			}
		})
	}
}

// randomTree writes a tree of a few dozen entries under root.
func randomTree(t *testing.T, rng *rand.Rand, root string) {
	dirs := []string{""}
	for i := range 12 {
		parent := dirs[rng.IntN(len(dirs))]
		d := filepath.Join(parent, "d"+strconv.Itoa(i))
		must(t, os.Mkdir(filepath.Join(root, d), 0o755))
		dirs = append(dirs, d)
	}
	for i := range 40 {
		p := filepath.Join(root, dirs[rng.IntN(len(dirs))], "f"+strconv.Itoa(i)+".txt")
		switch rng.IntN(8) {
		case 0:
			must(t, os.Symlink("f"+strconv.Itoa(rng.IntN(40))+".txt", p))
		case 1:
			must(t, os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755))
		default:
			must(t, os.WriteFile(p, []byte(strings.Repeat("line "+strconv.Itoa(i)+"\n", rng.IntN(4))), 0o644))
		}
	}
	if rng.IntN(2) == 0 {
		must(t, os.WriteFile(filepath.Join(root, ".gitignore"), []byte("*.log\nignored/\n"), 0o644))
	}
}

// randomChange makes one change in the tree at ws, as an agent would,
// and says what it did.
func randomChange(t *testing.T, rng *rand.Rand, ws string) string {
	var files, dirs, all []string
	filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == ws {
			return nil
		}
		rel, _ := filepath.Rel(ws, p)
		all = append(all, rel)
		switch {
		case d.IsDir():
			dirs = append(dirs, rel)
		case d.Type().IsRegular():
			files = append(files, rel)
		}
		return nil
	})
	pick := func(from []string) string {
		if len(from) == 0 {
			return ""
		}
		return from[rng.IntN(len(from))]
	}
	dirOrRoot := func() string {
		if rng.IntN(4) == 0 {
			return ""
		}
		return pick(dirs)
	}
	name := func() string { return "n" + strconv.Itoa(rng.IntN(1000)) }
	at := func(rel string) string { return filepath.Join(ws, rel) }
	f, d := pick(files), pick(dirs)
	switch op := rng.IntN(17); {
	case op == 0 && f != "":
		must(t, os.WriteFile(at(f), []byte("edited "+name()+"\n"), 0o644))
		return "edit " + f
	case op == 1:
		p := filepath.Join(dirOrRoot(), name()+".txt")
		os.WriteFile(at(p), []byte("new\n"), 0o644)
		return "add " + p
	case op == 2 && f != "":
		must(t, os.Remove(at(f)))
		return "rm " + f
	case op == 3 && d != "":
		must(t, os.RemoveAll(at(d)))
		return "rm -r " + d
	case op == 4 && d != "":
		to := filepath.Join(filepath.Dir(d), name())
		if _, err := os.Lstat(at(to)); err == nil || strings.HasPrefix(to+"/", d+"/") {
			return "nothing"
		}
		run(t, "mv", at(d), at(to))
		return "mv " + d + " " + to
	case op == 5 && f != "":
		to := filepath.Join(dirOrRoot(), name()+".txt")
		os.Rename(at(f), at(to))
		return "mv " + f + " " + to
	case op == 6 && len(all) > 0:
		p := pick(all)
		if info, err := os.Lstat(at(p)); err == nil && info.Mode()&fs.ModeSymlink == 0 {
			must(t, os.Chmod(at(p), fs.FileMode([]int{0o600, 0o644, 0o700, 0o755}[rng.IntN(4)])))
		}
		return "chmod " + p
	case op == 7:
		p := filepath.Join(dirOrRoot(), name())
		os.Symlink(pick(all), at(p))
		return "ln -s " + p
	case op == 8 && f != "":
		must(t, os.Remove(at(f)))
		must(t, os.Mkdir(at(f), 0o755))
		must(t, os.WriteFile(at(filepath.Join(f, "mod.txt")), []byte("mod\n"), 0o644))
		return "file to dir " + f
	case op == 9 && d != "":
		must(t, os.RemoveAll(at(d)))
		must(t, os.WriteFile(at(d), []byte("was a dir\n"), 0o644))
		return "dir to file " + d
	case op == 10 && f != "":
		p := filepath.Join(dirOrRoot(), name())
		os.Link(at(f), at(p))
		return "ln " + f + " " + p
	case op == 11:
		p := filepath.Join(dirOrRoot(), name())
		os.Mkdir(at(p), 0o755)
		return "mkdir " + p
	case op == 12 && len(all) > 0:
		p := pick(all)
		now := time.Now()
		os.Chtimes(at(p), now, now)
		return "touch " + p
	case op == 13 && f != "":
		b, err := os.ReadFile(at(f))
		must(t, err)
		must(t, os.WriteFile(at(f), b, 0o600))
		return "rewrite " + f
	case op == 14:
		p := filepath.Join(dirOrRoot(), "x.log")
		os.WriteFile(at(p), []byte("ignored\n"), 0o644)
		return "add ignored " + p
	case op == 15:
		p := filepath.Join(dirOrRoot(), ".gitignore")
		os.WriteFile(at(p), []byte([]string{"*.txt\n", "# none\n", "!x.log\n", "d*/\n"}[rng.IntN(4)]), 0o644)
		return "gitignore " + p
	case op == 16 && d != "":
		must(t, os.RemoveAll(at(d)))
		must(t, os.Mkdir(at(d), 0o755))
		os.WriteFile(at(filepath.Join(d, "f0.txt")), []byte("line 0\n"), 0o644)
		return "replace dir " + d
	}
	return "nothing"
}

// What the upper layer holds is never trusted to be what an overlay
// made: whiteouts of nothing, links in place of directories, links out
// of the tree, a device, all give what a walk of the merged tree gives.
func TestOverlayHostileUpper(t *testing.T) {
	whiteout := func(p string) {
		must(t, unix.Mknod(p, unix.S_IFCHR, 0))
	}
	g := newOverlayGuest(t, overlayTree(t), func(upper string) {
		whiteout(filepath.Join(upper, "ghost"))                  // nothing in the lower
		must(t, os.Symlink("/etc", filepath.Join(upper, "src"))) // in place of a directory
		must(t, os.Mkdir(filepath.Join(upper, "docs"), 0o755))
		must(t, os.Symlink("/", filepath.Join(upper, "docs/img")))
		whiteout(filepath.Join(upper, "docs/ghost2"))
		must(t, os.Symlink("..", filepath.Join(upper, "docs/up")))
		must(t, unix.Mknod(filepath.Join(upper, "zero"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))))
		must(t, os.Symlink("../../../../etc/shadow", filepath.Join(upper, "main.go")))
	})
	ls, k := g.collect(t, g.known())
	want := []string{"+docs/img", "-docs/img/logo.svg", "+docs/up", "+main.go",
		"+src", "-src/a.go", "-src/b.go", "-src/deep", "-src/deep/x", "-src/deep/x/y.txt"}
	if diff := cmp.Diff(want, g.check(t, ls, k)); diff != "" {
		t.Errorf("delta (-want +got):\n%s", diff)
	}
	if len(k.Skipped) != 1 || k.Skipped[0].Path != "zero" || k.Skipped[0].Reason != manifest.ReasonSpecial {
		t.Errorf("skipped %+v, want the device zero", k.Skipped)
	}
}

// An upper layer with more entries than the caps allow stops the guest's
// walk early, and the host refuses it.
func TestOverlayCaps(t *testing.T) {
	g := newOverlayGuest(t, overlayTree(t), nil)
	for i := range 100 {
		must(t, os.WriteFile(filepath.Join(g.merged, "f"+strconv.Itoa(i)), nil, 0o644))
	}
	var out bytes.Buffer
	err := transfer.WriteOverlayListing(t.Context(), g.merged, transfer.OverlayListingOptions{
		Walk: g.wo, LowerDisk: g.disk, Upper: g.upper, Since: g.id, MaxEntries: 40,
	}, &out)
	if !errors.Is(err, manifest.ErrTooLarge) || out.Len() > 0 {
		t.Errorf("the guest's walk: %v, %d bytes written; want ErrTooLarge and nothing", err, out.Len())
	}
	g.opts.Limits.MaxEntries = 40
	if _, err := transfer.RemoteManifest(t.Context(), g.r, g.merged, g.known(), g.opts); err == nil ||
		!strings.Contains(err.Error(), "more than 80 entries") {
		t.Errorf("collect over the caps: %v", err)
	}
	// Fewer new files: the guest's walk stays within the caps, and only
	// the host sees the tree it resolves is over them.
	for i := range 70 {
		must(t, os.Remove(filepath.Join(g.merged, "f"+strconv.Itoa(i))))
	}
	if _, err := transfer.RemoteManifest(t.Context(), g.r, g.merged, g.known(), g.opts); !errors.Is(err, manifest.ErrTooLarge) {
		t.Errorf("collect over the host's cap: %v, want ErrTooLarge", err)
	}
}

// A baseline disk whose identity is not one (not hex, too long, a link, a
// fifo, another baseline's) gets the whole tree, never a delta.
func TestOverlayBadID(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(t *testing.T, file, id string)
	}{
		{"not-hex", func(t *testing.T, file, id string) { writeID(t, file, strings.Repeat("zz", 32)) }},
		{"upper-case", func(t *testing.T, file, id string) { writeID(t, file, strings.ToUpper(id)) }},
		{"too-long", func(t *testing.T, file, id string) { writeID(t, file, id+strings.Repeat("\n", 100)) }},
		{"short", func(t *testing.T, file, id string) { writeID(t, file, id[:32]) }},
		{"link", func(t *testing.T, file, id string) {
			writeID(t, file+".real", id)
			must(t, os.Remove(file))
			must(t, os.Symlink(filepath.Base(file)+".real", file))
		}},
		{"fifo", func(t *testing.T, file, id string) {
			must(t, os.Remove(file))
			must(t, syscall.Mkfifo(file, 0o644))
		}},
		{"missing", func(t *testing.T, file, id string) { must(t, os.Remove(file)) }},
		{"other", func(t *testing.T, file, id string) { writeID(t, file, strings.Repeat("ab", 32)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newOverlayGuest(t, func(tree string) {
				overlayTree(t)(tree)
			}, nil)
			tc.set(t, filepath.Join(g.disk, transfer.BaselineIDFile), g.id)
			must(t, os.WriteFile(filepath.Join(g.merged, "main.go"), []byte("edited\n"), 0o644))
			must(t, os.Remove(filepath.Join(g.merged, "README.md")))
			ls, k := g.collect(t, g.known())
			if ls.Base != "" || ls.ID != "" || len(ls.Entries) == 0 {
				t.Errorf("answered id %q base %q with %d entries, want the whole tree", ls.ID, ls.Base, len(ls.Entries))
			}
			if k.ID != "" {
				t.Errorf("the host names %q after a whole listing", k.ID)
			}
			if diff := cmp.Diff(g.truth(t), manifest.KeepLeftOut(k.Manifest, g.base, k.Skipped)); diff != "" {
				t.Errorf("resolved (-walk +resolved):\n%s", diff)
			}
		})
	}
}

func writeID(t *testing.T, file, s string) {
	os.Remove(file)
	must(t, os.WriteFile(file, []byte(s), 0o444))
}

// The guest binary takes both overlay directories or neither.
func TestOverlayFlagsTogether(t *testing.T) {
	for _, args := range [][]string{
		{"manifest", "--overlay-lower", "/mnt/base", "--", t.TempDir()},
		{"manifest", "--overlay-upper", "/mnt/rw/upper", "--", t.TempDir()},
	} {
		out, err := exec.Command(agentBin(t), args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "give both") {
			t.Errorf("%q: %v\n%s", args, err, out)
		}
	}
}

// BenchmarkOverlayCollect times the guest's end of a collect in the disk
// sync mode, against `git status` of the same tree: a 100,000-file
// baseline (1,000 directories of 100 small files) under an overlay, 10
// files edited through it. Run as root:
//
//	go test -run '^$' -bench OverlayCollect ./sync/transfer/
func BenchmarkOverlayCollect(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("mounting an overlay needs root")
	}
	disk := benchDir(b)
	tree := filepath.Join(disk, transfer.BaselineTreeDir)
	for d := range 1000 {
		dp := filepath.Join(tree, "d"+strconv.Itoa(d))
		if err := os.MkdirAll(dp, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := range 100 {
			if err := os.WriteFile(filepath.Join(dp, "f"+strconv.Itoa(i)+".txt"), []byte("file "+strconv.Itoa(d)+"/"+strconv.Itoa(i)+"\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	id := strings.Repeat("0123456789abcdef", 4)
	if err := os.WriteFile(filepath.Join(disk, transfer.BaselineIDFile), []byte(id), 0o444); err != nil {
		b.Fatal(err)
	}
	rw, merged := b.TempDir(), b.TempDir()
	if err := unix.Mount("tmpfs", rw, "tmpfs", 0, "size=64m"); err != nil {
		b.Skipf("mount a tmpfs: %v", err)
	}
	b.Cleanup(func() { unix.Unmount(rw, unix.MNT_DETACH) })
	upper := filepath.Join(rw, "upper")
	os.Mkdir(upper, 0o755)
	os.Mkdir(filepath.Join(rw, "work"), 0o755)
	if err := unix.Mount("overlay", merged, "overlay", 0, "lowerdir="+tree+",upperdir="+upper+",workdir="+rw+"/work,redirect_dir=off,metacopy=off,index=off"); err != nil {
		b.Skipf("mount an overlay: %v", err)
	}
	b.Cleanup(func() { unix.Unmount(merged, unix.MNT_DETACH) })

	gitDir := filepath.Join(b.TempDir(), "git")
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"--git-dir=" + gitDir, "--work-tree=" + merged}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("no git")
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "baseline")
	git("status", "--porcelain") // refreshes the index's stat data
	for k := range 10 {
		f, err := os.OpenFile(filepath.Join(merged, "d"+strconv.Itoa(k*100), "f7.txt"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		f.WriteString("changed\n")
		f.Close()
	}
	const rounds = 5
	var gitTimes []time.Duration
	for range rounds {
		start := time.Now()
		git("status", "--porcelain")
		gitTimes = append(gitTimes, time.Since(start))
	}
	slices.Sort(gitTimes)
	gitStatus := gitTimes[rounds/2]

	var out bytes.Buffer
	o := transfer.OverlayListingOptions{LowerDisk: disk, Upper: upper, Since: id}
	for b.Loop() {
		out.Reset()
		if err := transfer.WriteOverlayListing(context.Background(), merged, o, &out); err != nil {
			b.Fatal(err)
		}
	}
	var ls manifest.Listing
	if err := json.Unmarshal(out.Bytes(), &ls); err != nil || len(ls.Changed) != 10 {
		b.Fatalf("listing: %v, %d changed", err, len(ls.Changed))
	}
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(gitStatus.Nanoseconds()), "git-status-ns")
	b.ReportMetric(float64(per)/float64(gitStatus), "x-git-status")
	b.Logf("collect of 10 changes in 100,000 files: overlay listing %v, git status %v (median of %d): %.3f×", per, gitStatus, rounds, float64(per)/float64(gitStatus))
}

// An upper layer whose root is opaque hides the whole baseline: both
// trees are compared whole. A directory marked opaque with any value is
// compared whole too ("x" hides nothing: the delta is new.txt alone).
func TestOverlayOpaqueRoot(t *testing.T) {
	for _, tc := range []struct {
		name, dir, value string
		hides            bool
	}{
		{"root", "", "y", true},
		{"dir", "src", "y", true},
		{"dir-x", "docs", "x", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newOverlayGuest(t, overlayTree(t), func(upper string) {
				dir := filepath.Join(upper, tc.dir)
				must(t, os.MkdirAll(dir, 0o755))
				must(t, unix.Setxattr(dir, "trusted.overlay.opaque", []byte(tc.value), 0))
			})
			must(t, os.WriteFile(filepath.Join(g.merged, "new.txt"), []byte("new\n"), 0o644))
			ls, k := g.collect(t, g.known())
			delta := g.check(t, ls, k)
			if tc.hides != (len(delta) > 1) {
				t.Errorf("delta %q: hides the baseline's %v, want %v", delta, len(delta) > 1, tc.hides)
			}
		})
	}
}
