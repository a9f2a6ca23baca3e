package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

func TestFromDesktop(t *testing.T) {
	display := func(k string) string {
		if k == "DISPLAY" {
			return ":0"
		}
		return ""
	}
	none := func(string) string { return "" }
	for _, tc := range []struct {
		name          string
		args          []string
		stdin, stdout bool
		goos          string
		env           func(string) string
		want          bool
		rest          []string
	}{
		{"Finder on macOS", []string{"-psn_0_12345"}, false, false, "darwin", none, true, []string{}},
		{"no TTY on macOS", nil, false, false, "darwin", none, true, []string{}},
		{"file manager on Linux", nil, false, false, "linux", display, true, []string{}},
		{"Wayland", nil, false, false, "linux", func(k string) string { return map[string]string{"WAYLAND_DISPLAY": "wayland-0"}[k] }, true, []string{}},
		{"a shell", nil, true, true, "linux", display, false, []string{}},
		{"a pipe into a terminal", nil, false, true, "linux", display, false, []string{}},
		{"no display", nil, false, false, "linux", none, false, []string{}},
		{"a command", []string{"ls"}, false, false, "linux", display, false, []string{"ls"}},
		{"a command from Finder", []string{"-psn_0_1", "ls"}, false, false, "darwin", none, false, []string{"ls"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rest, got := fromDesktop(tc.args, tc.stdin, tc.stdout, tc.goos, tc.env)
			if got != tc.want {
				t.Errorf("fromDesktop = %v, want %v", got, tc.want)
			}
			if diff := cmp.Diff(tc.rest, rest); diff != "" {
				t.Errorf("arguments left (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGUICommand(t *testing.T) {
	home := t.TempDir()
	t.Run("without a GUI", func(t *testing.T) {
		code, _, stderr := run(t, home, "", "gui")
		if code != ExitError || !strings.Contains(stderr, "has no desktop app") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})
	t.Run("with one", func(t *testing.T) {
		var got GUISetup
		var out, errOut bytes.Buffer
		code := Main([]string{"--home", home, "gui"}, strings.NewReader(""), &out, &errOut, WithGUI(func(_ context.Context, s GUISetup) error {
			got = s
			return nil
		}))
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		if got.Store == nil || got.Planner == nil || got.Planner.Backend == nil || got.Planner.Arch == "" {
			t.Errorf("the GUI got %+v", got)
		}
	})
}

// TestGUIRunWithATTY runs a command the way the desktop app does: planned
// by the GUISetup's planner, under a pseudo-terminal of the terminal
// widget's size, with what is typed as input.
func TestGUIRunWithATTY(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	setup := guiSetup(t, home)
	pn, err := setup.Planner.Run(t.Context(), plan.Request{
		Project: t.TempDir(), Limits: config.Limits{CPUs: 1, Memory: 512 * config.MiB},
		Command: []string{"sh", "-c", "stty size; read x; echo got:$x > typed.txt; echo got:$x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pn.Close()
	var term bytes.Buffer
	o := &pn.Runs[0]
	o.Stdin, o.Stdout, o.Stderr = strings.NewReader("hello\r"), &term, &term
	o.TTY = &client.TTY{Term: "xterm-256color", Rows: 20, Cols: 70}
	done, err := pipeline.Execute(context.Background(), setup.Store, pn.Job)
	res := done.Result()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, term.String())
	}
	if res.ExitCode != 0 {
		t.Errorf("exit %d", res.ExitCode)
	}
	for _, want := range []string{"20 70", "got:hello"} {
		if !strings.Contains(term.String(), want) {
			t.Errorf("terminal output %q does not have %q", term.String(), want)
		}
	}
	if res.Meta.Changes == nil || res.Meta.Changes.Added != 1 {
		t.Errorf("changes %+v, want typed.txt added", res.Meta.Changes)
	}
}

// TestGUIAgentDemo runs the demo agent preset the way the desktop app
// does: the GUISetup's planner readies the preset (its fake model on the
// host's loopback) and builds the network with it, and the run boots a
// real VM; the agent reaches its model through the proxy and its edits
// and summary come back.
func TestGUIAgentDemo(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	setup := guiSetup(t, home)
	if setup.Planner == nil || len(setup.Agents) < 4 {
		t.Fatalf("the GUI got no agents: %d presets", len(setup.Agents))
	}
	project := t.TempDir()
	copyTree(t, filepath.Join(testenv.RepoRoot(t), "examples", "demo-project"), project)
	small := config.Limits{CPUs: 1, Memory: 512 * config.MiB}
	if _, err := setup.Planner.Run(t.Context(), plan.Request{Project: project, Agents: []string{"nope"}, Prompt: "x"}); err == nil || !strings.Contains(err.Error(), "claude, codex, demo, gemini") {
		t.Errorf("an unknown agent: %v", err)
	}
	pn, err := setup.Planner.Run(t.Context(), plan.Request{Project: project, Agents: []string{"demo"}, Prompt: "Add stop words", Limits: small})
	if err != nil {
		t.Fatal(err)
	}
	defer pn.Close()
	var term bytes.Buffer
	o := &pn.Runs[0]
	o.Stdout, o.Stderr = &term, &term
	done, err := pipeline.Execute(context.Background(), setup.Store, pn.Job)
	res := done.Result()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, term.String())
	}
	if res.ExitCode != 0 || res.Summary == "" {
		t.Errorf("exit %d, summary %q\n%s", res.ExitCode, res.Summary, term.String())
	}
	cs, err := res.Sandbox.Changeset(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if f := cs.File("NOTES.md"); f == nil || !strings.Contains(string(f.NewContent()), "Task: Add stop words") {
		t.Errorf("changes %+v", cs.Files)
	}
}

// guiSetup is what airlock gui hands the desktop app for home.
func guiSetup(t *testing.T, home string) GUISetup {
	t.Helper()
	var setup GUISetup
	var out, errOut bytes.Buffer
	if code := Main([]string{"--home", home, "gui"}, strings.NewReader(""), &out, &errOut, WithGUI(func(_ context.Context, s GUISetup) error {
		setup = s
		return nil
	})); code != 0 {
		t.Fatalf("airlock gui: exit %d: %s", code, errOut.String())
	}
	return setup
}
