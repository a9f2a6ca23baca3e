package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/review/semantic"
)

// meaningSandbox is a run whose agent gave a Python function a parameter
// and a constant, added a test, renamed a Go function and touched the
// README.
func meaningSandbox(t *testing.T) (home, id string) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	home, project := t.TempDir(), t.TempDir()
	before := map[string]file{
		"wordcount.py": {"def count_words(text):\n    return len(text.split())\n", 0o644},
		"util.go":      {"package main\n\nfunc parse(s string) (int, error) {\n\tn, err := strconv.Atoi(s)\n\treturn n * 2, err\n}\n", 0o644},
		"README.md":    {"# wc\n", 0o644},
	}
	after := map[string]file{
		"wordcount.py": {"STOP_WORDS = {\"a\", \"the\"}\n\n\ndef count_words(text, stop_words=STOP_WORDS):\n" +
			"    return len([w for w in text.split() if w not in stop_words])\n", 0o644},
		"tests/test_stopwords.py": {"def test_stop():\n    assert count_words(\"a cat\") == 1\n", 0o644},
		"util.go":                 {"package main\n\nfunc parseDouble(s string) (int, error) {\n\tn, err := strconv.Atoi(s)\n\treturn n * 2, err\n}\n", 0o644},
		"README.md":               {"# wc\n\nStop words are left out.\n", 0o644},
	}
	return home, storedSandbox(t, home, project, before, after)
}

// diff --summary says the overview, then each file's declarations, or its
// line counts when no parser reads it; --json carries the same.
func TestDiffSummary(t *testing.T) {
	home, id := meaningSandbox(t)
	code, out, errOut := airlockCLI(t, home, "diff", id, "--summary")
	want := `# airlock: no verify ran in the sandbox: nothing checked these changes (airlock run --verify "CMD", or verify = "CMD" in the project's airlock.toml)
# what changed: renamed parse to parseDouble; added STOP_WORDS; count_words: new parameter stop_words, body changed; tests: added test_stopwords.py; also: README.md

README.md  (modified, +2 −0)
  2 lines added (no parser for this kind of file)

tests/test_stopwords.py  (added, +2 −0)
  added function test_stop

util.go  (modified, +1 −1)
  renamed function parse to parseDouble

wordcount.py  (modified, +5 −2)
  added constant STOP_WORDS
  function count_words: new parameter stop_words, body changed
`
	if code != 0 || out != want {
		t.Errorf("diff --summary: exit %d\n%s%s\nwant\n%s", code, out, errOut, want)
	}

	code, out, _ = airlockCLI(t, home, "--json", "diff", id)
	var got struct {
		Overview string `json:"overview"`
		Files    []struct {
			Path     string            `json:"path"`
			Semantic *semantic.Summary `json:"semantic"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("diff --json: exit %d, %v\n%s", code, err, out)
	}
	if !strings.HasPrefix(got.Overview, "renamed parse to parseDouble; ") {
		t.Errorf("overview: %q", got.Overview)
	}
	for _, f := range got.Files {
		switch f.Path {
		case "README.md":
			if f.Semantic != nil {
				t.Errorf("README.md has a summary: %+v", f.Semantic)
			}
		case "util.go":
			if f.Semantic == nil || len(f.Semantic.Changes) != 1 || f.Semantic.Changes[0].Op != semantic.Renamed ||
				f.Semantic.Changes[0].OldName != "parse" || f.Semantic.Language != "Go" {
				t.Errorf("util.go summary: %+v", f.Semantic)
			}
		}
	}

	if code, _, errOut := airlockCLI(t, home, "diff", id, "--summary", "--stat"); code == 0 || !strings.Contains(errOut, "do not go together") {
		t.Errorf("--summary with --stat: exit %d, %s", code, errOut)
	}
}
