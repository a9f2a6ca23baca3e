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
	root := filepath.Join(runtime.GOROOT(), "src")
	if _, err := os.Stat(root); err != nil {
		t.Skipf("no Go tree: %v", err)
	}
	files, flagged := 0, map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil || bytes.IndexByte(data, 0) >= 0 {
			return nil
		}
		files++
		for l := range strings.SplitSeq(string(data[:min(len(data), 1<<20)]), "\n") {
			for _, what := range credentialsIn(clip(l)) {
				rel, _ := filepath.Rel(root, p)
				flagged[rel] = append(flagged[rel], what)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
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
		t.Skipf("only %d files in %s", files, root)
	}
	if len(flagged)*1000 > files {
		t.Errorf("%d of %d files flagged: more than 1 in 1000", len(flagged), files)
	}
}
