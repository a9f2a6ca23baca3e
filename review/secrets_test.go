package review

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// TestCredentialsOnGoTree runs the credential scan over the Go tree's own
// sources, every line taken as added: ordinary code, which must not be
// flagged. What is found there are test keys (PEM blocks of examples,
// Basic authorization headers of the auth tests, crypto test vectors
// assigned to PrivateKey and shared_secret); the test fails when more
// than 1 file in 1000 is flagged, which is how the high-entropy rule was
// tuned (a high-entropy word anywhere flags some 21,700 lines there,
// one assigned to a name that says secret 41).
func TestCredentialsOnGoTree(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the Go tree")
	}
	flagged := map[string][]string{}
	files := goTreeLines(t, func(rel, line string) {
		for _, what := range credentialsIn(line) {
			flagged[rel] = append(flagged[rel], what)
		}
	})
	names := make([]string, 0, len(flagged))
	lines := 0
	for p, found := range flagged {
		names = append(names, p)
		lines += len(found)
	}
	sort.Strings(names)
	for _, p := range names {
		t.Logf("%s: %d× %s", p, len(flagged[p]), flagged[p][0])
	}
	t.Logf("%d of %d files flagged (%d lines)", len(flagged), files, lines)
	if files < 1000 {
		t.Skipf("only %d files in the Go tree", files)
	}
	if len(flagged)*1000 > files {
		t.Errorf("%d of %d files flagged: more than 1 in 1000", len(flagged), files)
	}
}

// goTreeLines calls fn with every line (clipped as scanned lines are) of
// the Go tree's text files, each file's path relative to its src, and
// returns how many files it read; it skips the test where there is no Go
// tree.
func goTreeLines(t *testing.T, fn func(rel, line string)) int {
	t.Helper()
	root := filepath.Join(runtime.GOROOT(), "src")
	if _, err := os.Stat(root); err != nil {
		t.Skipf("no Go tree: %v", err)
	}
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil || bytes.IndexByte(data, 0) >= 0 {
			return nil
		}
		files++
		rel, _ := filepath.Rel(root, p)
		for l := range strings.SplitSeq(string(data[:min(len(data), 1<<20)]), "\n") {
			fn(rel, clip(l))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
