package gui

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// testPresets are the run dialog's presets with the built-in agents and
// a demo script beside a demo project, as in a source tree.
func testPresets(t *testing.T) []Preset {
	t.Helper()
	examples := t.TempDir()
	script := filepath.Join(examples, "demo-agent.sh")
	if err := os.WriteFile(script, []byte("echo demo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	proj := filepath.Join(examples, "demo-project")
	if err := os.MkdirAll(filepath.Join(proj, "wordfreq"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"README.md": "# wordfreq\n", ".env": "TOKEN=fake\n", "wordfreq/counter.py": "def count(): pass\n"} {
		if err := os.WriteFile(filepath.Join(proj, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Presets(script, builtinAgents(t), nil)
}

// newMainAt is a main window of svc at 1280×800 with its home in a
// temporary folder.
func newMainAt(t *testing.T, svc *fakeService, presets []Preset) *MainWindow {
	t.Helper()
	w := NewMainWindow(fyne.CurrentApp(), svc, presets)
	w.async = syncNow
	w.now = func() time.Time { return time.Date(2026, 11, 23, 9, 5, 0, 0, time.UTC) }
	w.openURL = func(*url.URL) error { return nil }
	w.UseHome(t.TempDir())
	w.Window.Resize(fyne.NewSize(1280, 800))
	w.table.Refresh()
	t.Cleanup(w.Window.Close)
	return w
}

// listInfos are sandboxes of every kind: an agent with a prompt, a
// script, a 1000-character command, a stopped run with a secret left
// out, and one pushing.
func listInfos() []sandbox.Info {
	claude := testInfo("c1a0de00")
	claude.ScriptName, claude.Agent = "", "claude"
	claude.Command = []string{"claude", "-p", "--output-format", "stream-json", "Your task:\nfix the failing test"}
	claude.Prompt = "Fix the failing test in counter.py\nand add one for empty input"
	claude.Secrets = []string{".env"}
	script := testInfo("1a2b3c4d")
	script.Prompt = "Plan stop words for the counter"
	long := testInfo("10e60000")
	long.ScriptName, long.Command = "", []string{"sh", "-c", strings.Repeat("echo a-long-shell-line; ", 42)}
	stopped := testInfo("5709abcd")
	stopped.Status, stopped.Stopped, stopped.Changes, stopped.Error = sandbox.StatusFailed, true, nil, "interrupted: run: context canceled"
	stopped.Agent, stopped.ScriptName, stopped.Prompt = "demo", "", "Plan stop words"
	live := testInfo("0c0ffee0")
	live.Status, live.Changes, live.Live, live.Command, live.ScriptName = sandbox.StatusPushing, nil, true, []string{"make", "test"}, ""
	return []sandbox.Info{live, claude, script, long, stopped}
}

// Bug 6: the list names the agent (its preset's description) and the
// user's prompt, a script by its name, a command by its line.
func TestMainListShowsAgentAndPrompt(t *testing.T) {
	test.NewTempApp(t)
	w := newMainAt(t, &fakeService{infos: listInfos()}, testPresets(t))
	// Cut to their columns' width: the labels hold the whole text.
	for _, c := range []struct {
		row, col int
		want     string
	}{{1, 3, "Fix the failing test in counter.py"}, {2, 3, "Plan stop words for the counter"}, {1, colState, "ready for review  ·  1 secret left out"}} {
		if got := cellAt(t, w, c.row, c.col).label.Text; got != c.want {
			t.Errorf("row %d shows %q, want %q", c.row, got, c.want)
		}
	}
	markup := test.RenderToMarkup(w.Window.Canvas())
	for _, want := range []string{"Claude Code", "demo-agent.sh", "make test", "Demo agent", "stopped"} {
		if !strings.Contains(markup, want) {
			t.Errorf("the list does not show %q", want)
		}
	}
	for _, never := range []string{"claude -p", "--output-format", "and add one", "context canceled", "failed"} {
		if strings.Contains(markup, never) {
			t.Errorf("the list shows %q", never)
		}
	}
}

// Bug 1 and deliverable 5: a 1000-character command line does not set
// the main window's minimum width, and the flexible columns take the
// window's width.
func TestMainWindowColumnsUseTheWidth(t *testing.T) {
	test.NewTempApp(t).Settings().SetTheme(Theme()) // its padding and scroll bar
	w := newMainAt(t, &fakeService{infos: listInfos()}, testPresets(t))
	if got := w.Window.Content().MinSize().Width; got >= 1280 {
		t.Errorf("the main window needs %.0f px, want less than 1280", got)
	}
	narrow := w.ColumnWidth(3)
	w.Window.Resize(fyne.NewSize(1800, 800))
	wide := w.ColumnWidth(3)
	if wide <= narrow+200 {
		t.Errorf("the Task column is %.0f px at 1280 and %.0f at 1800: it does not take the width", narrow, wide)
	}
	// Nor more: the table does not scroll sideways, and no column is
	// under the vertical scroll bar. The table leaves a padding between
	// two columns.
	for _, width := range []float32{1280, 1800} {
		w.Window.Resize(fyne.NewSize(width, 800))
		need := float32(len(columns)-1)*theme.Padding() + theme.ScrollBarSize()
		for i := range columns {
			need += w.ColumnWidth(i)
		}
		if table := w.table.Size().Width; need > table {
			t.Errorf("in a %.0f-pixel window the columns and the scroll bar need %.0f px of the table's %.0f: it scrolls sideways", width, need, table)
		}
	}
	// The rows, with the gaps between columns, fit: the table does not
	// scroll sideways.
	for _, width := range []float32{1280, 1440, 1800} {
		w.Window.Resize(fyne.NewSize(width, 800))
		for _, o := range test.LaidOutObjects(w.table) {
			if s, ok := o.(*container.Scroll); ok && s.Content.MinSize().Width > s.Size().Width {
				t.Errorf("at %.0f px the rows are %.0f px wide in a %.0f-pixel table", width, s.Content.MinSize().Width, s.Size().Width)
			}
		}
	}
}

// cellAt is the widgets of a table cell, rendered.
func cellAt(t *testing.T, w *MainWindow, row, col int) *cell {
	t.Helper()
	o := w.newCell()
	w.updateCell(widget.TableCellID{Row: row, Col: col}, o)
	return cellOf(o)
}

// Bug 9: a stopped run says so, and its transcript opens from its row.
func TestStoppedRunTranscript(t *testing.T) {
	test.NewTempApp(t)
	svc := &fakeService{infos: listInfos(), transcript: "booting\r\nthinking about stop words\r\n"}
	w := newMainAt(t, svc, testPresets(t))
	row := 4 // stopped
	if got := cellAt(t, w, row, colState).label.Text; got != "stopped" {
		t.Errorf("state %q, want stopped", got)
	}
	c := cellAt(t, w, row, colActions)
	if c.transcript.Disabled() {
		t.Fatal("the transcript of a stopped run cannot be opened")
	}
	test.Tap(c.transcript)
	var win fyne.Window
	for _, x := range fyne.CurrentApp().Driver().AllWindows() {
		if strings.HasPrefix(x.Title(), "Transcript of 5709abcd") {
			win = x
		}
	}
	if win == nil {
		t.Fatal("no transcript window")
	}
	if m := test.RenderToMarkup(win.Canvas()); !strings.Contains(m, "thinking about stop words") || !strings.Contains(m, "stopped") {
		t.Errorf("the transcript window does not show the transcript and the state:\n%s", m)
	}
	// A live run's transcript is its run view.
	if !cellAt(t, w, 0, colActions).transcript.Disabled() {
		t.Error("a live run offers its transcript from the row")
	}
}

// Deliverable 5: discard asks first; open folder opens the project.
func TestRowActions(t *testing.T) {
	test.NewTempApp(t)
	svc := &fakeService{infos: listInfos()}
	w := newMainAt(t, svc, testPresets(t))
	var opened []string
	w.openURL = func(u *url.URL) error { opened = append(opened, u.String()); return nil }
	var asked string
	answer := false
	w.confirm = func(title, msg string, yes func()) {
		asked = title + " " + msg
		if answer {
			yes()
		}
	}
	test.Tap(cellAt(t, w, 1, colActions).folder)
	if want := []string{"file:///home/dev/src/wordfreq"}; !cmp.Equal(opened, want) {
		t.Errorf("opened %q, want %q", opened, want)
	}
	test.Tap(cellAt(t, w, 1, colActions).del)
	if !strings.Contains(asked, "Discard sandbox c1a0de00?") || len(svc.discarded) != 0 {
		t.Fatalf("discard asked %q and discarded %q before the answer", asked, svc.discarded)
	}
	answer = true
	test.Tap(cellAt(t, w, 1, colActions).del)
	if !cmp.Equal(svc.discarded, []string{"c1a0de00"}) {
		t.Errorf("discarded %q", svc.discarded)
	}
	if _, ok := w.info("c1a0de00"); ok {
		t.Error("the discarded sandbox is still listed")
	}
	if !cellAt(t, w, 0, colActions).del.Disabled() {
		t.Error("a live run can be discarded from its row")
	}
}

// Bug 11: the dialog's limits say what settings give, images not built
// say so and stop the dialog from closing with what to do, and the last
// choices come back.
func TestRunDialogSetupAndMemory(t *testing.T) {
	test.NewTempApp(t)
	lim := config.DefaultLimits()
	svc := &fakeService{setup: &RunSetup{Limits: lim, Images: []string{"minimal"}}, built: []string{"minimal"}}
	presets := testPresets(t)
	w := newMainAt(t, svc, presets)
	project := t.TempDir()
	w.Folder.SetText(project)
	w.RunFolder()
	d := w.RunDialog()
	if d == nil {
		t.Fatal("no run dialog for the folder typed")
	}
	for sel, want := range map[*widget.Select]string{d.CPUs: "as in settings (2 CPUs)", d.Memory: "as in settings (2048 MiB)", d.Limit: "as in settings (1h)"} {
		if sel.Selected != want {
			t.Errorf("limit shows %q, want %q", sel.Selected, want)
		}
	}
	if !strings.Contains(strings.Join(d.Image.Options, "|"), "full (agent CLIs, node, git, build tools) — not built") {
		t.Errorf("images offered %q: full is not said to be unbuilt", d.Image.Options)
	}
	// Claude on the full image, which is not built: the dialog stays.
	d.Preset.SetSelectedIndex(1)
	d.Prompt.SetText("fix it")
	d.Memory.SetSelected("4096 MiB")
	d.Limit.SetSelected("15m")
	d.Start()
	if len(svc.runs) != 0 || !strings.Contains(d.Error.Text, "airlock image build full") {
		t.Fatalf("started %d runs; error %q, want how to build full", len(svc.runs), d.Error.Text)
	}
	d.selectImage(MinimalImage)
	d.Start()
	if len(svc.runs) != 1 {
		t.Fatal("the run did not start on a built image")
	}
	if r := svc.runs[0]; r.Image != MinimalImage || r.MemoryMiB != 4096 || r.Timeout != 15*time.Minute || r.CPUs != 0 || r.Agent != "claude" {
		t.Errorf("request %+v", r)
	}
	prefs, err := loadPrefs(w.prefsPath())
	if err != nil {
		t.Fatal(err)
	}
	want := Prefs{Agent: presets[1].Name, Image: MinimalImage, MemoryMiB: 4096, Timeout: "15m", Recent: []string{project}}
	if diff := cmp.Diff(want, prefs); diff != "" {
		t.Errorf("remembered (-want +got):\n%s", diff)
	}
	// A new window over the same home offers them again.
	w2 := NewMainWindow(fyne.CurrentApp(), svc, presets)
	t.Cleanup(w2.Window.Close)
	w2.UseHome(w.home)
	if !cmp.Equal(w2.prefs.Recent, []string{project}) {
		t.Errorf("recent projects %q", w2.prefs.Recent)
	}
	w2.Drop([]string{project})
	d2 := w2.RunDialog()
	if d2.Preset.SelectedIndex() != 1 || d2.ImageName() != MinimalImage || d2.Memory.Selected != "4096 MiB" || d2.Limit.Selected != "15m" || d2.CPUs.SelectedIndex() != 0 {
		t.Errorf("dialog opened with %q %q %q %q %q", d2.Preset.Selected, d2.ImageName(), d2.CPUs.Selected, d2.Memory.Selected, d2.Limit.Selected)
	}
}

// A project with its own environment runs on it unless the user picks
// an image.
func TestRunDialogProjectEnvironment(t *testing.T) {
	test.NewTempApp(t)
	svc := &fakeService{setup: &RunSetup{Limits: config.DefaultLimits(), Environment: true}}
	w := newMainAt(t, svc, testPresets(t))
	w.Drop([]string{t.TempDir()})
	d := w.RunDialog()
	if d.Image.Selected != environmentChoice || d.ImageName() != "" {
		t.Errorf("image %q (%q), want the project's environment", d.Image.Selected, d.ImageName())
	}
}

// Deliverable 5: Try the demo copies the demo project into the home and
// runs the demo agent there.
func TestTryTheDemo(t *testing.T) {
	test.NewTempApp(t)
	svc := &fakeService{}
	svc.run = func(ctx context.Context, req RunRequest) (*pipeline.RunResult, error) {
		return nil, errors.New("no VM in this test")
	}
	w := newMainAt(t, svc, testPresets(t))
	if w.TryDemo.Disabled() {
		t.Fatal("Try the demo is disabled")
	}
	if !strings.Contains(test.RenderToMarkup(w.Window.Canvas()), "Drop a project folder here") {
		t.Error("the empty window shows no drop zone")
	}
	test.Tap(w.TryDemo)
	if len(svc.runs) != 1 {
		t.Fatalf("the demo started %d runs (message %q)", len(svc.runs), w.Message())
	}
	r := svc.runs[0]
	if r.Agent != demoAgent || r.Prompt != demoPrompt || r.Image != MinimalImage {
		t.Errorf("demo request %+v", r)
	}
	if !strings.HasPrefix(r.Project, filepath.Join(w.home, "demo")+string(filepath.Separator)) {
		t.Errorf("the demo runs on %s, not a copy in the home", r.Project)
	}
	if b, err := os.ReadFile(filepath.Join(r.Project, "wordfreq", "counter.py")); err != nil || string(b) != "def count(): pass\n" {
		t.Errorf("the demo project was not copied: %q %v", b, err)
	}
}

// Bug 1 (run view): a 1000-character command line and a long progress
// message do not set the run window's minimum width; Bug 10: the
// secrets left out are named.
func TestRunViewLongContent(t *testing.T) {
	test.NewTempApp(t)
	v := NewRunView(fyne.CurrentApp(), RunRequest{Project: "/home/dev/src/" + strings.Repeat("p", 200), Command: []string{"sh", "-c", strings.Repeat("echo a-long-shell-line; ", 42)}})
	t.Cleanup(v.Window.Close)
	v.progress(pipeline.Progress{Step: pipeline.StepExcluded, Message: "snapshot: " + strings.Repeat("a long progress message ", 30),
		Excluded: []manifest.Exclusion{{Path: ".env", Reason: manifest.ReasonSecret}, {Path: "build", Dir: true, Reason: manifest.ReasonGitignore}, {Path: ".ssh", Dir: true, Reason: manifest.ReasonSecret}}})
	v.progress(pipeline.Progress{Step: pipeline.StepPush, Message: strings.Repeat("pushing a/very/long/path/", 40), Done: 3, Total: 9})
	if w := v.Window.Content().MinSize().Width; w >= 1280 {
		t.Errorf("the run view needs %.0f px, want less than 1280", w)
	}
	if got := v.state.Text; !strings.HasPrefix(got, "3/9  pushing a/very/long/path/") {
		t.Errorf("state %q, want the count first", got)
	}
	if got := v.secrets.Text; got != "Not copied into the sandbox, look like secrets: .env, .ssh/" {
		t.Errorf("secrets note %q", got)
	}
	if !strings.Contains(v.term.Text(), "look like secrets: .env, .ssh/") {
		t.Error("the terminal does not name the secrets")
	}
}

// Bug 9: Stop in the run view says stopped, not failed.
func TestRunViewStopped(t *testing.T) {
	test.NewTempApp(t)
	v := NewRunView(fyne.CurrentApp(), RunRequest{Project: "/p/app", Agent: "demo"})
	t.Cleanup(v.Window.Close)
	v.finished(nil, fmt.Errorf("sandbox 5709abcd: run: %w", context.Canceled))
	if got := v.state.Text; !strings.HasPrefix(got, "stopped") || strings.Contains(got, "failed") {
		t.Errorf("state %q", got)
	}
}

func TestExcludedNote(t *testing.T) {
	for _, tt := range []struct {
		secrets []string
		want    string
	}{
		{nil, ""},
		{[]string{".env"}, "Not copied into the sandbox, looks like a secret: .env"},
		{[]string{"a", "b", "c", "d", "e\x1b[31m"}, "Not copied into the sandbox, look like secrets: a, b, c, d and 1 more (airlock logs --audit lists them)"},
		{[]string{"x\x1b[2Jy"}, `Not copied into the sandbox, looks like a secret: x\x1b[2Jy`},
	} {
		if got := excludedNote(sandbox.Info{Meta: sandbox.Meta{Secrets: tt.secrets}}); got != tt.want {
			t.Errorf("excludedNote(%q) = %q, want %q", tt.secrets, got, tt.want)
		}
	}
}
