package manifest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/testkit/testenv"

	"github.com/google/go-cmp/cmp"
)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestWalk(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"main.go":              "package main\n",
		"README.md":            "hi",
		".gitignore":           "*.o\nnode_modules/\n",
		"a.o":                  "obj",
		"node_modules/x/y.js":  "js",
		".git/config":          "[core]",
		".env":                 "KEY=1",
		".env.example":         "KEY=",
		"config/.env.local":    "KEY=2",
		"certs/server.pem":     "pem",
		"keys/id_ed25519":      "key",
		"keys/id_ed25519.pub":  "pub",
		"keys/id_rsa_old":      "key",
		".aws/credentials":     "aws",
		"home/.ssh/known":      "ssh",
		".npmrc":               "registry=https://example.invalid\n",
		"web/.npmrc":           "//registry/:_authToken=abc\n",
		".kube/config":         "kube",
		"other/config":         "fine",
		"infra/main.tfstate":   "{}",
		"gcp/credentials.json": "{}",
		"build/out.bin":        "bin",
		"sub/deep/file.txt":    "deep",
		"sub/.git":             "gitdir: ../.git/modules/sub",
		"tool.sh":              "#!/bin/sh\n",
	})
	must(t, os.Chmod(filepath.Join(dir, "tool.sh"), 0o755|os.ModeSetuid))
	must(t, os.Chmod(filepath.Join(dir, "tool.sh"), 0o4755))
	must(t, os.Symlink("../etc/passwd", filepath.Join(dir, "link")))
	must(t, os.Symlink("sub", filepath.Join(dir, "sublink")))
	must(t, os.Mkdir(filepath.Join(dir, "empty"), 0o700))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))

	var events []Progress
	m, rep, err := Walk(context.Background(), dir, WalkOptions{
		Excludes: []string{"build/", "# comment"},
		Progress: func(p Progress) { events = append(events, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Path: ".env.example", Type: File, Mode: 0o644, Size: 4, SHA256: sum("KEY=")},
		{Path: ".gitignore", Type: File, Mode: 0o644, Size: 18, SHA256: sum("*.o\nnode_modules/\n")},
		{Path: ".kube", Type: Dir, Mode: 0o755},
		{Path: ".npmrc", Type: File, Mode: 0o644, Size: 33, SHA256: sum("registry=https://example.invalid\n")},
		{Path: "README.md", Type: File, Mode: 0o644, Size: 2, SHA256: sum("hi")},
		{Path: "certs", Type: Dir, Mode: 0o755},
		{Path: "config", Type: Dir, Mode: 0o755},
		{Path: "empty", Type: Dir, Mode: 0o700},
		{Path: "gcp", Type: Dir, Mode: 0o755},
		{Path: "home", Type: Dir, Mode: 0o755},
		{Path: "infra", Type: Dir, Mode: 0o755},
		{Path: "keys", Type: Dir, Mode: 0o755},
		{Path: "keys/id_ed25519.pub", Type: File, Mode: 0o644, Size: 3, SHA256: sum("pub")},
		{Path: "link", Type: Symlink, Mode: SymlinkMode, Target: "../etc/passwd"},
		{Path: "main.go", Type: File, Mode: 0o644, Size: 13, SHA256: sum("package main\n")},
		{Path: "other", Type: Dir, Mode: 0o755},
		{Path: "other/config", Type: File, Mode: 0o644, Size: 4, SHA256: sum("fine")},
		{Path: "sub", Type: Dir, Mode: 0o755},
		{Path: "sub/deep", Type: Dir, Mode: 0o755},
		{Path: "sub/deep/file.txt", Type: File, Mode: 0o644, Size: 4, SHA256: sum("deep")},
		{Path: "sublink", Type: Symlink, Mode: SymlinkMode, Target: "sub"},
		{Path: "tool.sh", Type: File, Mode: 0o755, Size: 10, SHA256: sum("#!/bin/sh\n")},
		{Path: "web", Type: Dir, Mode: 0o755},
	}
	if diff := cmp.Diff(want, m.Entries); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	type ex struct {
		Path   string
		Reason Reason
	}
	var gotEx []ex
	for _, e := range rep.Excluded {
		gotEx = append(gotEx, ex{e.Path, e.Reason})
	}
	wantEx := []ex{
		{".aws", ReasonSecret},
		{".env", ReasonSecret},
		{".git", ReasonGitDir},
		{".kube/config", ReasonSecret},
		{"a.o", ReasonGitignore},
		{"build", ReasonConfig},
		{"certs/server.pem", ReasonSecret},
		{"config/.env.local", ReasonSecret},
		{"fifo", ReasonSpecial},
		{"gcp/credentials.json", ReasonSecret},
		{"home/.ssh", ReasonSecret},
		{"infra/main.tfstate", ReasonSecret},
		{"keys/id_ed25519", ReasonSecret},
		{"keys/id_rsa_old", ReasonSecret},
		{"node_modules", ReasonGitignore},
		{"sub/.git", ReasonGitDir},
		{"web/.npmrc", ReasonSecret},
	}
	if diff := cmp.Diff(wantEx, gotEx); diff != "" {
		t.Errorf("exclusions (-want +got):\n%s", diff)
	}
	if rep.Files != 9 || rep.Dirs != 12 || rep.Symlinks != 2 {
		t.Errorf("report counts = %d files, %d dirs, %d symlinks", rep.Files, rep.Dirs, rep.Symlinks)
	}
	if err := m.Validate(Limits{}); err != nil {
		t.Errorf("Walk's manifest does not validate: %v", err)
	}
	last := events[len(events)-1]
	if last.Phase != PhaseDone || last.FilesHashed != 9 || last.FilesTotal != 9 || last.BytesHashed != rep.Bytes {
		t.Errorf("last progress event = %+v, want done with 9/9 files and %d bytes", last, rep.Bytes)
	}
	for i := 1; i < len(events); i++ {
		if events[i].FilesHashed < events[i-1].FilesHashed || events[i].Entries < events[i-1].Entries {
			t.Fatalf("progress went backwards: %+v then %+v", events[i-1], events[i])
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWalkOptions(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		".gitignore":        "*.log\n",
		"a.log":             "x",
		".git/HEAD":         "ref",
		".git/info/exclude": "secret-ish\n",
		"secret-ish":        "y",
		"keep":              "z",
	})
	files := func(opts WalkOptions) []string {
		m, _, err := Walk(context.Background(), dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range m.Entries {
			out = append(out, e.Path)
		}
		return out
	}
	tests := []struct {
		name string
		opts WalkOptions
		want []string
	}{
		{"default", WalkOptions{}, []string{".gitignore", "keep"}},
		{"no gitignore", WalkOptions{NoGitignore: true}, []string{".gitignore", "a.log", "keep", "secret-ish"}},
		{"include git", WalkOptions{IncludeGit: true}, []string{".git", ".git/HEAD", ".git/info", ".git/info/exclude", ".gitignore", "keep"}},
		{"config beats negation", WalkOptions{Excludes: []string{"keep", "!keep", "keep"}}, []string{".gitignore"}},
		{"sequential", WalkOptions{Workers: 1}, []string{".gitignore", "keep"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, files(tt.opts)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWalkWorkersAgree(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	for i := range 200 {
		files[filepath.Join("d", string(rune('a'+i%26)), string(rune('a'+i/26))+".txt")] = string(make([]byte, i*100))
	}
	writeTree(t, dir, files)
	var ms []*Manifest
	for _, w := range []int{1, 3, 16} {
		m, _, err := Walk(context.Background(), dir, WalkOptions{Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	for _, m := range ms[1:] {
		if diff := cmp.Diff(ms[0], m); diff != "" {
			t.Errorf("manifests differ with workers (-1 +n):\n%s", diff)
		}
	}
}

func TestWalkCanceled(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "1", "b/c": "2"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Walk(ctx, dir, WalkOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Walk with a canceled context = %v, want context.Canceled", err)
	}
}

func TestWalkUnreadableDir(t *testing.T) {
	if os.Geteuid() == 0 {
		testenv.Skip(t, testenv.NonRoot, "root reads every directory")
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"locked/x": "1", "ok": "2"})
	must(t, os.Chmod(filepath.Join(dir, "locked"), 0))
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "locked"), 0o755) })
	_, rep, err := Walk(context.Background(), dir, WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(ReasonUnreadable) != 1 {
		t.Errorf("exclusions = %+v, want locked reported unreadable", rep.Excluded)
	}
}

func TestWalkRecordsNamesItCannotCarry(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"ok": "1", "bad\nname": "2", "back\\slash": "3", "\xff": "4"})
	m, rep, err := Walk(context.Background(), dir, WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Entries) != 1 || rep.Count(ReasonInvalidName) != 3 {
		t.Errorf("entries %v, exclusions %+v: want only ok kept and 3 invalid names", m.Entries, rep.Excluded)
	}
	if !slices.IsSortedFunc(rep.Excluded, func(a, b Exclusion) int { return cmpString(a.Path, b.Path) }) {
		t.Error("exclusions not sorted")
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// The attack: a project on a case-insensitive file system (macOS's
// default) holds its secrets under names in other cases. Every one is
// still a secret, so Walk leaves it out and it is never pushed into the
// VM; names that only look alike stay in.
func TestWalkSecretsIgnoreCase(t *testing.T) {
	dir := t.TempDir()
	secrets := []string{
		".ENV",
		".Env.Local",
		".ENVRC",
		"deploy.PEM",
		"certs/Server.Key",
		"keys/ID_RSA",
		"keys/Id_Ed25519_work",
		"Credentials.json",
		"gcp/SERVICE-ACCOUNT.JSON",
		"ci/.NETRC",
		"infra/Prod.TFSTATE",
		".Kube/Config",
		".Docker/CONFIG.json",
		"web/.NPMRC",
	}
	secretDirs := []string{".Aws", "home/.SSH", ".Config/GCloud"}
	tree := map[string]string{
		"environment.md":     "not a secret",
		".ENV.Example":       "KEY=",
		"keys/ID_RSA.PUB":    "public",
		"docs/pem-format.md": "about PEM",
		"web/.NPMRC":         "//registry/:_authToken=abc\n",
		"ok/.npmrc":          "registry=https://example.invalid\n",
		".Aws/credentials":   "aws",
		"home/.SSH/id_rsa":   "key",
		".Config/GCloud/adc": "gcloud",
	}
	for _, s := range secrets {
		if _, ok := tree[s]; !ok {
			tree[s] = "secret"
		}
	}
	writeTree(t, dir, tree)

	m, rep, err := Walk(context.Background(), dir, WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	excluded := map[string]Reason{}
	for _, e := range rep.Excluded {
		excluded[e.Path] = e.Reason
	}
	for _, s := range append(secrets, secretDirs...) {
		if excluded[s] != ReasonSecret {
			t.Errorf("%s: excluded as %q, want %q (the deny-list must ignore case)", s, excluded[s], ReasonSecret)
		}
		if _, ok := m.Lookup(s); ok {
			t.Errorf("%s is in the manifest, so it would be pushed into the VM", s)
		}
	}
	for _, keep := range []string{"environment.md", ".ENV.Example", "keys/ID_RSA.PUB", "docs/pem-format.md", "ok/.npmrc"} {
		if _, ok := m.Lookup(keep); !ok {
			t.Errorf("%s is not in the manifest (excluded as %q); it only looks like a secret", keep, excluded[keep])
		}
	}
}

// An empty file is recorded as empty without being opened: one nobody
// may read walks all the same (as root, every file can be read).
func TestWalkEmptyFilesUnopened(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o000); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "full"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cache := range []*HashCache{nil, {}} {
		m, _, err := Walk(context.Background(), dir, WalkOptions{Cache: cache})
		if err != nil {
			t.Fatal(err)
		}
		e, ok := m.Lookup("empty")
		if sum := sha256.Sum256(nil); !ok || e.SHA256 != hex.EncodeToString(sum[:]) || e.Size != 0 {
			t.Errorf("empty file: %+v", e)
		}
		if e, _ := m.Lookup("full"); e.Size != 1 {
			t.Errorf("file of one byte: %+v", e)
		}
	}
}
