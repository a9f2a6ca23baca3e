package promote

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

func textConflict() *review.ConflictError {
	base, ours, theirs := []byte("one\ntwo\n"), []byte("one\nmine\n"), []byte("one\ntheirs\n")
	return &review.ConflictError{Path: "src/$(touch pwned);x.go", Base: base, Ours: ours, Theirs: theirs,
		Merge:    review.Merge3(base, ours, theirs),
		Project:  review.EntryState{Exists: true, Type: manifest.File, Mode: 0o644},
		Approved: review.EntryState{Exists: true, Type: manifest.File, Mode: 0o644}}
}

// fakeTool writes a shell script standing in for a merge tool: it records
// its arguments and the files it was given, and writes result to the
// last argument ($OUTPUT).
func fakeTool(t *testing.T, script string) (tool, log string) {
	t.Helper()
	dir := t.TempDir()
	tool, log = filepath.Join(dir, "tool"), filepath.Join(dir, "log")
	body := "#!/bin/sh\nlog=" + log + "\nfor a in \"$@\"; do echo \"arg $a\" >>\"$log\"; done\n" + script
	if err := os.WriteFile(tool, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return tool, log
}

func TestRunMergeTool(t *testing.T) {
	tool, log := fakeTool(t, `cat "$1" "$2" "$3" >>"$log"; printf 'one\nmerged by tool\n' >"$4"`)
	c := textConflict()
	got, err := RunMergeTool(context.Background(), []string{tool, "$MINE", "$THEIRS", "$BASE", "$OUTPUT"}, c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "one\nmerged by tool\n" {
		t.Errorf("result %q", got)
	}
	data, _ := os.ReadFile(log)
	args := string(data)
	for _, want := range []string{"MINE.go", "THEIRS.go", "BASE.go", "OUTPUT.go", "one\nmine\none\ntheirs\none\ntwo\n"} {
		if !strings.Contains(args, want) {
			t.Errorf("the tool did not get %q:\n%s", want, args)
		}
	}
	// The guest's path never reaches the tool, and the files are gone.
	if strings.Contains(args, "pwned") || strings.Contains(args, "src/") {
		t.Errorf("the guest's path reached the tool:\n%s", args)
	}
	for _, l := range strings.Split(args, "\n") {
		if p, ok := strings.CutPrefix(l, "arg "); ok {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s left behind: %v", p, err)
			}
		}
	}
}

func TestRunMergeToolRefuses(t *testing.T) {
	c := textConflict()
	for name, script := range map[string]string{
		"failed":    "echo cannot open display >&2; exit 3",
		"unchanged": "exit 0",
	} {
		tool, _ := fakeTool(t, script)
		_, err := RunMergeTool(context.Background(), []string{tool, "$MINE", "$THEIRS", "$BASE", "$OUTPUT"}, c)
		if err == nil || !strings.Contains(err.Error(), "nothing was taken") {
			t.Errorf("%s: %v", name, err)
		}
		if name == "failed" && !strings.Contains(err.Error(), "cannot open display") {
			t.Errorf("%s: the tool's message is not said: %v", name, err)
		}
	}
	link := textConflict()
	link.Project = review.EntryState{Exists: true, Type: manifest.Symlink, Target: "/etc/passwd"}
	if _, err := RunMergeTool(context.Background(), []string{"true", "$OUTPUT"}, link); err == nil || !strings.Contains(err.Error(), "choose mine or theirs") {
		t.Errorf("a link: %v", err)
	}
	if _, err := MergeTool(context.Background(), newSandbox(t), c); !errors.Is(err, ErrNoMergeTool) {
		t.Errorf("no tool: %v", err)
	}
}
