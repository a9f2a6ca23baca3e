package manifest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/testkit/testenv"

	"github.com/google/go-cmp/cmp"
)

func TestWildmatch(t *testing.T) {
	tests := []struct {
		pattern, text string
		want          bool
	}{
		{"foo", "foo", true},
		{"foo", "bar", false},
		{"*.log", "a.log", true},
		{"*.log", "dir/a.log", false},
		{"?", "/", false},
		{"a/*/c", "a/b/c", true},
		{"a/*/c", "a/b/x/c", false},
		{"a/**/c", "a/c", true},
		{"a/**/c", "a/b/x/c", true},
		{"a/**/b/c", "a/b/x/b/c", true},
		{"**/foo", "foo", true},
		{"**/foo", "x/y/foo", true},
		{"abc/**", "abc/x/y", true},
		{"abc/**", "abc", false},
		{"foo**bar", "fooxbar", true},
		{"foo**bar", "foo/bar", false},
		{"[!a]*.txt", "b.txt", true},
		{"[!a]*.txt", "a.txt", false},
		{"[^a]x", "bx", true},
		{"[a-c]", "b", true},
		{"[a-c]", "d", false},
		{"[]]", "]", true},
		{"[[:digit:]]", "7", true},
		{"[[:digit:]]", "x", false},
		{"[[:bogus:]]", "x", false},
		{"[/]", "/", false},
		{`\*`, "*", true},
		{`\*`, "x", false},
		{`\#x`, "#x", true},
		{"[", "[", false},
		{"a[", "a[", false},
	}
	for _, tt := range tests {
		if got := wildmatch(tt.pattern, tt.text); got != tt.want {
			t.Errorf("wildmatch(%q, %q) = %v, want %v", tt.pattern, tt.text, got, tt.want)
		}
	}
}

func TestTrimTrailingSpaces(t *testing.T) {
	for in, want := range map[string]string{
		"foo   ":   "foo",
		`foo\ `:    `foo\ `,
		`foo\  `:   `foo\ `,
		"foo":      "foo",
		`foo\`:     `foo\`,
		"  ":       "",
		"a b ":     "a b",
		`a\\ `:     `a\\`,
		"\tx \t  ": "\tx \t",
	} {
		if got := trimTrailingSpaces(in); got != want {
			t.Errorf("trimTrailingSpaces(%q) = %q, want %q", in, got, want)
		}
	}
}

// gitignoreCases are trees of .gitignore files and paths; each is walked
// both by Walk and by the real git, which must agree.
var gitignoreCases = []struct {
	name  string
	files map[string]string // path → content ("" for an empty file)
}{
	{"negated dir does not re-include files", map[string]string{
		".gitignore": "*.log\n!important/\n", "important/a.log": "", "important/b.txt": "", "c.log": "",
	}},
	{"double star backtracks", map[string]string{
		".gitignore": "a/**/b/c\n", "a/b/x/b/c": "", "a/b/x/b/d": "", "a/b/c": "",
	}},
	{"trailing double star keeps the dir", map[string]string{
		".gitignore": "abc/**\n!abc/keep\n", "abc/keep": "", "abc/drop": "", "abc/sub/x": "",
	}},
	{"negated classes", map[string]string{
		".gitignore": "[!a]*.txt\n", "a.txt": "", "b.txt": "", "sub/c.txt": "", "sub/a.txt": "",
	}},
	{"anchored and dir-only", map[string]string{
		".gitignore": "/build\nout/\ndoc/*.html\n", "build/x": "", "src/build/y": "", "out/z": "",
		"src/out/w": "", "out2": "", "doc/a.html": "", "doc/sub/b.html": "", "src/doc/a.html": "",
	}},
	{"nested gitignore overrides", map[string]string{
		".gitignore": "*.gen\n", "sub/.gitignore": "!keep.gen\n/local\n", "sub/keep.gen": "",
		"sub/drop.gen": "", "sub/local/x": "", "local/y": "", "keep.gen": "", "sub/deeper/keep.gen": "",
	}},
	{"cannot re-include under an excluded dir", map[string]string{
		".gitignore": "vendor/\n!vendor/keep.go\n", "vendor/keep.go": "", "vendor/other.go": "", "main.go": "",
	}},
	{"comments escapes and spaces", map[string]string{
		".gitignore": "# comment\n\\#hash\n\\!bang\ntrail   \nsp\\ \n\n", "#hash": "", "!bang": "", "trail": "",
		"sp ": "", "# comment": "", "ok": "",
	}},
	{"crlf and slash star", map[string]string{
		".gitignore": "*.tmp\r\nlogs/*\r\n!logs/keep\r\n", "a.tmp": "", "logs/x": "", "logs/keep": "", "logs/sub/y": "",
	}},
	{"middle slash is anchored", map[string]string{
		"sub/.gitignore": "x/y\n", "sub/x/y": "", "sub/z/x/y": "", "x/y": "",
	}},
	{"star matches dot files", map[string]string{
		".gitignore": "*\n!*/\n!*.go\n", ".hidden.go": "", "a/b.go": "", "a/c.txt": "", ".x": "",
	}},
}

// TestGitignoreAgainstGit checks that Walk keeps exactly the files git
// lists as untracked and not ignored.
func TestGitignoreAgainstGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Skip(t, testenv.Git, "git not installed")
	}
	for _, tc := range gitignoreCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tc.files)
			git := exec.Command("git", "-c", "core.excludesFile=/dev/null", "init", "-q")
			git.Dir = dir
			if out, err := git.CombinedOutput(); err != nil {
				t.Fatalf("git init: %v\n%s", err, out)
			}
			ls := exec.Command("git", "-c", "core.excludesFile=/dev/null", "-c", "core.quotePath=false",
				"ls-files", "-z", "--others", "--exclude-standard")
			ls.Dir = dir
			out, err := ls.Output()
			if err != nil {
				t.Fatalf("git ls-files: %v", err)
			}
			want := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
			slices.Sort(want)

			m, _, err := Walk(context.Background(), dir, WalkOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range m.Entries {
				if e.Type == File {
					got = append(got, e.Path)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("files kept (-git +Walk):\n%s", diff)
			}
		})
	}
}

func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func FuzzWildmatch(f *testing.F) {
	for _, s := range [][2]string{{"a/**/b", "a/x/b"}, {"[!a-c]*", "d"}, {"[[:alpha:]", "x"}, {`\`, `\`}, {"***", "a/b"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, text string) {
		if len(pattern) > 64 || len(text) > 64 {
			return
		}
		got := wildmatch(pattern, text)
		// A pattern without special characters matches only itself.
		if !strings.ContainsAny(pattern, `*?[\`) && got != (pattern == text) {
			t.Errorf("wildmatch(%q, %q) = %v", pattern, text, got)
		}
		// "**" matches anything.
		if !wildmatch("**", text) {
			t.Errorf("** did not match %q", text)
		}
	})
}
