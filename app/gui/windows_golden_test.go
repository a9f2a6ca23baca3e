package gui

import (
	"fmt"
	"image/color"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// goldenSizes are the two common laptop screens every window is drawn
// at.
var goldenSizes = []fyne.Size{{Width: 1280, Height: 800}, {Width: 1440, Height: 900}}

// goldenNow is the clock of every golden rendering: elapsed times and
// the like are the same on every run.
var goldenNow = time.Date(2026, 11, 23, 9, 5, 0, 0, time.UTC)

// longCommand is a 1000-character shell line, as a user may run.
var longCommand = []string{"sh", "-c", strings.Repeat("make test-everything && ", 42)}

// goldenWindows are every window of the app, each opened by a function
// that builds it with its real constructor over the fake service, sized
// to size, in the state its golden images show.
var goldenWindows = []struct {
	name string
	open func(t *testing.T, a fyne.App, size fyne.Size) fyne.Window
}{
	// The main window of a first start: the drop zone and Try the demo.
	{"main_empty", func(t *testing.T, a fyne.App, size fyne.Size) fyne.Window {
		return goldenMain(t, a, &fakeService{}, size).Window
	}},
	// Sandboxes of every kind: a run in progress, an agent with a
	// prompt and a secret left out, a script, a 1000-character command
	// line, a stopped run and one whose VM is gone.
	{"main_list", func(t *testing.T, a fyne.App, size fyne.Size) fyne.Window {
		return goldenMain(t, a, &fakeService{infos: goldenInfos()}, size).Window
	}},
	// The run dialog over the main window, a prompt typed.
	{"run_dialog", func(t *testing.T, a fyne.App, size fyne.Size) fyne.Window {
		w := goldenMain(t, a, &fakeService{built: []string{"minimal", "full"}}, size)
		w.Drop([]string{t.TempDir()})
		d := w.RunDialog()
		d.Project.SetText("/home/dev/src/wordfreq") // not the temporary folder dropped
		d.Prompt.SetText("Plan stop words for the counter, and count words in a case-insensitive way; keep the public API as it is.")
		return w.Window
	}},
	// A run of a 1000-character command, pushing, with a long progress
	// message, the secrets left out and the agent's first output.
	{"run_view", func(t *testing.T, a fyne.App, size fyne.Size) fyne.Window {
		v := NewRunView(a, RunRequest{Project: "/home/dev/src/wordfreq", Command: longCommand})
		v.started = goldenNow
		t.Cleanup(v.Window.Close)
		v.Window.Resize(size)
		v.progress(pipeline.Progress{Step: pipeline.StepExcluded, Message: "snapshot: 3 paths left out",
			Excluded: []manifest.Exclusion{{Path: ".env", Reason: manifest.ReasonSecret}, {Path: "build", Dir: true, Reason: manifest.ReasonGitignore}, {Path: ".ssh", Dir: true, Reason: manifest.ReasonSecret}}})
		fmt.Fprint(v.term, "booting the VM (2 CPUs, 2048 MiB)\r\n\x1b[32mok\x1b[0m  network: model API only\r\n")
		v.progress(pipeline.Progress{Step: pipeline.StepPush, Message: "pushing " + strings.Repeat("src/very/deeply/nested/package/", 12) + "counter_test.go", Done: 312, Total: 1840})
		v.Tick(goldenNow.Add(83 * time.Second))
		return v.Window
	}},
	// The review of a 200-file changeset: a file with three hunks
	// shown, one approved, one rejected and one undecided, a comment on
	// a line, some files decided, the baseline behind the project.
	{"review", func(t *testing.T, a fyne.App, size fyne.Size) fyne.Window {
		r := goldenReview(t, a, size)
		r.status.SetText("Could not save the review: open /home/dev/.airlock/sandboxes/1a2b3c4d/review.json: permission denied; your decisions are kept in this window until it closes")
		return r.Window
	}},
	// The same review with three held actions, the agent's comment on a
	// GitHub issue shown: its sentence, what would be sent, its verdict.
	{"review_action", func(t *testing.T, a fyne.App, size fyne.Size) fyne.Window {
		r := goldenReview(t, a, size, goldenActions()...)
		r.selectAction(1)
		r.files.list.ScrollToBottom() // every action in view
		return r.Window
	}},
	// Its Comments tab: comments to send, sent and resolved.
	{"review_comments", func(t *testing.T, a fyne.App, size fyne.Size) fyne.Window {
		r := goldenReview(t, a, size)
		r.tabs.SelectIndex(3)
		return r.Window
	}},
	// The Send back dialog with a long message typed.
	{"send_back", func(t *testing.T, a fyne.App, size fyne.Size) fyne.Window {
		r := goldenReview(t, a, size)
		r.rounds.askSendBack()
		typeKeys(r.Window.Canvas(), strings.Repeat("Keep the old name for Count: callers outside this package use it. ", 4))
		return r.Window
	}},
	// The review with files that deserve a second look (a dependency
	// added, a test skipped, a CI workflow, a credential): the overview
	// under the verify line, the list showing only the flagged files,
	// the dependency manifest shown.
	{"review_flags", func(t *testing.T, a fyne.App, size fyne.Size) fyne.Window {
		r := goldenReviewOf(t, a, size, flaggedChangeset(t))
		r.files.flagged.SetChecked(true)
		r.ShowFile("package.json")
		return r.Window
	}},
	// The review keys (?).
	{"keys", func(t *testing.T, a fyne.App, size fyne.Size) fyne.Window {
		r := goldenReview(t, a, size)
		typeKeys(r.Window.Canvas(), "?")
		return r.Window
	}},
	// An all-or-nothing apply held back by two conflicts, the first one
	// answered with Both.
	{"conflicts", func(t *testing.T, a fyne.App, size fyne.Size) fyne.Window {
		c := textConflict("line 1\nmine\nline 3\n")
		bin := &review.ConflictError{Path: "assets/" + strings.Repeat("very-long-folder-name/", 8) + "logo.png",
			Reason: "you changed it in the project since the run, and it cannot be merged line by line",
			Ours:   []byte("\x89PNG\x00mine"), Theirs: []byte("\x89PNG\x00agent"), Project: projectState("\x89PNG\x00mine"), Approved: projectState("\x89PNG\x00agent")}
		res := heldResult(c)
		res.Conflicts = append(res.Conflicts, bin)
		svc := reviewService(t)
		w := NewConflictWindow(a, svc, "1a2b3c4d", review.ApproveAll(svc.changesets["1a2b3c4d"]), res)
		w.async = syncNow
		t.Cleanup(w.Window.Close)
		w.Window.Resize(size)
		w.Choose("src/main.go", review.KeepBoth)
		return w.Window
	}},
	// The attempts of a fan-out, one failed.
	{"compare", func(t *testing.T, a fyne.App, size fyne.Size) fyne.Window {
		svc := &fakeService{}
		for k, id := range []string{"aaaa0001", "aaaa0002", "aaaa0003"} {
			in := testInfo(id)
			in.Group, in.Attempt, in.Agent = "9c1e04aa", k+1, "claude"
			svc.infos = append(svc.infos, in)
		}
		failed, exit := &svc.infos[2], 1
		failed.Status, failed.ExitCode, failed.Changes, failed.Error = sandbox.StatusFailed, &exit, nil, "agent exited with status 1"
		c, err := NewCompareWindow(a, svc, "Compare attempts of 9c1e04aa", []string{"9c1e04aa"}, func(string) {})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Window.Close)
		c.Window.Resize(size)
		return c.Window
	}},
	// The transcript of a stopped run, opened from its row.
	{"transcript", func(t *testing.T, a fyne.App, size fyne.Size) fyne.Window {
		svc := &fakeService{infos: goldenInfos(), transcript: goldenTranscript()}
		w := goldenMain(t, a, svc, size)
		win := w.OpenTranscript("5709abcd")
		if win == nil {
			t.Fatalf("no transcript window: %s", w.Message())
		}
		t.Cleanup(win.Close)
		win.Resize(size)
		return win
	}},
}

// TestWindowGoldens draws every window of the app at 1280×800 and
// 1440×900, in Airlock's dark and light theme, as
// testdata/<window>_<size>_<theme>.png (go test -update rewrites them).
// No window's minimum size may be larger than the screen: what does not
// fit would be off it.
//
// Under -race it is skipped: painting and comparing 52 screens is pixel
// work the detector made 11x slower (362 s against 32 s), while the
// windows' behaviour is tested under -race by the rest of app/gui.
// scripts/test runs it beside the race run, without the detector.
func TestWindowGoldens(t *testing.T) {
	if raceDetector {
		t.Skip("pixel work: scripts/test runs it without -race")
	}
	for _, win := range goldenWindows {
		for _, size := range goldenSizes {
			for _, v := range []struct {
				name    string
				variant fyne.ThemeVariant
			}{{"dark", theme.VariantDark}, {"light", theme.VariantLight}} {
				name := fmt.Sprintf("%s_%.0fx%.0f_%s", win.name, size.Width, size.Height, v.name)
				t.Run(name, func(t *testing.T) {
					a := test.NewTempApp(t)
					a.Settings().SetTheme(variantTheme{Theme(), v.variant})
					// fyne keeps a widget's renderer for a minute from
					// the clock it read at the last capture; after a
					// minute of tests without one the window's renderers
					// would be thrown away, not laid out, as it is drawn.
					test.NewCanvas().Capture()
					w := win.open(t, a, size)
					c := w.Canvas()
					settle(c)
					if got := c.Size(); got != size {
						t.Fatalf("the window is %v, want %v", got, size)
					}
					pad := fyne.NewSquareSize(2 * theme.Padding())
					if min := w.Content().MinSize().Add(pad); min.Width > size.Width || min.Height > size.Height {
						t.Errorf("the window needs %.0f×%.0f px on a %v screen", min.Width, min.Height, size)
					}
					for _, o := range c.Overlays().List() {
						if min := o.MinSize(); min.Width > size.Width || min.Height > size.Height {
							t.Errorf("its %T needs %.0f×%.0f px on a %v screen", o, min.Width, min.Height, size)
						}
					}
					// Nothing of this machine's shows: the same rendering
					// everywhere.
					if tmp := os.TempDir(); strings.Contains(test.RenderToMarkup(c), tmp) {
						t.Errorf("the window shows a path under %s", tmp)
					}
					assertGoldenImage(t, name+".png", c)
				})
			}
		}
	}
}

// settle lays out every shown container and widget of c again, those
// inside first, as the desktop driver's first frame does (it lays out
// the parent of each object whose minimum size it has not seen yet): a
// widget shown after its container was laid out gets its place, as on
// the screen.
func settle(c fyne.Canvas) {
	var walk func(o fyne.CanvasObject)
	walk = func(o fyne.CanvasObject) {
		if !o.Visible() {
			return
		}
		switch x := o.(type) {
		case *fyne.Container:
			for _, child := range x.Objects {
				walk(child)
			}
			if x.Layout != nil {
				x.Layout.Layout(x.Objects, x.Size())
			}
		case fyne.Widget:
			r := test.WidgetRenderer(x)
			for _, child := range r.Objects() {
				walk(child)
			}
			r.Layout(x.Size())
		}
	}
	walk(c.Content())
	for _, o := range c.Overlays().List() {
		walk(o)
	}
}

// variantTheme is Airlock's theme in one variant, whatever the settings
// say (as the desktop app's follows the user's choice).
type variantTheme struct {
	fyne.Theme
	v fyne.ThemeVariant
}

func (t variantTheme) Color(n fyne.ThemeColorName, _ fyne.ThemeVariant) color.Color {
	return t.Theme.Color(n, t.v)
}

// goldenMain is a main window of svc at size, on the fixed clock, with
// the run dialog's presets and an empty Airlock home.
func goldenMain(t *testing.T, a fyne.App, svc *fakeService, size fyne.Size) *MainWindow {
	t.Helper()
	w := NewMainWindow(a, svc, testPresets(t))
	w.async = syncNow
	w.now = func() time.Time { return goldenNow }
	w.UseHome(t.TempDir())
	t.Cleanup(w.Window.Close)
	w.Window.Resize(size)
	// A run this window started shows its progress on its row.
	w.runs["0c0ffee0"] = &runState{progress: pipeline.Progress{Step: pipeline.StepPush, Message: "pushing src/wordfreq/counter.py", Done: 312, Total: 1840}}
	w.Reload()
	w.table.Refresh()
	return w
}

// goldenInfos are the main list's sandboxes, and one whose VM is gone.
func goldenInfos() []sandbox.Info {
	dead := testInfo("deadbeef")
	dead.Status, dead.Changes, dead.Live = sandbox.StatusBooting, nil, false
	return append(listInfos(), dead)
}

// goldenTranscript is a run's output with colours, a progress line that
// redraws itself and a line longer than the window.
func goldenTranscript() string {
	return "demo-agent: reading TODO.md\r\n\x1b[32mok\x1b[0m\r\n" +
		"counting 10%\rcounting 55%\rcounting 100%\r\n" +
		"thinking about stop words: " + strings.Repeat("the, a, an, of, to, in, ", 12) + "\r\n" +
		"\x1b[1mwriting stopwords.txt\x1b[0m\r\n"
}

// goldenReview is the review window of a 200-file changeset made by a
// 1000-character command line, at size: src/counter.go shown with its
// first hunk approved, its second rejected and commented on, a few
// files decided, comments in every state, the baseline behind the
// project.
// actions, if any, are the sandbox's held actions.
func goldenReview(t *testing.T, a fyne.App, size fyne.Size, actions ...sandbox.ActionView) *ReviewWindow {
	t.Helper()
	return goldenReviewOf(t, a, size, goldenChangeset(t), actions...)
}

// goldenReviewOf is goldenReview of the changeset cs.
func goldenReviewOf(t *testing.T, a fyne.App, size fyne.Size, cs *review.Changeset, actions ...sandbox.ActionView) *ReviewWindow {
	t.Helper()
	const id = "1a2b3c4d"
	info := testInfo(id)
	info.ScriptName, info.Command, info.Round = "", longCommand, 2
	info.Changes = &sandbox.ChangeStats{Files: len(cs.Files), Added: 1, Modified: len(cs.Files) - 2, Deleted: 1}
	var d review.Decisions
	for _, p := range []string{"pkg/mod00/file00.go", "pkg/mod00/file01.go", "docs/NEW.md"} {
		d.SetFile(p, review.Approve)
	}
	d.SetFile("pkg/mod00/file02.go", review.Reject)
	d.SetHunk("src/counter.go", 0, review.Approve)
	d.SetHunk("src/counter.go", 1, review.Reject)
	d.AddComment("src/counter.go", review.Comment{Text: "Keep the old name: callers outside this package use Count.", Start: 24, End: 25})
	d.AddComment("src/counter.go", review.Comment{Text: "Sort the words the same way everywhere.", Start: 40, End: 40, Sent: 1})
	d.AddComment("docs/NEW.md", review.Comment{Text: "fine now", Resolved: true})
	d.AddComment("old.txt", review.Comment{Text: "keep this file\nit is read by the release script", Start: 1, End: 1, Old: true})
	for _, v := range actions {
		if v.Verdict != review.Undecided {
			if d.Actions == nil {
				d.Actions = map[int]review.Verdict{}
			}
			d.Actions[v.ID] = v.Verdict
		}
	}
	svc := &fakeService{
		infos:      []sandbox.Info{info},
		changesets: map[string]*review.Changeset{id: cs},
		saved:      map[string]review.Decisions{id: d},
		stale: sandbox.Staleness{Baseline: info.Created, Checked: goldenNow.Add(42 * time.Minute),
			Modified: 1, Paths: []string{"pkg/mod01/file03.go"}},
		summary:    "## What I did\n\nCounted words case-insensitively and added stop words to `Count`.\n",
		actions:    map[string][]sandbox.ActionView{id: actions},
		transcript: goldenTranscript(),
		roundLogs: map[string][]sandbox.RoundLog{id: {
			{Kept: true, Transcript: []byte(goldenTranscript())},
			{Kept: true, Transcript: []byte("round 2\r\n"), Prompt: "Keep the old name."},
		}},
	}
	// The window colours code it shows within a time budget; the lexer,
	// compiled once, is ready before it, so the colours come however
	// loaded the machine is.
	styleSide("src/counter.go", []byte(counterSource(true)), time.Minute)
	r, err := NewReviewWindow(a, svc, info)
	if err != nil {
		t.Fatal(err)
	}
	r.async = syncNow
	t.Cleanup(r.Window.Close)
	r.Window.Resize(size)
	r.ShowFile("src/counter.go")
	return r
}

// goldenActions are three held actions: the agent's comment on issue
// #12 (undecided), a Slack message approved and a label sent.
func goldenActions() []sandbox.ActionView {
	comment := githubComment(1, "Fixed in the counter: words are now counted case-insensitively and stop words (the, a, an, of) are skipped. "+
		"I kept `Count` as it was for callers outside the package and added `CountWords` beside it.\n\nTests: `go test ./...` passes.")
	slack := sandbox.ActionView{Action: sandbox.Action{ID: 2, Round: 1, Held: egress.Held{
		Scheme: "https", Host: "slack.com", Port: 443, Method: "POST", Path: "/api/chat.postMessage",
		Header: http.Header{"Content-Type": {"application/json; charset=utf-8"}},
		Body:   []byte(`{"channel":"#dev","text":"wordfreq: case-insensitive counting is ready for review"}`),
		Secret: &egress.HeldSecret{Name: "SLACK_TOKEN", Header: "Authorization", Parts: []string{"Bearer ", ""}},
		Rule:   "slack.com",
	}}, Verdict: review.Approve}
	label := sandbox.ActionView{Action: sandbox.Action{ID: 3, Round: 2, Held: egress.Held{
		Scheme: "https", Host: "api.github.com", Port: 443, Method: "POST", Path: "/repos/org/repo/issues/12/labels",
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(`{"labels":["fixed"]}`),
		Rule:   "api.github.com",
	}}, Verdict: review.Approve, Send: &sandbox.SendRecord{State: sandbox.Sent, Status: 200, Body: []byte(`[{"name":"fixed"}]`)}}
	return []sandbox.ActionView{comment, slack, label}
}

// goldenChangeset is 200 files: 197 modified one-line files in ten
// folders, src/counter.go with three hunks, an added file and a deleted
// one.
func goldenChangeset(t testing.TB) *review.Changeset {
	t.Helper()
	return goldenChangesetIn(t, testObjects{})
}

// goldenChangesetIn is goldenChangeset and more, their contents in objs.
func goldenChangesetIn(t testing.TB, objs testObjects, more ...manifest.Change) *review.Changeset {
	t.Helper()
	entry := objs.entry
	var changes []manifest.Change
	for d := range 10 {
		for i := range 20 {
			if len(changes) == 197 {
				break
			}
			p := fmt.Sprintf("pkg/mod%02d/file%02d.go", d, i)
			changes = append(changes, manifest.Change{Kind: manifest.Modified, Path: p,
				Old: entry(p, "package x\n\nvar a = 1\n"), New: entry(p, fmt.Sprintf("package x\n\nvar a = %d\n", i+2))})
		}
	}
	oldCounter, newCounter := counterSource(false), counterSource(true)
	changes = append(changes,
		manifest.Change{Kind: manifest.Modified, Path: "src/counter.go", Old: entry("src/counter.go", oldCounter), New: entry("src/counter.go", newCounter)},
		manifest.Change{Kind: manifest.Added, Path: "docs/NEW.md", New: entry("docs/NEW.md", "# New\n\nText.\n")},
		manifest.Change{Kind: manifest.Deleted, Path: "old.txt", Old: entry("old.txt", "gone\n")})
	changes = append(changes, more...)
	cs := objs.changeset(t, changes)
	if len(cs.Files) != 200+len(more) {
		t.Fatalf("the changeset has %d files, want %d", len(cs.Files), 200+len(more))
	}
	return cs
}

// flaggedChangeset is goldenChangeset with files the review flags: a
// dependency added to package.json, a Go test skipped, a CI workflow
// changed and a private key added.
func flaggedChangeset(t testing.TB) *review.Changeset {
	t.Helper()
	objs := testObjects{}
	entry := objs.entry
	cs := goldenChangesetIn(t, objs,
		manifest.Change{Kind: manifest.Modified, Path: "package.json",
			Old: entry("package.json", "{\n  \"name\": \"wordfreq\",\n  \"dependencies\": {\n    \"lodash\": \"^4.17.21\"\n  }\n}\n"),
			New: entry("package.json", "{\n  \"name\": \"wordfreq\",\n  \"dependencies\": {\n    \"left-pad\": \"^1.3.0\",\n    \"lodash\": \"^4.17.21\"\n  }\n}\n")},
		manifest.Change{Kind: manifest.Modified, Path: "src/counter_test.go",
			Old: entry("src/counter_test.go", "package wordfreq\n\nimport \"testing\"\n\nfunc TestCount(t *testing.T) {\n\tif Count(\"a a\")[\"a\"] != 2 {\n\t\tt.Fatal(\"count\")\n\t}\n}\n"),
			New: entry("src/counter_test.go", "package wordfreq\n\nimport \"testing\"\n\nfunc TestCount(t *testing.T) {\n\tt.Skip(\"flaky\")\n\tif Count(\"a a\")[\"a\"] != 2 {\n\t\tt.Fatal(\"count\")\n\t}\n}\n")},
		manifest.Change{Kind: manifest.Added, Path: ".github/workflows/ci.yml",
			New: entry(".github/workflows/ci.yml", "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - run: go test ./...\n")},
		manifest.Change{Kind: manifest.Added, Path: "deploy/key.pem",
			New: entry("deploy/key.pem", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----\n")},
	)
	if look := cs.SecondLook(); look.Files < 4 {
		t.Fatalf("the flagged changeset has %d flagged files (%+v), want 4", look.Files, look.Kinds)
	}
	return cs
}

// counterSource is a Go file of about 50 lines, before or after an
// agent changed it in three places far apart.
func counterSource(changed bool) string {
	pick := func(before, after string) string {
		if changed {
			return after
		}
		return before
	}
	var b strings.Builder
	b.WriteString("// Package wordfreq counts words.\npackage wordfreq\n\nimport (\n" +
		pick("\t\"sort\"\n", "\t\"slices\"\n\t\"sort\"\n") + "\t\"strings\"\n)\n\n")
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(&b, "// helper%d is a step of the count.\nfunc helper%d(s string) string {\n\treturn strings.TrimSpace(s)\n}\n\n", i, i)
	}
	b.WriteString("// Count returns how often each word appears in text.\n" +
		pick("func Count(text string) map[string]int {\n", "func CountWords(text string, stop []string) map[string]int {\n") +
		"\tcounts := map[string]int{}\n\tfor _, w := range strings.Fields(text) {\n" +
		pick("\t\tcounts[w]++\n", "\t\tw = strings.ToLower(w)\n\t\tif slices.Contains(stop, w) {\n\t\t\tcontinue\n\t\t}\n\t\tcounts[w]++\n") +
		"\t}\n\treturn counts\n}\n\n")
	for i := 4; i <= 5; i++ {
		fmt.Fprintf(&b, "// helper%d is a step of the count.\nfunc helper%d(s string) string {\n\treturn strings.TrimSpace(s)\n}\n\n", i, i)
	}
	b.WriteString("// Top returns the n most frequent words.\nfunc Top(counts map[string]int, n int) []string {\n\tvar words []string\n" +
		"\tfor w := range counts {\n\t\twords = append(words, w)\n\t}\n" +
		pick("\tsort.Strings(words)\n", "\tsort.Slice(words, func(i, j int) bool { return counts[words[i]] > counts[words[j]] })\n") +
		"\treturn words[:min(n, len(words))]\n}\n")
	return b.String()
}
