package review

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/testkit/testenv"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// tree describes a directory for tests: path -> content. A value starting
// with "->" is a symlink target; a key ending in "/" is a directory.
// modes overrides the default 0644 (0755 for directories).
type tree struct {
	files map[string]string
	modes map[string]fs.FileMode
}

func (tr tree) write(t testing.TB, dir string) {
	t.Helper()
	keys := make([]string, 0, len(tr.files))
	for k := range tr.files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := tr.files[k]
		p := filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(k, "/")))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(k, "/"):
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(v, "->"):
			if err := os.Symlink(v[2:], p); err != nil {
				t.Fatal(err)
			}
			continue
		default:
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		mode := fs.FileMode(0o644)
		if strings.HasSuffix(k, "/") {
			mode = 0o755
		}
		if m, ok := tr.modes[k]; ok {
			mode = m
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
}

// store is an in-memory content store.
type store map[string][]byte

func (s store) source(sum string) ([]byte, error) {
	data, ok := s[sum]
	if !ok {
		return nil, fmt.Errorf("no object %s", sum)
	}
	return data, nil
}

// scan builds a manifest of dir (without the root) and puts every file
// into s.
func scan(t testing.TB, dir string, s store) map[string]manifest.Entry {
	t.Helper()
	out := map[string]manifest.Entry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if rel == ".git" {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := manifest.Entry{Path: rel, Mode: fi.Mode().Perm()}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Type, e.Mode = manifest.Symlink, 0
			e.Target, _ = os.Readlink(p)
		case fi.IsDir():
			e.Type = manifest.Dir
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.Type, e.Size, e.SHA256 = manifest.File, int64(len(data)), sha256Hex(data)
			s[e.SHA256] = data
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// changes diffs two scans path by path (no rename detection; renames are
// passed explicitly as old -> new).
func changes(oldM, newM map[string]manifest.Entry, renames map[string]string) []manifest.Change {
	var out []manifest.Change
	renamedFrom := map[string]bool{}
	for from, to := range renames {
		o, n := oldM[from], newM[to]
		out = append(out, manifest.Change{Kind: manifest.Renamed, Path: to, OldPath: from, Old: &o, New: &n})
		renamedFrom[from] = true
	}
	for p, o := range oldM {
		o := o
		if renamedFrom[p] {
			continue
		}
		n, ok := newM[p]
		if !ok {
			out = append(out, manifest.Change{Kind: manifest.Deleted, Path: p, Old: &o})
			continue
		}
		n2 := n
		switch {
		case o.Type != n.Type:
			out = append(out, manifest.Change{Kind: manifest.TypeChanged, Path: p, Old: &o, New: &n2})
		case o.SHA256 != n.SHA256 || o.Target != n.Target:
			out = append(out, manifest.Change{Kind: manifest.Modified, Path: p, Old: &o, New: &n2})
		case o.Mode != n.Mode:
			out = append(out, manifest.Change{Kind: manifest.ModeChanged, Path: p, Old: &o, New: &n2})
		}
	}
	isRenameTarget := map[string]bool{}
	for _, to := range renames {
		isRenameTarget[to] = true
	}
	for p, n := range newM {
		n := n
		if _, ok := oldM[p]; !ok && !isRenameTarget[p] {
			out = append(out, manifest.Change{Kind: manifest.Added, Path: p, New: &n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// fixture writes old and new trees and builds their changeset.
type fixture struct {
	oldDir, newDir string
	store          store
	changes        []manifest.Change
	cs             *Changeset
}

func newFixture(t testing.TB, oldT, newT tree, renames map[string]string) *fixture {
	t.Helper()
	base := t.TempDir()
	fx := &fixture{oldDir: filepath.Join(base, "old"), newDir: filepath.Join(base, "new"), store: store{}}
	for _, d := range []string{fx.oldDir, fx.newDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	oldT.write(t, fx.oldDir)
	newT.write(t, fx.newDir)
	ch := changes(scan(t, fx.oldDir, fx.store), scan(t, fx.newDir, fx.store), renames)
	cs, err := New(context.Background(), ch, fx.store.source, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fx.cs, fx.changes = cs, ch
	return fx
}

// copyTree copies src to a new temp dir, keeping modes and links.
func copyTree(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "project")
	cmd := exec.Command("cp", "-a", src, dst)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	return dst
}

// snapshot describes every entry under dir as "path mode type content".
func snapshot(t testing.TB, dir string) string {
	t.Helper()
	var b bytes.Buffer
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == ".git" {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			fmt.Fprintf(&b, "%s link -> %s\n", rel, target)
		case fi.IsDir():
			fmt.Fprintf(&b, "%s dir %o\n", rel, fi.Mode().Perm())
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "%s file %o %q\n", rel, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky), data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func run(t testing.TB, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func needGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Skip(t, testenv.Git, "git not installed")
	}
}
