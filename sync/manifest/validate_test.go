package manifest

import (
	"bytes"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestValidPath(t *testing.T) {
	tests := []struct {
		path string
		ok   bool
	}{
		{"a", true},
		{"a/b/c.go", true},
		{".gitignore", true},
		{".github/workflows/ci.yml", true},
		{"a/.gitkeep", true},
		{"héllo/wörld", true},
		{"...", true},
		{"", false},
		{"/etc/passwd", false},
		{"../x", false},
		{"a/../../x", false},
		{"a/..", false},
		{"./a", false},
		{"a/./b", false},
		{"a//b", false},
		{"a/", false},
		{"a\x00b", false},
		{"a\\..\\b", false},
		{`..\x`, false},
		{"a\nb", false},
		{"a\x1b[31m", false},
		{"\xff", false},
		{".git", false},
		{".git/config", false},
		{"sub/.git/hooks/pre-commit", false},
		{".GIT/config", false},
		{".Git", false},
		{".g\u200cit/config", false},
		{"\ufeff.git", false},
		{strings.Repeat("a", 256), false},
		{strings.Repeat("a/", 2048) + "a", false},
		{strings.Repeat("a", 255), true},
	}
	for _, tt := range tests {
		err := ValidPath(tt.path)
		if (err == nil) != tt.ok {
			t.Errorf("ValidPath(%q) = %v, want ok=%v", tt.path, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidPath(%q) error %v does not wrap ErrInvalid", tt.path, err)
		}
	}
}

func TestValidate(t *testing.T) {
	file := func(p string) Entry { return Entry{Path: p, Type: File, Mode: 0o644, Size: 1, SHA256: sum("x")} }
	dir := func(p string) Entry { return Entry{Path: p, Type: Dir, Mode: 0o755} }
	link := func(p, target string) Entry { return Entry{Path: p, Type: Symlink, Mode: SymlinkMode, Target: target} }
	with := func(e Entry, f func(*Entry)) Entry { f(&e); return e }
	tests := []struct {
		name    string
		entries []Entry
		limits  Limits
		want    error  // nil, ErrInvalid or ErrTooLarge
		rule    string // part of the message
	}{
		{"empty", nil, Limits{}, nil, ""},
		{"ok", []Entry{file("a"), dir("d"), file("d/x"), link("l", "/etc/passwd")}, Limits{}, nil, ""},
		{"unsorted", []Entry{file("b"), file("a")}, Limits{}, ErrInvalid, "not sorted"},
		{"duplicate", []Entry{file("a"), file("a")}, Limits{}, ErrInvalid, "duplicate"},
		{"bad path", []Entry{file("../a")}, Limits{}, ErrInvalid, `".." element`},
		{"git", []Entry{dir(".git"), file(".git/config")}, Limits{}, ErrInvalid, ".git"},
		{"git allowed", []Entry{dir(".git"), file(".git/config")}, Limits{AllowGit: true}, nil, ""},
		{"unknown type", []Entry{{Path: "a", Type: "fifo"}}, Limits{}, ErrInvalid, "unknown type"},
		{"setuid", []Entry{with(file("a"), func(e *Entry) { e.Mode |= fs.ModeSetuid })}, Limits{}, ErrInvalid, "setuid"},
		{"raw setgid", []Entry{with(file("a"), func(e *Entry) { e.Mode |= 0o2000 })}, Limits{}, ErrInvalid, "setuid"},
		{"type bits", []Entry{with(file("a"), func(e *Entry) { e.Mode |= fs.ModeDevice })}, Limits{}, ErrInvalid, "other than permissions"},
		{"bad sum", []Entry{with(file("a"), func(e *Entry) { e.SHA256 = strings.ToUpper(e.SHA256) })}, Limits{}, ErrInvalid, "sha256"},
		{"negative size", []Entry{with(file("a"), func(e *Entry) { e.Size = -1 })}, Limits{}, ErrInvalid, "negative"},
		{"dir with sum", []Entry{with(dir("d"), func(e *Entry) { e.SHA256 = sum("x") })}, Limits{}, ErrInvalid, "directory"},
		{"file with target", []Entry{with(file("a"), func(e *Entry) { e.Target = "x" })}, Limits{}, ErrInvalid, "target"},
		{"empty target", []Entry{link("l", "")}, Limits{}, ErrInvalid, "without a target"},
		{"nul target", []Entry{link("l", "a\x00b")}, Limits{}, ErrInvalid, "NUL"},
		{"under symlink", []Entry{link("l", "/etc"), file("l/passwd")}, Limits{}, ErrInvalid, "symlink"},
		{"under file", []Entry{file("f"), file("f/x")}, Limits{}, ErrInvalid, "which is a file"},
		{"missing parent", []Entry{file("d/x")}, Limits{}, ErrInvalid, "not in the manifest"},
		{"parent after sibling", []Entry{dir("a"), file("a-b"), file("a/x")}, Limits{}, nil, ""},
		{"case collision", []Entry{file("README"), file("readme")}, Limits{}, ErrInvalid, "case-insensitive"},
		{"case sensitive host", []Entry{file("README"), file("readme")}, Limits{CaseSensitive: true}, nil, ""},
		{"too many", []Entry{file("a"), file("b")}, Limits{MaxEntries: 1}, ErrTooLarge, "entries"},
		{"file too big", []Entry{with(file("a"), func(e *Entry) { e.Size = 5 << 30 })}, Limits{}, ErrTooLarge, "file is"},
		{"no file cap", []Entry{with(file("a"), func(e *Entry) { e.Size = 5 << 30 })}, Limits{MaxFileSize: -1, MaxTotalBytes: -1}, nil, ""},
		{"total too big", []Entry{file("a"), file("b")}, Limits{MaxTotalBytes: 1}, ErrTooLarge, "add up"},
		{"target too long", []Entry{link("l", strings.Repeat("x", 5000))}, Limits{}, ErrTooLarge, "target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Manifest{Entries: tt.entries}
			err := m.Validate(tt.limits)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.rule) {
				t.Fatalf("Validate = %v, want %v mentioning %q", err, tt.want, tt.rule)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate = %T, want *ValidationError", err)
			}
		})
	}
}

func TestEncodeDecode(t *testing.T) {
	m := &Manifest{Entries: []Entry{
		{Path: "a<b>&c", Type: File, Mode: 0o755, Size: 3, SHA256: sum("abc")},
		{Path: "d", Type: Dir, Mode: 0o700},
		{Path: "d/l", Type: Symlink, Mode: SymlinkMode, Target: "../a<b>&c"},
	}}
	var buf bytes.Buffer
	must(t, m.Encode(&buf))
	const want = `{"entries":[
{"path":"a<b>&c","type":"file","mode":493,"size":3,"sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
{"path":"d","type":"dir","mode":448},
{"path":"d/l","type":"symlink","mode":511,"target":"../a<b>&c"}
]}
`
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("Encode (-want +got):\n%s", diff)
	}
	got, err := Decode(&buf, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	var empty bytes.Buffer
	must(t, (&Manifest{}).Encode(&empty))
	if _, err := Decode(&empty, Limits{}); err != nil {
		t.Errorf("Decode(empty manifest) = %v", err)
	}
}

func TestDecode(t *testing.T) {
	sumA := sum("a")
	tests := []struct {
		name, in string
		want     error
		mode     fs.FileMode
	}{
		{"ok", `{"entries":[{"path":"a","type":"file","mode":420,"size":1,"sha256":"` + sumA + `"}]}`, nil, 0o644},
		{"raw setuid stripped", `{"entries":[{"path":"a","type":"file","mode":2541,"size":1,"sha256":"` + sumA + `"}]}`, nil, 0o755},
		{"go setuid stripped", `{"entries":[{"path":"a","type":"file","mode":8389101,"size":1,"sha256":"` + sumA + `"}]}`, nil, 0o755},
		{"unknown field", `{"entries":[],"extra":1}`, nil, 0},
		{"trailing data", `{"entries":[]} {}`, ErrInvalid, 0},
		{"traversal", `{"entries":[{"path":"../a","type":"dir","mode":493}]}`, ErrInvalid, 0},
		{"negative mode", `{"entries":[{"path":"a","type":"dir","mode":-1}]}`, nil, 0},
		{"not json", `entries`, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode(strings.NewReader(tt.in), Limits{})
			if tt.mode != 0 {
				if err != nil {
					t.Fatalf("Decode = %v", err)
				}
				if m.Entries[0].Mode != tt.mode {
					t.Errorf("mode = %#o, want %#o", m.Entries[0].Mode, tt.mode)
				}
				return
			}
			if err == nil {
				t.Fatal("Decode succeeded, want an error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Decode = %v, want %v", err, tt.want)
			}
		})
	}
	big := `{"entries":[` + strings.Repeat(" ", 100) + `]}`
	if _, err := Decode(strings.NewReader(big), Limits{MaxManifestBytes: 50}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Decode of an oversized encoding = %v, want ErrTooLarge", err)
	}
}

func TestStripSpecialBits(t *testing.T) {
	m := &Manifest{Entries: []Entry{
		{Path: "a", Type: File, Mode: 0o755 | fs.ModeSetuid},
		{Path: "b", Type: File, Mode: 0o644},
		{Path: "c", Type: Dir, Mode: 0o777 | fs.ModeSticky},
	}}
	if diff := cmp.Diff([]string{"a", "c"}, m.StripSpecialBits()); diff != "" {
		t.Errorf("stripped (-want +got):\n%s", diff)
	}
	if m.Entries[0].Mode != 0o755 || m.Entries[2].Mode != 0o777 {
		t.Errorf("modes after strip: %v", m.Entries)
	}
}

func FuzzValidPath(f *testing.F) {
	for _, s := range []string{"a/b", "../a", "/a", "a//b", ".git/x", ".GIT", "a\\b", "a\x00", "\u200c.git", "a/./b", "ok.txt"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if ValidPath(p) != nil {
			return
		}
		// Whatever passes is clean, relative and stays inside the root.
		if strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || strings.ContainsRune(p, 0) {
			t.Fatalf("ValidPath accepted %q", p)
		}
		for _, e := range strings.Split(p, "/") {
			if e == "" || e == "." || e == ".." || strings.EqualFold(e, ".git") {
				t.Fatalf("ValidPath accepted %q (element %q)", p, e)
			}
		}
	})
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"entries":[{"path":"a","type":"file","mode":420,"size":1,"sha256":"` + sum("a") + `"}]}`))
	f.Add([]byte(`{"entries":[{"path":"d","type":"dir","mode":493},{"path":"d/l","type":"symlink","mode":511,"target":"/etc"}]}`))
	f.Add([]byte(`{"entries":[{"path":"l","type":"symlink","mode":511,"target":"/etc"},{"path":"l/x","type":"dir","mode":493}]}`))
	f.Add([]byte(`{"entries":[{"path":"a","type":"file","mode":3565,"size":1,"sha256":"` + sum("a") + `"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(bytes.NewReader(data), Limits{MaxEntries: 1000})
		if err != nil {
			return
		}
		if err := m.Validate(Limits{MaxEntries: 1000}); err != nil {
			t.Fatalf("Decode returned a manifest that does not validate: %v", err)
		}
		// What decodes re-encodes and decodes to the same manifest.
		var buf bytes.Buffer
		if err := m.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		m2, err := Decode(&buf, Limits{MaxEntries: 1000})
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if diff := cmp.Diff(m, m2, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
		for _, e := range m.Entries {
			if e.Mode&^fs.ModePerm != 0 {
				t.Fatalf("%s kept mode %#o", e.Path, uint32(e.Mode))
			}
		}
	})
}
