package manifest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func fileE(p, content string) Entry {
	return Entry{Path: p, Type: File, Mode: 0o644, Size: int64(len(content)), SHA256: sum(content)}
}

func dirE(p string) Entry { return Entry{Path: p, Type: Dir, Mode: 0o755} }

func TestDeltaRoundTrip(t *testing.T) {
	old := &Manifest{Entries: []Entry{
		fileE("a", "a"), dirE("d"), fileE("d/x", "x"), fileE("d/y", "y"),
		{Path: "l", Type: Symlink, Mode: SymlinkMode, Target: "d/x"}, fileE("z", "z"),
	}}
	chmod := fileE("d/y", "y")
	chmod.Mode = 0o755
	for _, tc := range []struct {
		name        string
		new         []Entry
		wantChanged []string
		wantDeleted []string
	}{
		{"same", old.Entries, nil, nil},
		{"edit", []Entry{fileE("a", "A"), dirE("d"), fileE("d/x", "x"), fileE("d/y", "y"), old.Entries[4], fileE("z", "z")}, []string{"a"}, nil},
		{"chmod", []Entry{fileE("a", "a"), dirE("d"), fileE("d/x", "x"), chmod, old.Entries[4], fileE("z", "z")}, []string{"d/y"}, nil},
		{"add-and-delete", []Entry{fileE("a", "a"), fileE("b", "b"), old.Entries[4], fileE("z", "z")}, []string{"b"}, []string{"d", "d/x", "d/y"}},
		{"retarget", []Entry{fileE("a", "a"), dirE("d"), fileE("d/x", "x"), fileE("d/y", "y"), {Path: "l", Type: Symlink, Mode: SymlinkMode, Target: "/etc"}, fileE("z", "z")}, []string{"l"}, nil},
		{"empty", nil, nil, []string{"a", "d", "d/x", "d/y", "l", "z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nm := &Manifest{Entries: tc.new}
			d := DeltaOf(old, nm)
			var changed []string
			for _, e := range d.Changed {
				changed = append(changed, e.Path)
			}
			if diff := cmp.Diff(tc.wantChanged, changed); diff != "" {
				t.Errorf("changed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDeleted, d.Deleted); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
			got, err := old.Apply(d)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(nm, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("old + delta (-want +got):\n%s", diff)
			}
		})
	}
}

// A random pair of manifests: applying the delta of one against the other
// gives back the second exactly.
func TestDeltaRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := func() *Manifest {
		m := &Manifest{}
		for i := range 40 {
			if rng.IntN(2) == 0 {
				continue
			}
			p := string(rune('a'+i%26)) + strings.Repeat("x", i/26)
			m.Entries = append(m.Entries, fileE(p, string(rune('0'+rng.IntN(3)))))
		}
		m.Sort()
		return m
	}
	for range 500 {
		a, b := gen(), gen()
		got, err := a.Apply(DeltaOf(a, b))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(b, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("a + delta(a, b) != b:\n%s", diff)
		}
	}
}

func TestApplyRefusesBadDeltas(t *testing.T) {
	base := &Manifest{Entries: []Entry{fileE("a", "a"), fileE("c", "c")}}
	for _, tc := range []struct {
		name string
		d    Delta
	}{
		{"delete-missing", Delta{Deleted: []string{"b"}}},
		{"delete-missing-last", Delta{Deleted: []string{"z"}}},
		{"changed-and-deleted", Delta{Changed: []Entry{fileE("a", "A")}, Deleted: []string{"a"}}},
		{"changed-unsorted", Delta{Changed: []Entry{fileE("c", "C"), fileE("a", "A")}}},
		{"changed-twice", Delta{Changed: []Entry{fileE("b", "1"), fileE("b", "2")}}},
		{"deleted-twice", Delta{Deleted: []string{"a", "a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := base.Apply(tc.d); !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
}

func TestListingResolve(t *testing.T) {
	base := &Manifest{Entries: []Entry{dirE("d"), fileE("d/x", "x")}}
	const id = "0123456789abcdef0123456789abcdef"
	decode := func(t *testing.T, s string) *Listing {
		t.Helper()
		ls, err := DecodeListing(strings.NewReader(s), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		return ls
	}
	x := `{"path":"d/x","type":"file","mode":2541,"size":1,"sha256":"` + sum("X") + `"}`
	t.Run("delta", func(t *testing.T) {
		m, err := decode(t, `{"id":"n","base":"`+id+`","changed":[`+x+`]}`).Resolve(id, base, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		want := []Entry{dirE("d"), {Path: "d/x", Type: File, Mode: 0o755, Size: 1, SHA256: sum("X")}}
		if diff := cmp.Diff(want, m.Entries); diff != "" {
			t.Errorf("(-want +got), setuid and sticky bits dropped:\n%s", diff)
		}
	})
	t.Run("whole", func(t *testing.T) {
		m, err := decode(t, `{"id":"n","entries":[]}`).Resolve(id, base, Limits{})
		if err != nil || len(m.Entries) != 0 {
			t.Fatalf("got %v, %v; want an empty manifest", m, err)
		}
	})
	for _, tc := range []struct{ name, listing string }{
		{"other-base", `{"id":"n","base":"ffffffffffffffffffffffffffffffff","changed":[` + x + `]}`},
		{"whole-with-deleted", `{"id":"n","deleted":["d/x"]}`},
		{"delta-with-entries", `{"id":"n","base":"` + id + `","entries":[` + x + `]}`},
		{"escape-by-delta", `{"id":"n","base":"` + id + `","changed":[{"path":"../x","type":"file","mode":420,"size":1,"sha256":"` + sum("X") + `"}]}`},
		{"under-symlink-by-delta", `{"id":"n","base":"` + id + `","changed":[{"path":"d","type":"symlink","mode":511,"target":"/etc"}]}`},
		{"delete-parent-only", `{"id":"n","base":"` + id + `","deleted":["d"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decode(t, tc.listing).Resolve(id, base, Limits{}); !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
	t.Run("no-base-held", func(t *testing.T) {
		if _, err := decode(t, `{"id":"n","base":"`+id+`"}`).Resolve("", nil, Limits{}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("got %v, want ErrInvalid", err)
		}
	})
}

func TestDecodeListingStrict(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		limits   Limits
		want     error
	}{
		{"unknown-field", `{"id":"n","entries":[],"exec":"rm -rf /"}`, Limits{}, nil},
		{"trailing", `{"id":"n","entries":[]} {}`, Limits{}, ErrInvalid},
		{"too-many", `{"id":"n","base":"b","deleted":["a","b","c"]}`, Limits{MaxEntries: 2}, ErrTooLarge},
		{"too-long", `{"id":"n","entries":[],"base":"` + strings.Repeat("b", 200) + `"}`, Limits{MaxManifestBytes: 100}, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeListing(strings.NewReader(tc.in), tc.limits)
			if err == nil {
				t.Fatal("accepted")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestListingEncodeDecode(t *testing.T) {
	for _, ls := range []Listing{
		{ID: "a"},
		{ID: "a", Entries: []Entry{dirE("d"), fileE("d/x", "x")}},
		{ID: "a", Base: "b"},
		{ID: "a", Base: "b", Changed: []Entry{fileE("x", "x")}, Deleted: []string{"y", "z"}},
	} {
		var buf bytes.Buffer
		if err := ls.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		got, err := DecodeListing(&buf, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", buf.String(), err)
		}
		if diff := cmp.Diff(&ls, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("round trip of %s (-want +got):\n%s", buf.String(), diff)
		}
	}
}

func TestStateFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a": "a", "d/x": "x"})
	os.Symlink("d/x", filepath.Join(dir, "l"))
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{"a", "d/x"} {
		os.Chtimes(filepath.Join(dir, p), old, old)
	}
	cache := &HashCache{now: func() time.Time { return time.Now().Add(time.Hour) }} // nothing racy
	m, _, err := Walk(context.Background(), dir, WalkOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if cache.Len() != 2 {
		t.Fatalf("cache holds %d files, want 2", cache.Len())
	}
	file := filepath.Join(t.TempDir(), "state")
	skipped := []Exclusion{
		{Path: "big", Reason: ReasonTooLarge, Rule: TooLargeRule(5<<30, 1<<30), Size: 5 << 30},
		{Path: "p", Reason: ReasonSpecial, Rule: "p---------"},
	}
	if err := WriteStateFile(file, &State{ID: "id1", Manifest: m, Cache: cache, Skipped: skipped}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, want 0600", fi.Mode().Perm())
	}
	s, err := ReadStateFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != "id1" {
		t.Errorf("ID %q", s.ID)
	}
	if diff := cmp.Diff(m, s.Manifest); diff != "" {
		t.Errorf("manifest (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(cache.files, s.Cache.files, cmp.AllowUnexported(cachedFile{}, fileStat{})); diff != "" {
		t.Errorf("cache (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(skipped, s.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}

	// Cut short, or not a state file at all: an error, never a panic.
	data, _ := os.ReadFile(file)
	for _, bad := range [][]byte{data[:len(data)-3], data[:len(stateMagic)+1], []byte("hello"), append(data, 0)} {
		os.WriteFile(file, bad, 0o600)
		if _, err := ReadStateFile(file); err == nil {
			t.Errorf("a damaged state file (%d bytes) was read", len(bad))
		}
	}
}

// Seed trusts the manifest it is given for files whose size matches: a
// later Walk with the seeded cache reports the seeded hash without reading
// the file, and reads a file whose stat data changed since.
func TestSeedSparesReading(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a": "real", "b": "bbbb", "c": "cc"})
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{"a", "b", "c"} {
		os.Chtimes(filepath.Join(dir, p), old, old)
	}
	// The seed claims "a" holds "seed" (same size as "real"), "c" is
	// three bytes (it is two).
	m := &Manifest{Entries: []Entry{fileE("a", "seed"), fileE("b", "bbbb"), fileE("c", "ccc")}}
	cache := &HashCache{now: func() time.Time { return time.Now().Add(time.Hour) }}
	if err := cache.Seed(context.Background(), dir, m); err != nil {
		t.Fatal(err)
	}
	if cache.Len() != 2 {
		t.Fatalf("seeded %d files, want 2 (c's size does not match)", cache.Len())
	}
	got, _, err := Walk(context.Background(), dir, WalkOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{sum("seed"), sum("bbbb"), sum("cc")}
	for i, e := range got.Entries {
		if e.SHA256 != want[i] {
			t.Errorf("%s: sha256 %s, want %s", e.Path, e.SHA256, want[i])
		}
	}
	// A change of content (and so of ctime) is seen.
	os.WriteFile(filepath.Join(dir, "a"), []byte("new!"), 0o644)
	got, _, err = Walk(context.Background(), dir, WalkOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := got.Lookup("a"); e.SHA256 != sum("new!") {
		t.Errorf("a changed after seeding, walk says %s", e.SHA256)
	}
}

func TestSeedLeavesRacyFilesOut(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a": "a"})
	cache := &HashCache{}
	if err := cache.Seed(context.Background(), dir, &Manifest{Entries: []Entry{fileE("a", "a")}}); err != nil {
		t.Fatal(err)
	}
	if cache.Len() != 0 {
		t.Fatal("a file written just now was remembered")
	}
}

// A file over MaxFileSize is left out and named with its size and the
// cap; it stops nothing: the rest of the tree is walked and hashed.
func TestWalkMaxFileSize(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"small": "x", "big": strings.Repeat("x", 100), "d/also-big": strings.Repeat("y", 11)})
	m, report, err := Walk(context.Background(), dir, WalkOptions{MaxFileSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range m.Entries {
		paths = append(paths, e.Path)
	}
	if diff := cmp.Diff([]string{"d", "small"}, paths); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	want := []Exclusion{
		{Path: "big", Reason: ReasonTooLarge, Rule: "100 bytes, over the 10-byte cap", Size: 100},
		{Path: "d/also-big", Reason: ReasonTooLarge, Rule: "11 bytes, over the 10-byte cap", Size: 11},
	}
	if diff := cmp.Diff(want, report.Excluded); diff != "" {
		t.Errorf("excluded (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, Noteworthy(report.Excluded)); diff != "" {
		t.Errorf("noteworthy (-want +got):\n%s", diff)
	}
}

// Rewalk leaves out a touched file that grew past the cap, and keeps
// naming one left out before that nothing touched since.
func TestRewalkMaxFileSize(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a": "a", "b": "b", "old-big": strings.Repeat("z", 50)})
	opts := WalkOptions{MaxFileSize: 10}
	prev, report, err := Walk(context.Background(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"a": strings.Repeat("x", 20)})
	m, report, err := Rewalk(context.Background(), dir, prev, NoteworthyAll(report.Excluded), []Touched{{Path: "a"}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Lookup("a"); ok {
		t.Error("a, grown past the cap, is in the manifest")
	}
	if _, ok := m.Lookup("b"); !ok {
		t.Error("b is missing")
	}
	want := []Exclusion{
		{Path: "a", Reason: ReasonTooLarge, Rule: "20 bytes, over the 10-byte cap", Size: 20},
		{Path: "old-big", Reason: ReasonTooLarge, Rule: "50 bytes, over the 10-byte cap", Size: 50},
	}
	if diff := cmp.Diff(want, report.Excluded); diff != "" {
		t.Errorf("excluded (-want +got):\n%s", diff)
	}
}

func FuzzListingResolve(f *testing.F) {
	const id = "0123456789abcdef0123456789abcdef"
	f.Add([]byte(`{"id":"n","base":"` + id + `","changed":[{"path":"d/y","type":"file","mode":420,"size":1,"sha256":"` + sum("y") + `"}],"deleted":["d/x"]}`))
	f.Add([]byte(`{"id":"n","base":"` + id + `","changed":[{"path":"d","type":"symlink","mode":511,"target":"/etc"}]}`))
	f.Add([]byte(`{"id":"n","entries":[{"path":"a","type":"dir","mode":493}]}`))
	f.Add([]byte(`{"id":"n","base":"` + id + `","deleted":["a","d","d/x"]}`))
	f.Add([]byte(`{"id":"n","base":"` + id + `","deleted":["d/x"],"skipped":[{"path":"d/x","reason":"too-large","size":5368709120},{"path":"new","reason":"too-large","size":5368709120}]}`))
	f.Add([]byte(`{"id":"n","base":"` + id + `","changed":[{"path":"d","type":"symlink","mode":511,"target":"/etc"}],"deleted":["d/x"],"skipped":[{"path":"d/x","reason":"too-large","size":5368709120}]}`))
	f.Add([]byte(`{"id":"n","entries":[{"path":"big","type":"file","mode":420,"size":5368709120,"sha256":"` + sum("y") + `"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		base := &Manifest{Entries: []Entry{fileE("a", "a"), dirE("d"), fileE("d/x", "x")}}
		ls, err := DecodeListing(bytes.NewReader(data), Limits{MaxEntries: 1000})
		if err != nil {
			return
		}
		m, err := ls.Resolve(id, base, Limits{MaxEntries: 1000})
		if err != nil {
			return
		}
		if err := m.Validate(Limits{MaxEntries: 1000}); err != nil {
			t.Fatalf("Resolve returned a manifest that does not validate: %v", err)
		}
		if len(base.Entries) != 3 || base.Entries[0].Path != "a" {
			t.Fatal("Resolve changed the base manifest")
		}
		// Whatever the guest names as left out for its size, putting the
		// baseline back there, or leaving out what is over the cap,
		// never makes an invalid manifest.
		kept := KeepLeftOut(m, base, ls.Skipped)
		if err := kept.Validate(Limits{MaxEntries: 1000}); err != nil {
			t.Fatalf("KeepLeftOut returned a manifest that does not validate: %v", err)
		}
		small, _ := LeaveOutLarge(kept, base, Limits{MaxFileSize: 1})
		if err := small.Validate(Limits{MaxEntries: 1000, MaxFileSize: 1}); err != nil && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("LeaveOutLarge returned a manifest that does not validate: %v", err)
		}
	})
}

// writeFiles writes files (path → content) under dir, creating parents.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// appendEntry writes an entry exactly as encoding/json does (HTML left
// unescaped), whatever its strings hold.
func FuzzAppendEntry(f *testing.F) {
	f.Add("src/main.go", "file", uint32(0o644), int64(12), strings.Repeat("a", 64), "")
	f.Add("a/<b>&\"c\\\\", "symlink", uint32(0o777), int64(0), "", "../x\u2028\x00\xff")
	f.Add("", "", uint32(0), int64(-1), "\t", "é")
	f.Fuzz(func(t *testing.T, p, typ string, mode uint32, size int64, sum, target string) {
		e := Entry{Path: p, Type: Type(typ), Mode: fs.FileMode(mode), Size: size, SHA256: sum, Target: target}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(&e); err != nil {
			t.Fatal(err)
		}
		if got := appendEntry(nil, &e); string(got)+"\n" != want.String() {
			t.Errorf("appendEntry = %s, want %s", got, want.String())
		}
	})
}
