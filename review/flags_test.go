package review

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// absent stands for a side that does not exist (an added or a deleted
// file).
const absent = "\x00absent"

// changeOf is the change of p from old to new (either absent), its
// contents put in s.
func changeOf(s store, p, old, new string) manifest.Change {
	c := manifest.Change{Path: p, Kind: manifest.Modified}
	if old != absent {
		c.Old = entry(s, p, old, 0o644)
	}
	if new != absent {
		c.New = entry(s, p, new, 0o644)
	}
	switch {
	case old == absent:
		c.Kind = manifest.Added
	case new == absent:
		c.Kind = manifest.Deleted
	}
	return c
}

// fileOf builds the changeset of one change and returns its file.
func fileOf(t *testing.T, p, old, new string) *File {
	t.Helper()
	s := store{}
	return buildOne(t, changeOf(s, p, old, new), s)
}

// kinds are the kinds of f's flags, in order.
func kinds(f *File) []FlagKind {
	var out []FlagKind
	for _, fl := range f.Flags {
		out = append(out, fl.Kind)
	}
	return out
}

func numberedLines(n int, format string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, format+"\n", i)
	}
	return b.String()
}

// flagCase is a change and the flags it must get: the kinds exactly, and
// words each reason must hold (by kind).
type flagCase struct {
	name     string
	path     string
	old, new string
	kinds    []FlagKind
	reasons  map[FlagKind][]string
}

func checkFlags(t *testing.T, cases []flagCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := fileOf(t, c.path, c.old, c.new)
			if diff := cmp.Diff(c.kinds, kinds(f)); diff != "" {
				t.Fatalf("kinds (-want +got):\n%s\nflags: %+v", diff, f.Flags)
			}
			for k, words := range c.reasons {
				r := f.FlagReason(k)
				for _, w := range words {
					if !strings.Contains(r, w) {
						t.Errorf("%s reason %q lacks %q", k, r, w)
					}
				}
			}
			for _, fl := range f.Flags {
				if strings.ContainsAny(fl.Reason, "\n\r") {
					t.Errorf("%s reason spans lines: %q", fl.Kind, fl.Reason)
				}
			}
		})
	}
}

func TestFlagCI(t *testing.T) {
	checkFlags(t, []flagCase{
		{name: "drone", path: ".drone.yml", old: absent, new: "kind: pipeline\n", kinds: []FlagKind{FlagCI}, reasons: map[FlagKind][]string{FlagCI: {"CI configuration: ", "Drone"}}},
		{name: "gitlab include", path: ".gitlab/ci/build.yml", old: "a: 1\n", new: "a: 2\n", kinds: []FlagKind{FlagCI}},
		{name: "jenkinsfile variant", path: "ci/Jenkinsfile.release", old: "a\n", new: "b\n", kinds: []FlagKind{FlagCI}},
		{name: "codeowners", path: ".github/CODEOWNERS", old: "* @me\n", new: "* @agent\n", kinds: []FlagKind{FlagCI}, reasons: map[FlagKind][]string{FlagCI: {"who must approve"}}},
		{name: "dependabot", path: ".github/dependabot.yml", old: "a\n", new: "b\n", kinds: []FlagKind{FlagCI}},
		// Already runs on the host: one flag, not two.
		{name: "github workflow", path: ".github/workflows/ci.yml", old: "a\n", new: "b\n", kinds: []FlagKind{FlagHostExec}},
		{name: "gitlab-ci", path: ".gitlab-ci.yml", old: "a\n", new: "b\n", kinds: []FlagKind{FlagHostExec}},
		{name: "ordinary yaml", path: "config/app.yml", old: "a\n", new: "b\n"},
		{name: "a doc about CI", path: "docs/drone.yml.md", old: "a\n", new: "b\n"},
	})
}

func TestFlagTests(t *testing.T) {
	goTest := "package x\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {\n\tif got := f(); got != 1 {\n\t\tt.Errorf(\"f() = %d\", got)\n\t}\n}\n\nfunc TestB(t *testing.T) {\n\tassert.Equal(t, 2, g())\n}\n"
	checkFlags(t, []flagCase{
		{name: "go test file deleted", path: "x/a_test.go", old: goTest, new: absent,
			kinds: []FlagKind{FlagTestDeleted}, reasons: map[FlagKind][]string{FlagTestDeleted: {"test file deleted (13 lines)"}}},
		{name: "large test file deleted", path: "x/b_test.go", old: numberedLines(150, "// %d"), new: absent,
			kinds: []FlagKind{FlagTestDeleted}, reasons: map[FlagKind][]string{FlagTestDeleted: {"test file deleted (150 lines)"}}},
		{name: "python test file deleted", path: "tests/test_words.py", old: "def test_a():\n    assert 1\n", new: absent, kinds: []FlagKind{FlagTestDeleted}},
		{name: "ordinary file deleted", path: "x/a.go", old: "package x\n", new: absent},
		{name: "test edited: an assertion added", path: "x/a_test.go", old: goTest,
			new: strings.Replace(goTest, "\tassert.Equal(t, 2, g())\n", "\tassert.Equal(t, 2, g())\n\tassert.Equal(t, 3, h())\n", 1)},
		{name: "t.Skip added", path: "x/a_test.go", old: goTest,
			new:   strings.Replace(goTest, "func TestB(t *testing.T) {\n", "func TestB(t *testing.T) {\n\tt.Skip(\"flaky\")\n", 1),
			kinds: []FlagKind{FlagTestSkipped}, reasons: map[FlagKind][]string{FlagTestSkipped: {"tests skipped: t.Skip at line 12"}}},
		{name: "t.Skip moved", path: "x/a_test.go", old: "func TestA(t *testing.T) {\n\tt.Skip(\"slow\")\n\ta()\n\tb()\n}\n",
			new: "func TestA(t *testing.T) {\n\ta()\n\tb()\n\tt.Skip(\"slow\")\n}\n"},
		{name: "t.Skip in a comment", path: "x/a_test.go", old: goTest, new: goTest + "// t.Skip(\"later\") would hide it\n"},
		{name: "Skip method outside tests", path: "x/reader.go", old: "package x\n", new: "package x\n\nfunc f() { r.Skip(4) }\n"},
		{name: "pytest skip and xfail", path: "tests/test_words.py", old: "def test_a():\n    assert f() == 1\n",
			new:   "import pytest\n\n@pytest.mark.skip(reason=\"x\")\ndef test_a():\n    assert f() == 1\n\n@pytest.mark.xfail\ndef test_b():\n    assert g()\n",
			kinds: []FlagKind{FlagTestSkipped}, reasons: map[FlagKind][]string{FlagTestSkipped: {"@pytest.mark.skip at line 3", "@pytest.mark.xfail at line 7"}}},
		{name: "it.only", path: "web/a.test.ts", old: "describe('a', () => {\n  it('works', () => {})\n})\n",
			new:   "describe('a', () => {\n  it.only('works', () => {})\n})\n",
			kinds: []FlagKind{FlagTestNarrowed}, reasons: map[FlagKind][]string{FlagTestNarrowed: {".only at line 2", "only the focused tests run"}}},
		{name: "fdescribe and xit", path: "spec/a.spec.js", old: absent,
			new:   "fdescribe('a', () => {\n  xit('b', () => {})\n  it.skip('c', () => {})\n})\n",
			kinds: []FlagKind{FlagTestSkipped, FlagTestNarrowed}, reasons: map[FlagKind][]string{FlagTestSkipped: {"xit at line 2", "it.skip at line 3"}, FlagTestNarrowed: {"fit at line 1"}}},
		{name: "model.fit and exit are not tests", path: "src/train.js", old: absent, new: "model.fit(x)\nprocess.exit(1)\nconst fit = 1\n"},
		{name: "junit disabled", path: "src/test/java/ATest.java", old: "class ATest {\n  @Test void a() {}\n}\n",
			new: "class ATest {\n  @Disabled\n  @Test void a() {}\n}\n", kinds: []FlagKind{FlagTestSkipped}},
		{name: "rust ignore", path: "tests/it.rs", old: "#[test]\nfn a() {}\n", new: "#[test]\n#[ignore]\nfn a() {}\n",
			kinds: []FlagKind{FlagTestSkipped}, reasons: map[FlagKind][]string{FlagTestSkipped: {"#[ignore] at line 2"}}},
		{name: "assertion commented out", path: "x/a_test.go", old: goTest,
			new:   strings.Replace(goTest, "\tassert.Equal(t, 2, g())\n", "\t// assert.Equal(t, 2, g())\n", 1),
			kinds: []FlagKind{FlagTestNarrowed}, reasons: map[FlagKind][]string{FlagTestNarrowed: {"1 assertion commented out at line 12"}}},
		{name: "python assertion commented out", path: "tests/test_a.py", old: "def test_a():\n    assert f() == 1\n    assert g()\n",
			new: "def test_a():\n    # assert f() == 1\n    assert g()\n", kinds: []FlagKind{FlagTestNarrowed}},
		{name: "a new comment about assertions", path: "x/a_test.go", old: goTest, new: goTest + "// assert.Equal checks more than it says\n"},
		{name: "test function removed", path: "x/a_test.go", old: goTest, new: goTest[:strings.Index(goTest, "func TestB")],
			kinds: []FlagKind{FlagTestDeleted}, reasons: map[FlagKind][]string{FlagTestDeleted: {"1 test removed: TestB"}}},
		{name: "test function renamed", path: "x/a_test.go", old: goTest, new: strings.Replace(goTest, "TestB", "TestBetter", 1)},
		{name: "jest test removed", path: "a.test.js", old: "it('adds', () => {})\nit('subtracts', () => {})\n", new: "it('adds', () => {})\n",
			kinds: []FlagKind{FlagTestDeleted}, reasons: map[FlagKind][]string{FlagTestDeleted: {"subtracts"}}},
	})
}

func TestFlagTestRenamedAway(t *testing.T) {
	s := store{}
	c := manifest.Change{Kind: manifest.Renamed, OldPath: "x/a_test.go", Path: "x/a_test.go.orig",
		Old: entry(s, "x/a_test.go", "package x\n", 0o644), New: entry(s, "x/a_test.go.orig", "package x\n", 0o644)}
	f := buildOne(t, c, s)
	if !strings.Contains(f.FlagReason(FlagTestDeleted), "renamed to a name its test runner does not pick up") {
		t.Errorf("flags %+v", f.Flags)
	}
	// Renamed away and emptied of a test: one flag, both reasons.
	s = store{}
	c.Old = entry(s, "x/a_test.go", "package x\n\nfunc TestA(t *testing.T) {}\n", 0o644)
	c.New = entry(s, "x/a_test.go.orig", "package x\n", 0o644)
	f = buildOne(t, c, s)
	want := []Flag{{Kind: FlagTestDeleted, Reason: "test file renamed to a name its test runner does not pick up; 1 test removed: TestA"}}
	if diff := cmp.Diff(want, f.Flags); diff != "" {
		t.Errorf("flags (-want +got):\n%s", diff)
	}
}

func TestIsTestFile(t *testing.T) {
	for p, want := range map[string]bool{
		"a_test.go": true, "a.go": false, "testdata/a.go": false, "tests/test_a.py": true, "a_test.py": true,
		"tests/helpers.py": true, "tests/conftest.py": false, "src/a.py": false, "a.test.ts": true, "a.spec.jsx": true,
		"__tests__/a.js": true, "a.js": false, "src/test/java/x/A.java": true, "FooTest.java": true, "Foo.java": false,
		"tests/it.rs": true, "src/lib.rs": false, "a_spec.rb": true, "AppTests.swift": true, "a_unittest.cc": true,
	} {
		if got := IsTestFile(p); got != want {
			t.Errorf("IsTestFile(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestFlagLargeDeletion(t *testing.T) {
	body := numberedLines(300, "line %d")
	shrunk := numberedLines(10, "line %d") + numberedLines(40, "new %d")
	rewritten := numberedLines(10, "line %d") + numberedLines(280, "rewritten %d")
	checkFlags(t, []flagCase{
		{name: "large file deleted", path: "a.txt", old: numberedLines(150, "l%d"), new: absent, kinds: []FlagKind{FlagLargeDeletion},
			reasons: map[FlagKind][]string{FlagLargeDeletion: {"deletes a file of 150 lines"}}},
		{name: "small file deleted", path: "a.txt", old: numberedLines(LargeDeletedFile-1, "l%d"), new: absent},
		{name: "hunk removes most", path: "a.txt", old: body, new: shrunk, kinds: []FlagKind{FlagLargeDeletion},
			reasons: map[FlagKind][]string{FlagLargeDeletion: {"removes 290 lines at line 11 of the old file"}}},
		{name: "rewrite", path: "a.txt", old: body, new: rewritten},
		{name: "hunk under threshold", path: "a.txt", old: body, new: numberedLines(120, "line %d")},
	})
}

func TestFlagGeneratedAndBinary(t *testing.T) {
	checkFlags(t, []flagCase{
		{name: "go generated", path: "x/zz_gen.go", old: absent, new: "// Code generated by stringer. DO NOT EDIT.\n\npackage x\n",
			kinds: []FlagKind{FlagGenerated}, reasons: map[FlagKind][]string{FlagGenerated: {"Code generated", "not edited by hand"}}},
		{name: "pb.go", path: "api/x.pb.go", old: "package api\n", new: "package api\n\nvar x = 1\n", kinds: []FlagKind{FlagGenerated}},
		{name: "minified", path: "static/app.min.js", old: absent, new: "var a=1;\n", kinds: []FlagKind{FlagGenerated}},
		{name: "deleted generated", path: "x/zz_gen.go", old: "// Code generated by stringer. DO NOT EDIT.\n\npackage x\n", new: absent},
		{name: "says DO NOT EDIT in prose", path: "a.go", old: absent, new: "package a\n\n// Do not edit: DO NOT EDIT this by hand.\n"},
		{name: "lockfile is a dependency", path: "go.sum", old: "a v1 h1:x=\n", new: "a v1 h1:y=\n", kinds: []FlagKind{FlagDependency}},
		{name: "binary added", path: "img/logo.png", old: absent, new: "\x89PNG\r\n\x1a\n\x00\x00\x00", kinds: []FlagKind{FlagBinary},
			reasons: map[FlagKind][]string{FlagBinary: {"binary (11 bytes)"}}},
		{name: "binary deleted", path: "img/logo.png", old: "\x89PNG\r\n\x1a\n\x00", new: absent},
	})
}

func TestGeneratedReason(t *testing.T) {
	for p, want := range map[string]string{
		"go.sum": "a lock or checksum file", "web/yarn.lock": "a lock or checksum file", "x_pb2.py": "generated from a protocol buffer definition",
		"a.min.css": "minified",
	} {
		f := fileOf(t, p, absent, "x\n")
		if got, ok := Generated(f); !ok || got != want {
			t.Errorf("Generated(%s) = %q, %v; want %q", p, got, ok, want)
		}
	}
	if _, ok := Generated(fileOf(t, "main.go", "package main\n", "package main\n\n// not generated\n")); ok {
		t.Error("main.go generated")
	}
}

func TestFlagCredentials(t *testing.T) {
	cred := func(line string) string { return "package x\n\n" + line + "\n" }
	checkFlags(t, []flagCase{
		{name: "aws key", path: "x/config.go", old: absent, new: cred(`var id = "AKIAZ7VXQ3PLMN4RT2KS"`), kinds: []FlagKind{FlagCredential},
			reasons: map[FlagKind][]string{FlagCredential: {"possible credential: AWS access key ID at line 3"}}},
		{name: "aws documentation example", path: "x/config.go", old: absent, new: cred(`var id = "AKIAIOSFODNN7EXAMPLE"`)},
		{name: "github token", path: ".env.example", old: absent, new: "GITHUB_TOKEN=ghp_" + strings.Repeat("aB3x", 9) + "\n", kinds: []FlagKind{FlagCredential},
			reasons: map[FlagKind][]string{FlagCredential: {"GitHub token at line 1"}}},
		{name: "fine-grained github token", path: "a.sh", old: absent, new: "export T=github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTU\n", kinds: []FlagKind{FlagCredential}},
		{name: "slack", path: "a.py", old: absent, new: "token = 'xoxb-123456789012-abcdefABCDEF'\n", kinds: []FlagKind{FlagCredential}},
		{name: "stripe", path: "a.rb", old: absent, new: "Stripe.api_key = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc'\n", kinds: []FlagKind{FlagCredential}},
		{name: "google", path: "a.js", old: absent, new: "const k = 'AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW'\n", kinds: []FlagKind{FlagCredential}},
		{name: "private key", path: "deploy/id_ed25519", old: absent, new: "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n",
			kinds: []FlagKind{FlagCredential}, reasons: map[FlagKind][]string{FlagCredential: {"private key block at line 1"}}},
		{name: "high entropy assigned to a secret", path: "settings.py", old: absent, new: "SECRET_KEY = 'q8Zr3Lx0Vb7Nw2Tk5Yp9Hm4Jc6Ds1Gf'\n",
			kinds: []FlagKind{FlagCredential}, reasons: map[FlagKind][]string{FlagCredential: {"high-entropy string at line 1"}}},
		{name: "high entropy in an env file", path: ".env", old: absent, new: "API_SECRET=q8Zr3Lx0Vb7Nw2Tk5Yp9Hm4Jc6Ds1Gf\n", kinds: []FlagKind{FlagCredential}},
		{name: "high entropy hex api key", path: "a.yaml", old: absent, new: "api_key: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b\n", kinds: []FlagKind{FlagCredential}},
		{name: "checksum is no secret", path: "a.go", old: absent, new: cred(`const sum = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"`)},
		{name: "camel-case name", path: "a.go", old: absent, new: cred(`var tokenName = "DecryptPKCS1v15SessionKeyForTests"`)},
		{name: "placeholder", path: "a.env", old: absent, new: "API_KEY=your-api-key-goes-here-please-change\n"},
		{name: "alphabet", path: "a.go", old: absent, new: cred(`const tokenChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"`)},
		{name: "ordinary code", path: "a.go", old: absent, new: cred("func (s *Server) handleAuthTokenRefresh(w http.ResponseWriter, r *http.Request) {}")},
		{name: "removed secret is not added", path: "a.py", old: "SECRET_KEY = 'q8Zr3Lx0Vb7Nw2Tk5Yp9Hm4Jc6Ds1Gf'\n", new: "SECRET_KEY = os.environ['SECRET_KEY']\n"},
		{name: "lockfile checksums", path: "package-lock.json", old: absent, new: `{"packages": {"node_modules/a": {"version": "1.0.0", "integrity": "sha512-q8Zr3Lx0Vb7Nw2Tk5Yp9Hm4Jc6Ds1Gf=="}}}` + "\n",
			kinds: []FlagKind{FlagDependency}},
	})
}

// The reason never carries the credential itself: it reaches the audit
// log and terminals.
func TestCredentialReasonHidesValue(t *testing.T) {
	token := "ghp_" + strings.Repeat("Zx9q", 9)
	f := fileOf(t, "a.txt", absent, token+"\n")
	for _, fl := range f.Flags {
		if strings.Contains(fl.Reason, "Zx9q") {
			t.Errorf("reason shows the token: %q", fl.Reason)
		}
	}
	if !f.HasFlag(FlagCredential) {
		t.Errorf("no credential flag: %+v", f.Flags)
	}
}

func TestSecondLookOverview(t *testing.T) {
	s := store{}
	changes := []manifest.Change{
		changeOf(s, "package.json", `{"dependencies": {"lodash": "^4"}}`, `{"dependencies": {"lodash": "^4", "left-pad": "^1.3.0"}}`),
		changeOf(s, "package-lock.json", `{"packages": {}}`, `{"packages": {"node_modules/left-pad": {"version": "1.3.0"}, "node_modules/other": {"version": "1"}}}`),
		changeOf(s, "x/a_test.go", "func TestA(t *testing.T) {\n\ta()\n}\n", "func TestA(t *testing.T) {\n\tt.Skip()\n\ta()\n}\n"),
		changeOf(s, ".envrc", absent, "export X=1\n"),
		changeOf(s, "main.go", "package main\n", "package main\n\nfunc main() {}\n"),
	}
	cs, err := New(context.Background(), changes, s.source, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := cs.SecondLook()
	want := "4 files deserve a second look: 1 file that runs on your machine, 2 dependency changes (added: left-pad), 1 test skipped"
	if got.String() != want {
		t.Errorf("overview\n got %q\nwant %q", got.String(), want)
	}
	if diff := cmp.Diff([]string{"left-pad"}, got.Added); diff != "" {
		t.Errorf("added (-want +got):\n%s", diff)
	}
	if (&Changeset{}).SecondLook().String() != "" {
		t.Error("an empty changeset deserves a look")
	}
}

// The notes before each flagged file's diff are lines git apply skips:
// the patch still applies, byte for byte.
func TestFlagNotesApplyWithGit(t *testing.T) {
	needGit(t)
	fx := newFixture(t, tree{files: map[string]string{
		"go.mod":    "module x\n\nrequire a.example/b v1.0.0\n",
		"a_test.go": "package x\n\nfunc TestA(t *testing.T) {\n\ta()\n}\n",
		"big.txt":   numberedLines(150, "line %d"),
	}}, tree{files: map[string]string{
		"go.mod":    "module x\n\nrequire (\n\ta.example/b v1.0.0\n\tevil.example/c v0.1.0\n)\n",
		"a_test.go": "package x\n\nfunc TestA(t *testing.T) {\n\tt.Skip()\n\ta()\n}\n",
	}}, nil)
	patch, _ := Patch(fx.cs, ApproveAll(fx.cs), PatchOptions{})
	for _, want := range []string{
		"# tests skipped: t.Skip at line 4\ndiff --git a/a_test.go b/a_test.go\n",
		"# large deletion: deletes a file of 150 lines\ndiff --git a/big.txt b/big.txt\n",
		"# dependencies: go.mod changed: added evil.example/c\ndiff --git a/go.mod b/go.mod\n",
	} {
		if !strings.Contains(string(patch), want) {
			t.Errorf("patch lacks %q:\n%s", want, patch)
		}
	}
	repo := gitRepo(t, fx.oldDir)
	gitApply(t, repo, patch)
	if diff := cmp.Diff(snapshot(t, fx.newDir), snapshot(t, repo)); diff != "" {
		t.Errorf("git apply result (-want +got):\n%s", diff)
	}
}
