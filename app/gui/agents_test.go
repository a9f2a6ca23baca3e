package gui

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/agent"
	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
)

func builtinAgents(t *testing.T) map[string]agent.Preset {
	t.Helper()
	presets, err := agent.Load("")
	if err != nil {
		t.Fatal(err)
	}
	return presets
}

// TestPresetsOfferTheAgents: the run dialog offers the demo agent first
// (no API key), then every agent preset, the demo script and a command.
func TestPresetsOfferTheAgents(t *testing.T) {
	ps := Presets("", builtinAgents(t), nil)
	var names, agents []string
	for _, p := range ps {
		names = append(names, p.Name)
		agents = append(agents, p.Agent)
	}
	if diff := cmp.Diff([]string{"demo", "claude", "codex", "gemini", "", ""}, agents); diff != "" {
		t.Errorf("agents (-want +got):\n%s", diff)
	}
	if names[0] != "Demo agent (no API key)" || names[1] != "Claude Code (Anthropic)" || names[len(names)-1] != "Command…" {
		t.Errorf("names %q", names)
	}
	if ps[4].Script != "" || ps[4].Unavailable == "" {
		t.Errorf("demo script without a script: %+v", ps[4])
	}
}

// TestRunDialogAgentPreset: choosing an agent shows its command, picks
// the image its CLI is on, and asks the service for that agent on the
// prompt as typed.
func TestRunDialogAgentPreset(t *testing.T) {
	a := test.NewTempApp(t)
	w := a.NewWindow("t")
	t.Cleanup(w.Close)
	var got RunRequest
	d := NewRunDialog(w, "/home/dev/src/app", Presets("", builtinAgents(t), nil), RunDialogOptions{}, func(r RunRequest) { got = r })
	if d.ImageName() != MinimalImage {
		t.Errorf("demo agent's image %q", d.ImageName())
	}
	d.Preset.SetSelectedIndex(1) // claude
	if d.Command.Text != "claude -p --output-format json --dangerously-skip-permissions {prompt}" || !d.Command.Disabled() {
		t.Errorf("command shown %q (disabled %v)", d.Command.Text, d.Command.Disabled())
	}
	if d.ImageName() != FullImage {
		t.Errorf("claude's image %q, want %s", d.ImageName(), FullImage)
	}
	test.Type(d.Prompt, "fix the failing test")
	d.Start()
	if got.Agent != "claude" || got.Prompt != "fix the failing test" || got.Image != FullImage || got.Command != nil || got.Script != nil {
		t.Errorf("request %+v", got)
	}
}

// TestStoreServiceRunsAgentPresets: a run of an agent preset records the
// preset's command on the prompt and the agent's name, and its network is
// asked for with the preset (its hosts and key); the preset is released
// when the run ends, even a failed one. Without a prompt the agent's
// interactive command runs.
func TestStoreServiceRunsAgentPresets(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-test")
	h := t.TempDir()
	store, err := sandbox.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	presets := builtinAgents(t)
	var netFor []string
	svc := &StoreService{
		Store:   store,
		Planner: testPlanner(t, h, images.AgentsImage),
		OnPlan: func(p *plan.Plan) error {
			for i := range p.Runs {
				o := &p.Runs[i]
				netFor = append(netFor, o.Agent+":"+o.Network.Policy.Allow[0].Host)
				o.Boot = func(context.Context, pipeline.Attach) (pipeline.Machine, error) {
					return nil, errors.New("no machines in this test")
				}
			}
			return nil
		},
	}
	project := t.TempDir()
	for _, prompt := range []string{"fix it", ""} {
		if _, err := svc.Run(context.Background(), RunRequest{Project: project, Agent: "claude", Prompt: prompt}); err == nil {
			t.Fatal("a run with no machine succeeded")
		}
	}
	infos, err := svc.List()
	if err != nil || len(infos) != 2 {
		t.Fatalf("List = %d sandboxes, %v", len(infos), err)
	}
	slices.Reverse(infos) // oldest first
	want := [][]string{presets["claude"].Command("fix it", false), presets["claude"].Interactive}
	for i, in := range infos {
		if in.Agent != "claude" {
			t.Errorf("sandbox %d: agent %q", i, in.Agent)
		}
		if diff := cmp.Diff(want[i], in.Command); diff != "" {
			t.Errorf("sandbox %d command (-want +got):\n%s", i, diff)
		}
	}
	if diff := cmp.Diff([]string{"claude:api.anthropic.com", "claude:api.anthropic.com"}, netFor); diff != "" {
		t.Errorf("networks asked for (-want +got):\n%s", diff)
	}
	if _, err := svc.Run(context.Background(), RunRequest{Project: project, Agent: "nope", Prompt: "x"}); err == nil {
		t.Error("an unknown agent ran")
	}
}

// testPlanner plans runs in home with no user configuration, made-up
// images of the names given (their user agent is 1000:1000), and a
// backend that is never started.
func testPlanner(t *testing.T, home string, images ...string) *plan.Planner {
	for _, name := range images {
		testenv.FakeImage(t, home, name, vm.AMD64, map[string]string{"agent": "1000:1000"})
	}
	return &plan.Planner{
		Home: home, Arch: "amd64", Getenv: os.Getenv,
		Backend: func(time.Duration) (vm.Backend, error) { return nil, nil }, // never started: the tests replace each run's Boot
	}
}

// TestStoreServiceChecksTheImage: an image that is not built stops the
// run before a sandbox is made, with the reason.
func TestStoreServiceChecksTheImage(t *testing.T) {
	store, err := sandbox.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	svc := &StoreService{Store: store, Planner: testPlanner(t, t.TempDir())}
	if _, err := svc.Run(context.Background(), RunRequest{Project: t.TempDir(), Command: []string{"true"}, Image: FullImage}); err == nil || !strings.Contains(err.Error(), "airlock image build --arch amd64 full") {
		t.Errorf("run on an image that is not built: %v", err)
	}
	if infos, _ := svc.List(); len(infos) != 0 {
		t.Errorf("a sandbox was made: %+v", infos)
	}
}

// TestRunDialogSignIn: the dialog shows per agent whether it can sign in
// here, and refuses to start one that cannot, saying what to set; a key
// set while the dialog is open counts at Start.
func TestRunDialogSignIn(t *testing.T) {
	a := test.NewTempApp(t)
	w := a.NewWindow("t")
	t.Cleanup(w.Close)
	found := map[string]bool{}
	signIn := func(name string) (plan.Credentials, error) {
		if name != "claude" {
			return plan.Credentials{Agent: name, Ready: true}, nil
		}
		c := plan.Credentials{Agent: name, Ways: []plan.Credential{
			{Env: "ANTHROPIC_API_KEY", How: "an API key", Host: "api.anthropic.com"},
			{Env: "CLAUDE_CODE_OAUTH_TOKEN", How: "a subscription's token", Host: "api.anthropic.com"},
		}}
		if found["CLAUDE_CODE_OAUTH_TOKEN"] {
			c.Ready, c.Ways[1].Store = true, "keychain"
		}
		return c, nil
	}
	var got RunRequest
	d := NewRunDialog(w, "/home/dev/src/app", Presets("", builtinAgents(t), signIn), RunDialogOptions{}, func(r RunRequest) { got = r })
	if d.Preset.Options[1] != "Claude Code (Anthropic) (not signed in)" || d.Preset.Options[2] != "Codex CLI (OpenAI)" {
		t.Errorf("options %q", d.Preset.Options)
	}
	d.Preset.SetSelectedIndex(1)
	if d.SignIn.Text != "Not signed in. Set ANTHROPIC_API_KEY (an API key) or CLAUDE_CODE_OAUTH_TOKEN (a subscription's token) "+egress.Stores()+"." || d.SignIn.Importance != widget.DangerImportance {
		t.Errorf("sign-in %q", d.SignIn.Text)
	}
	test.Type(d.Prompt, "fix it")
	d.Start()
	if got.Agent != "" {
		t.Fatalf("started an agent that cannot sign in: %+v", got)
	}
	if d.Error.Text != "claude cannot sign in on this computer: set one of its credentials (see Sign-in), then Start again" {
		t.Errorf("error %q", d.Error.Text)
	}
	found["CLAUDE_CODE_OAUTH_TOKEN"] = true
	d.Start()
	if got.Agent != "claude" {
		t.Errorf("a token set since the dialog opened did not count: %+v (%s)", got, d.Error.Text)
	}
	if d.SignIn.Text != "Ready: signs in with CLAUDE_CODE_OAUTH_TOKEN (keychain)" {
		t.Errorf("sign-in %q", d.SignIn.Text)
	}
}

// TestRunDialogCommandAfterPreset: choosing Command… after an agent
// leaves an empty, editable command line, not the agent's template.
func TestRunDialogCommandAfterPreset(t *testing.T) {
	a := test.NewTempApp(t)
	w := a.NewWindow("t")
	t.Cleanup(w.Close)
	var got RunRequest
	ps := Presets("", builtinAgents(t), nil)
	d := NewRunDialog(w, "/home/dev/src/app", ps, RunDialogOptions{}, func(r RunRequest) { got = r })
	d.Preset.SetSelectedIndex(1) // claude
	d.Preset.SetSelectedIndex(len(ps) - 1)
	if d.Command.Text != "" || d.Command.Disabled() {
		t.Errorf("Command… shows %q (disabled %v), want an empty field to type in", d.Command.Text, d.Command.Disabled())
	}
	d.Start()
	if got.Command != nil || got.Agent != "" || !strings.Contains(d.Error.Text, "type the command") {
		t.Errorf("started %+v (%q) with no command typed", got, d.Error.Text)
	}
}

// TestRunViewTitle: the run window names the agent and the user's prompt,
// or the command line as typed, never a Go slice.
func TestRunViewTitle(t *testing.T) {
	test.NewTempApp(t)
	for _, tt := range []struct {
		req  RunRequest
		want string
	}{
		{RunRequest{Project: "/p/app", Agent: "claude", Prompt: "fix the failing test\nand more"}, "Run: app  ·  claude: fix the failing test"},
		{RunRequest{Project: "/p/app", Agent: "codex"}, "Run: app  ·  codex (interactive)"},
		{RunRequest{Project: "/p/app", Agent: "claude", AgentName: "Claude Code", Prompt: "fix it"}, "Run: app  ·  Claude Code: fix it"},
		// A typed shell line shows as typed; a script as its name.
		{RunRequest{Project: "/p/app", Command: []string{"sh", "-c", "make test"}}, "Run: app  ·  make test"},
		{RunRequest{Project: "/p/app", Command: []string{"make", "test"}}, "Run: app  ·  make test"},
		{RunRequest{Project: "/p/app", ScriptName: "demo-agent.sh", Prompt: "plan it"}, "Run: app  ·  demo-agent.sh: plan it"},
		{RunRequest{Project: "/p/app", Command: []string{"sh", "-c", strings.Repeat("x", 1000)}}, "Run: app  ·  " + strings.Repeat("x", maxTitle-1) + "…"},
	} {
		v := NewRunView(fyne.CurrentApp(), tt.req)
		if got := v.Window.Title(); got != tt.want {
			t.Errorf("title %q, want %q", got, tt.want)
		}
		v.Window.Close()
	}
}

// TestStoreServicePlansAreComplete: the run dialog's run and Send back
// reach the executor as plans with nothing left to decide: the sync
// mode, the image and the verify step (the project's for a run, the
// sandbox's own for its next round) are in the plan.
func TestStoreServicePlansAreComplete(t *testing.T) {
	h := t.TempDir()
	store, err := sandbox.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	var got []pipeline.RunSpec
	svc := &StoreService{Store: store, Planner: testPlanner(t, h, MinimalImage), OnPlan: func(p *plan.Plan) error {
		for i := range p.Runs {
			got = append(got, p.Runs[i].RunSpec)
			p.Runs[i].Boot = func(context.Context, pipeline.Attach) (pipeline.Machine, error) {
				return nil, errors.New("no machines in this test")
			}
		}
		return nil
	}}
	project := t.TempDir()
	if err := os.WriteFile(project+"/airlock.toml", []byte("verify = \"make check\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Run(context.Background(), RunRequest{Project: project, Command: []string{"make"}}); err == nil {
		t.Fatal("a run with no machine succeeded")
	}
	sb, err := store.Create(sandbox.Meta{Project: project, Image: MinimalImage, Arch: "amd64", Command: []string{"make", "fix"}, SyncMode: sandbox.SyncCopy})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Update(func(m *sandbox.Meta) {
		m.Status, m.Verify = sandbox.StatusReady, &sandbox.VerifyResult{Command: "make old-check"}
	}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{sandbox.BaselineFile, sandbox.GuestFile} { // no changes
		if err := os.WriteFile(sb.Path(name), []byte(`{"entries":[]}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.Reply(context.Background(), ReplyRequest{ID: sb.ID, Message: "again"}); err == nil {
		t.Fatal("a round with no machine succeeded")
	}
	if len(got) != 2 {
		t.Fatalf("%d plans reached the executor, want 2", len(got))
	}
	run, round := got[0], got[1]
	if run.Project != project || run.Sync != sandbox.SyncDisk || run.Image != MinimalImage || run.Verify != "make check" || run.BaseDisks == "" {
		t.Errorf("the dialog's run: %+v", run)
	}
	if round.Project != project || round.Sync != sandbox.SyncCopy || !slices.Equal(round.Command, []string{"make", "fix"}) || round.Verify != "make old-check" {
		t.Errorf("Send back's round: %+v", round)
	}
}
