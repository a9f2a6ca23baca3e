package review

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/google/go-cmp/cmp"
)

func TestAppliedMode(t *testing.T) {
	file := func(m fs.FileMode) EntryState { return EntryState{Exists: true, Type: manifest.File, Mode: m} }
	dir := func(m fs.FileMode) EntryState { return EntryState{Exists: true, Type: manifest.Dir, Mode: m} }
	link := EntryState{Exists: true, Type: manifest.Symlink}
	none := EntryState{}
	for _, tc := range []struct {
		name      string
		typ       manifest.Type
		guest     fs.FileMode
		base, cur EntryState
		umask     fs.FileMode
		want      fs.FileMode
	}{
		{"new file 0777", manifest.File, 0o777, none, none, 0o022, 0o755},
		{"new file 0666", manifest.File, 0o666, none, none, 0o022, 0o644},
		{"new file 0600", manifest.File, 0o600, none, none, 0o022, 0o644},
		{"new file 0777 umask 077", manifest.File, 0o777, none, none, 0o077, 0o700},
		{"new file 0666 umask 002", manifest.File, 0o666, none, none, 0o002, 0o644},
		{"new file 0070 (no owner x)", manifest.File, 0o070, none, none, 0o022, 0o644},
		{"file over a link", manifest.File, 0o755, link, link, 0o022, 0o755},
		{"same x, group write asked", manifest.File, 0o666, file(0o644), file(0o644), 0o022, 0o644},
		{"same x keeps the user's 0600", manifest.File, 0o644, file(0o644), file(0o600), 0o022, 0o600},
		{"x added to 0644", manifest.File, 0o755, file(0o644), file(0o644), 0o022, 0o755},
		{"x added to the user's 0600", manifest.File, 0o777, file(0o644), file(0o600), 0o022, 0o700},
		{"x added, umask 027", manifest.File, 0o755, file(0o644), file(0o644), 0o027, 0o754},
		{"x removed", manifest.File, 0o644, file(0o755), file(0o755), 0o022, 0o644},
		{"x removed from 0711", manifest.File, 0o600, file(0o755), file(0o711), 0o022, 0o600},
		{"user made it x, agent did not touch x", manifest.File, 0o644, file(0o644), file(0o755), 0o022, 0o755},
		{"user created it too", manifest.File, 0o755, none, file(0o640), 0o022, 0o750},
		{"new dir 0777", manifest.Dir, 0o777, none, none, 0o022, 0o755},
		{"new dir 0700", manifest.Dir, 0o700, none, none, 0o022, 0o755},
		{"new dir umask 077", manifest.Dir, 0o777, none, none, 0o077, 0o700},
		{"dir mode change not applied", manifest.Dir, 0o700, dir(0o755), dir(0o755), 0o022, 0o755},
		{"dir replacing a file", manifest.Dir, 0o777, file(0o644), file(0o644), 0o022, 0o755},
		{"link", manifest.Symlink, 0o777, none, none, 0o022, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := appliedMode(tc.typ, tc.guest, tc.base, tc.cur, tc.umask); got != tc.want {
				t.Errorf("appliedMode = %04o, want %04o", got, tc.want)
			}
		})
	}
}

func TestModeFlags(t *testing.T) {
	side := func(typ manifest.Type, m fs.FileMode) *Side { return &Side{Type: typ, Mode: m} }
	for _, tc := range []struct {
		name     string
		old, new *Side
		want     string
	}{
		{"new 0644", nil, side(manifest.File, 0o644), ""},
		{"new 0755", nil, side(manifest.File, 0o755), ""},
		{"new 0777", nil, side(manifest.File, 0o777), "mode 0777 from the sandbox, applied as 0755 less your umask: only the owner's execute bit is taken"},
		{"new 0600", nil, side(manifest.File, 0o600), "mode 0600 from the sandbox, applied as 0644 less your umask: only the owner's execute bit is taken"},
		{"0644 to 0755", side(manifest.File, 0o644), side(manifest.File, 0o755), ""},
		{"0755 to 0644", side(manifest.File, 0o755), side(manifest.File, 0o644), ""},
		{"0644 to 0600", side(manifest.File, 0o644), side(manifest.File, 0o600), "mode change 0644 → 0600 from the sandbox, not applied: only the owner's execute bit is taken"},
		{"0644 to 0777", side(manifest.File, 0o644), side(manifest.File, 0o777), "mode change 0644 → 0777 from the sandbox, applied as 0755: only the owner's execute bit is taken"},
		{"link", nil, side(manifest.Symlink, 0o777), ""},
		{"new dir 0755", nil, side(manifest.Dir, 0o755), ""},
		{"new dir 0777", nil, side(manifest.Dir, 0o777), "directory mode 0777 from the sandbox, applied as 0755 less your umask: new directories are created 0755"},
		{"dir mode change", side(manifest.Dir, 0o755), side(manifest.Dir, 0o700), "directory mode change 0755 → 0700 from the sandbox, not applied: Airlock never changes the mode of an existing directory"},
		{"file becomes a dir 0777", side(manifest.File, 0o644), side(manifest.Dir, 0o777), "directory mode 0777 from the sandbox, applied as 0755 less your umask: new directories are created 0755"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &File{Path: "p", Old: tc.old, New: tc.new}
			got := ""
			for _, fl := range modeFlags(f) {
				if fl.Kind != FlagMode {
					t.Errorf("flag kind %s", fl.Kind)
				}
				got = fl.Reason
			}
			if got != tc.want {
				t.Errorf("note %q\nwant %q", got, tc.want)
			}
		})
	}
}

// modeChangeset is a guest's run that adds files 0777 and 0666, an empty
// directory 0777 and a file in a new directory, and changes an existing
// directory to 0700 and a file to 0600.
func modeChangeset(t *testing.T) *Changeset {
	t.Helper()
	s := store{}
	add := func(p string, m fs.FileMode, data string) manifest.Change {
		s[sha256Hex([]byte(data))] = []byte(data)
		return manifest.Change{Kind: manifest.Added, Path: p, New: &manifest.Entry{Path: p, Type: manifest.File, Mode: m, Size: int64(len(data)), SHA256: sha256Hex([]byte(data))}}
	}
	kept := "kept\n"
	s[sha256Hex([]byte(kept))] = []byte(kept)
	keptEntry := func(m fs.FileMode) *manifest.Entry {
		return &manifest.Entry{Path: "kept.txt", Type: manifest.File, Mode: m, Size: 5, SHA256: sha256Hex([]byte(kept))}
	}
	cs, err := New(context.Background(), []manifest.Change{
		add("all.sh", 0o777, "#!/bin/sh\n"),
		add("world.txt", 0o666, "w\n"),
		{Kind: manifest.Added, Path: "open", New: &manifest.Entry{Path: "open", Type: manifest.Dir, Mode: 0o777}},
		add("newdir/f.txt", 0o644, "f\n"),
		{Kind: manifest.ModeChanged, Path: "sub", Old: &manifest.Entry{Path: "sub", Type: manifest.Dir, Mode: 0o755}, New: &manifest.Entry{Path: "sub", Type: manifest.Dir, Mode: 0o700}},
		{Kind: manifest.ModeChanged, Path: "kept.txt", Old: keptEntry(0o644), New: keptEntry(0o600)},
	}, s.source, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestPatchModeNotes: what git cannot say about modes is in the patch, in
// lines git apply skips; the patch still applies.
func TestPatchModeNotes(t *testing.T) {
	cs := modeChangeset(t)
	var flagged []string
	for _, f := range cs.Files {
		if f.HasFlag(FlagMode) {
			flagged = append(flagged, f.Path)
		}
	}
	if diff := cmp.Diff([]string{"all.sh", "kept.txt", "open", "sub", "world.txt"}, flagged); diff != "" {
		t.Errorf("flagged (-want +got):\n%s", diff)
	}
	patch, _ := Patch(cs, ApproveAll(cs), PatchOptions{})
	for _, want := range []string{
		"# airlock: all.sh: mode 0777 from the sandbox, applied as 0755 less your umask: only the owner's execute bit is taken\ndiff --git a/all.sh b/all.sh\nnew file mode 100755\n",
		"# airlock: world.txt: mode 0666 from the sandbox, applied as 0644",
		"# airlock: kept.txt left out of this patch: its mode change is not one git can show; mode change 0644 → 0600 from the sandbox, not applied",
		"# airlock: sub left out of this patch: directories are not part of git patches; their files are; directory mode change 0755 → 0700 from the sandbox, not applied",
		"# airlock: open left out of this patch: directories are not part of git patches; their files are; directory mode 0777 from the sandbox, applied as 0755",
	} {
		if !strings.Contains(string(patch), want) {
			t.Errorf("patch lacks %q:\n%s", want, patch)
		}
	}
	if strings.Contains(string(patch), "100777") || strings.Contains(string(patch), "100666") || strings.Contains(string(patch), "100600") {
		t.Errorf("patch has a mode git does not know:\n%s", patch)
	}
	needGit(t)
	repo := t.TempDir()
	writeFile(t, repo, "kept.txt", "kept\n")
	mkdir(t, repo, "sub")
	writeFile(t, repo, "sub/x", "x\n")
	run(t, repo, "git", "init", "-q")
	run(t, repo, "git", "add", "-A")
	run(t, repo, "git", "commit", "-q", "-m", "base")
	gitApply(t, repo, patch)
	if fi, err := os.Stat(filepath.Join(repo, "all.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("git apply: all.sh %v %v", fi, err)
	}
}

func mkdir(t *testing.T, dir, rel string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(rel)), 0o755); err != nil {
		t.Fatal(err)
	}
}
