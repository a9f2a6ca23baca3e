package manifest

import (
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// apply is the reference applier Diff is documented for: removals first,
// then creations, creating missing parents with ImpliedDirMode.
func apply(old *Manifest, changes []Change) (*Manifest, error) {
	tree := map[string]Entry{}
	for _, e := range old.Entries {
		tree[e.Path] = e
	}
	for _, c := range slices.Backward(changes) {
		switch c.Kind {
		case Deleted, TypeChanged:
			delete(tree, c.Path)
		case Renamed:
			if _, ok := tree[c.OldPath]; !ok {
				return nil, fmt.Errorf("rename from missing %s", c.OldPath)
			}
			delete(tree, c.OldPath)
		}
	}
	for _, c := range changes {
		if c.Kind == Deleted {
			continue
		}
		if c.New == nil || c.New.Path != c.Path {
			return nil, fmt.Errorf("change %+v has no matching New entry", c)
		}
		tree[c.Path] = *c.New
		for d := path.Dir(c.Path); d != "."; d = path.Dir(d) {
			if _, ok := tree[d]; !ok {
				tree[d] = Entry{Path: d, Type: Dir, Mode: ImpliedDirMode}
			}
		}
	}
	m := &Manifest{Entries: slices.Collect(maps.Values(tree))}
	m.Sort()
	return m, nil
}

func TestDiff(t *testing.T) {
	f := func(p, content string, mode uint32) Entry {
		return Entry{Path: p, Type: File, Mode: fs.FileMode(mode), Size: int64(len(content)), SHA256: sum(content)}
	}
	d := func(p string, mode uint32) Entry { return Entry{Path: p, Type: Dir, Mode: fs.FileMode(mode)} }
	l := func(p, target string) Entry { return Entry{Path: p, Type: Symlink, Mode: SymlinkMode, Target: target} }
	type ch struct {
		Kind ChangeKind
		Path string
		From string
	}
	tests := []struct {
		name     string
		old, new []Entry
		want     []ch
	}{
		{"same", []Entry{f("a", "x", 0o644)}, []Entry{f("a", "x", 0o644)}, nil},
		{"added deleted modified", []Entry{f("a", "x", 0o644), f("b", "y", 0o644)}, []Entry{f("a", "z", 0o644), f("c", "w", 0o644)},
			[]ch{{Modified, "a", ""}, {Deleted, "b", ""}, {Added, "c", ""}}},
		{"mode only", []Entry{f("a", "x", 0o644)}, []Entry{f("a", "x", 0o755)}, []ch{{ModeChanged, "a", ""}}},
		{"content and mode", []Entry{f("a", "x", 0o644)}, []Entry{f("a", "y", 0o755)}, []ch{{Modified, "a", ""}}},
		{"file to symlink", []Entry{f("a", "x", 0o644)}, []Entry{l("a", "b")}, []ch{{TypeChanged, "a", ""}}},
		{"symlink retarget", []Entry{l("a", "b")}, []Entry{l("a", "c")}, []ch{{Modified, "a", ""}}},
		{"rename", []Entry{f("a", "x", 0o644)}, []Entry{f("b", "x", 0o755)}, []ch{{Renamed, "b", "a"}}},
		{"rename prefers same name", []Entry{d("p", 0o755), f("p/x.go", "s", 0o644), d("q", 0o755), f("q/y.go", "s", 0o644)},
			[]Entry{d("p", 0o755), d("r", 0o755), f("r/a.go", "s", 0o644), f("r/y.go", "s", 0o644)},
			[]ch{{Deleted, "q", ""}, {Renamed, "r/a.go", "p/x.go"}, {Renamed, "r/y.go", "q/y.go"}}},
		{"empty files do not rename", []Entry{f("a", "", 0o644)}, []Entry{f("b", "", 0o644)}, []ch{{Deleted, "a", ""}, {Added, "b", ""}}},
		{"implied dir", nil, []Entry{d("a", 0o755), d("a/b", 0o755), f("a/b/c", "x", 0o644)}, []ch{{Added, "a/b/c", ""}}},
		{"empty dir", nil, []Entry{d("a", 0o755), d("a/b", 0o755)}, []ch{{Added, "a/b", ""}}},
		{"dir with odd mode", nil, []Entry{d("a", 0o700), f("a/x", "1", 0o644)}, []ch{{Added, "a", ""}, {Added, "a/x", ""}}},
		{"implied dir past a sibling", nil, []Entry{d("a", 0o755), f("a-b", "1", 0o644), f("a/x", "2", 0o644)},
			[]ch{{Added, "a-b", ""}, {Added, "a/x", ""}}},
		{"deleted tree", []Entry{d("a", 0o755), d("a/b", 0o755), f("a/b/c", "x", 0o644)}, nil,
			[]ch{{Deleted, "a", ""}, {Deleted, "a/b", ""}, {Deleted, "a/b/c", ""}}},
		{"emptied dir stays", []Entry{d("a", 0o755), f("a/x", "1", 0o644)}, []Entry{d("a", 0o755)}, []ch{{Deleted, "a/x", ""}}},
		{"dir mode", []Entry{d("a", 0o755)}, []Entry{d("a", 0o700)}, []ch{{ModeChanged, "a", ""}}},
		{"dir becomes file", []Entry{d("a", 0o755), f("a/x", "1", 0o644)}, []Entry{f("a", "1", 0o644)},
			[]ch{{TypeChanged, "a", ""}, {Deleted, "a/x", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, new := &Manifest{Entries: tt.old}, &Manifest{Entries: tt.new}
			changes := Diff(old, new)
			var got []ch
			for _, c := range changes {
				got = append(got, ch{c.Kind, c.Path, c.OldPath})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Diff (-want +got):\n%s", diff)
			}
			applied, err := apply(old, changes)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(new.Entries, applied.Entries); diff != "" {
				t.Errorf("apply(old, Diff) != new (-new +applied):\n%s", diff)
			}
		})
	}
}

// genManifest builds a valid manifest from fuzz bytes over a fixed set of
// paths, chosen to exercise prefixes ("a-b" sorts between "a" and "a/x").
func genManifest(data []byte) *Manifest {
	universe := []string{"a", "a-b", "a/b", "a/b/c", "a/b/d", "a/x", "b", "b/a", "b/c", "c", "c.go", "d/e/f"}
	types := map[string]Type{}
	var m Manifest
	for i, p := range universe {
		var c byte
		if i < len(data) {
			c = data[i] % 10
		}
		if parent := path.Dir(p); parent != "." && types[parent] != Dir {
			continue
		}
		var e Entry
		switch c {
		case 0:
			continue
		case 1, 2, 3:
			content := []string{"x", "y", ""}[c-1]
			e = Entry{Type: File, Mode: 0o644, Size: int64(len(content)), SHA256: sum(content)}
		case 4:
			e = Entry{Type: File, Mode: 0o755, Size: 1, SHA256: sum("x")}
		case 5, 6:
			e = Entry{Type: Dir, Mode: []fsMode{0o755, 0o700}[c-5]}
		case 7, 8:
			e = Entry{Type: Symlink, Mode: SymlinkMode, Target: []string{"t1", "../t2"}[c-7]}
		case 9:
			e = Entry{Type: Dir, Mode: 0o755}
		}
		e.Path = p
		types[p] = e.Type
		m.Entries = append(m.Entries, e)
	}
	m.Sort()
	return &m
}

func FuzzDiff(f *testing.F) {
	f.Add([]byte{1, 0, 5, 1, 2, 0, 1}, []byte{0, 1, 5, 1, 0, 2, 3})
	f.Add([]byte{5, 1, 5, 1, 1, 1}, []byte{0, 0, 0, 0, 0, 0, 1, 1, 1, 1})
	f.Add([]byte{9, 0, 9, 9, 1}, []byte{1, 0, 0, 0, 0, 0, 7})
	f.Add([]byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, []byte{4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		old, new := genManifest(a), genManifest(b)
		for _, m := range []*Manifest{old, new} {
			if err := m.Validate(Limits{}); err != nil {
				t.Fatalf("generator made an invalid manifest: %v", err)
			}
		}
		changes := Diff(old, new)
		seen := map[string]bool{}
		for i, c := range changes {
			if seen[c.Path] {
				t.Fatalf("path %s appears twice in %v", c.Path, changes)
			}
			seen[c.Path] = true
			if i > 0 && changes[i-1].Path >= c.Path {
				t.Fatalf("changes not sorted: %s then %s", changes[i-1].Path, c.Path)
			}
		}
		for _, c := range changes {
			if c.OldPath != "" && seen[c.OldPath] {
				t.Fatalf("rename source %s is also a changed path", c.OldPath)
			}
		}
		applied, err := apply(old, changes)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(new.Entries, applied.Entries); diff != "" {
			t.Fatalf("apply(old, Diff(old, new)) != new (-new +applied):\n%s\nchanges: %+v", diff, changes)
		}
		if len(Diff(new, new)) != 0 {
			t.Fatal("Diff of a manifest with itself is not empty")
		}
	})
}

func TestDiffUnsortedInput(t *testing.T) {
	a := &Manifest{Entries: []Entry{{Path: "b", Type: Dir, Mode: 0o700}, {Path: "a", Type: Dir, Mode: 0o700}}}
	b := &Manifest{Entries: []Entry{{Path: "a", Type: Dir, Mode: 0o700}, {Path: "b", Type: Dir, Mode: 0o700}}}
	if got := Diff(a, b); len(got) != 0 {
		t.Errorf("Diff ignores order, got %v", got)
	}
	if !strings.HasPrefix(a.Entries[0].Path, "b") {
		t.Error("Diff reordered its input")
	}
}

type fsMode = fs.FileMode
