package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/internal/lockio"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
)

func TestAgentsCmd(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	for _, k := range []string{"ANTHROPIC_API_KEY", "CODEX_API_KEY", "GEMINI_API_KEY"} {
		t.Setenv(k, "")
	}
	t.Setenv("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-test")
	home := t.TempDir()
	code, out, errOut := run(t, home, "", "agents", "--json")
	if code != 0 {
		t.Fatalf("agents --json: %d %s", code, errOut)
	}
	var list []struct {
		Name    string   `json:"name"`
		Command []string `json:"command"`
		Hosts   []string `json:"hosts"`
		Source  string   `json:"source"`
		CLI     struct {
			Package, Version string
		} `json:"cli"`
		Credentials struct {
			Ready bool `json:"ready"`
			Ways  []struct {
				Env     string `json:"env"`
				FoundIn string `json:"found_in"`
			} `json:"ways"`
		} `json:"credentials"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(list) != 4 || list[0].Name != "claude" || list[1].Name != "codex" || list[2].Name != "demo" || list[3].Name != "gemini" || list[0].Hosts[0] != "api.anthropic.com" {
		t.Errorf("agents: %+v", list)
	}
	if c := list[0].Credentials; !c.Ready || len(c.Ways) != 2 || c.Ways[0].FoundIn != "" || c.Ways[1].FoundIn != "environment" || list[0].CLI.Version == "" {
		t.Errorf("claude signs in with the subscription's token from the environment: %+v", list[0])
	}
	if list[1].Credentials.Ready || !list[2].Credentials.Ready {
		t.Errorf("codex has no key, demo needs none: %+v %+v", list[1].Credentials, list[2].Credentials)
	}
	code, out, _ = run(t, home, "", "agents")
	for _, want := range []string{"NAME", "SIGN-IN", "not signed in: set CODEX_API_KEY", "ready: signs in with CLAUDE_CODE_OAUTH_TOKEN (environment)", "@openai/codex 0.169.0"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("agents lacks %q: %d %s", want, code, out)
		}
	}

	// A bad agents.toml is reported with its path.
	if err := os.MkdirAll(filepath.Join(cfg, "airlock"), 0o700); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(cfg, "airlock", "agents.toml")
	if err := os.WriteFile(bad, []byte("[claude]\nhost = [\"x\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = run(t, home, "", "agents")
	if code == 0 || !strings.Contains(errOut, bad) || !strings.Contains(errOut, "claude.host") {
		t.Errorf("bad agents.toml: %d %s", code, errOut)
	}
}

func TestRunAgentFlags(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	home := t.TempDir()
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"run", "--agent", "claude", "--prompt", "x", "--", "echo"}, []string{"not both"}},
		{[]string{"run", "--agent", "claude", "--prompt", "x", "--"}, []string{"not both"}},
		{[]string{"run", "--agent", "nope", "--prompt", "x"}, []string{`no agent "nope"`, "claude, codex, demo, gemini"}},
		{[]string{"run", "--agent", "claude,nope", "--prompt", "x"}, []string{`no agent "nope"`}},
		{[]string{"run", "--agent", "claude", "--agent", "claude", "--prompt", "x"}, []string{"given twice", "--fan-out"}},
		{[]string{"run", "--agent", "claude,codex,gemini", "--fan-out", "6", "--prompt", "x"}, []string{"3 agents × 6 attempts each", "at most 16"}},
		{[]string{"run", "--agent", "claude,codex", "--prompt", "x", "-i"}, []string{"cannot share standard input"}},
		{[]string{"run", "--agent", "codex"}, []string{"--prompt TEXT or --prompt-file FILE"}},
		{[]string{"run", "--agent", "codex", "--prompt-file", "/nonexistent/task.md"}, []string{"--prompt-file"}},
		{[]string{"run", "--prompt", "x", "--", "echo"}, []string{"go with --agent"}},
		{[]string{"run"}, []string{"--agent NAME"}},
		{[]string{"run", "--agent", "codex", "--prompt-file", "-", "-i"}, []string{"use one of them"}},
	} {
		code, _, errOut := run(t, home, "", tt.args...)
		if code == 0 {
			t.Errorf("%v: exit 0", tt.args)
		}
		for _, w := range tt.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: %s; want %q", tt.args, errOut, w)
			}
		}
	}
}

// TestRunAgentNetwork: the preset's host and API key reach the sandbox's
// policy; a key found nowhere stops the run before anything boots.
func TestRunAgentNetwork(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("CLAUDE_CODE_OAUTH_TOKEN", "")
	home := t.TempDir()
	project := t.TempDir()
	code, _, errOut := run(t, home, "", "run", "--project", project, "--agent", "claude", "--prompt", "x")
	if code == 0 || !strings.Contains(errOut, "ANTHROPIC_API_KEY") || !strings.Contains(errOut, "CLAUDE_CODE_OAUTH_TOKEN") || !strings.Contains(errOut, "api.anthropic.com") || !strings.Contains(errOut, "Nothing was run") {
		t.Errorf("no key: %d %s", code, errOut)
	}

	t.Setenv("ANTHROPIC_API_KEY", "sk-from-env")
	presets, err := loadAgents()
	if err != nil {
		t.Fatal(err)
	}
	f := &agentFlags{names: []string{"claude"}, prompt: "fix it"}
	e := &env{stderr: &strings.Builder{}, quiet: true}
	names, prompt, err := f.resolve(e, nil, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	pl, err := e.planner(home, lockio.NewWriter(e.stderr))
	if err != nil {
		t.Fatal(err)
	}
	pl.Backend = func(time.Duration) (vm.Backend, error) { return nil, nil }
	for _, name := range []string{"minimal", images.AgentsImage} {
		testenv.FakeImage(t, home, name, vm.Arch(runtime.GOARCH), map[string]string{"agent": "1000:1000"})
	}
	pn, err := pl.Run(context.Background(), plan.Request{Project: project, Agents: names, Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	defer pn.Close()
	o := pn.Runs[0]
	if got := strings.Join(o.Command, " "); got != strings.Join(presets["claude"].Command("fix it", false), " ") || !strings.HasPrefix(got, "claude -p --output-format json --dangerously-skip-permissions fix it\n") {
		t.Errorf("command %q", got)
	}
	pol := o.Network.Policy
	if len(pol.Allow) != 1 || pol.Allow[0].Host != "api.anthropic.com" || pol.Allow[0].Source != "preset" {
		t.Errorf("allow %+v", pol.Allow)
	}
	if len(pol.Secrets) != 1 || pol.Secrets[0].Value != "sk-from-env" || pol.Secrets[0].Header != "x-api-key" {
		t.Errorf("secrets %+v", pol.Secrets)
	}
}

func TestAgentPromptFile(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	task := filepath.Join(t.TempDir(), "task.md")
	if err := os.WriteFile(task, []byte("from a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &env{stdin: strings.NewReader("from stdin")}
	presets, err := loadAgents()
	if err != nil {
		t.Fatal(err)
	}
	gemini := presets["gemini"]
	for _, tt := range []struct{ file, want string }{{task, "from a file"}, {"-", "from stdin"}} {
		_, prompt, err := (&agentFlags{names: []string{"gemini"}, promptFile: tt.file}).resolve(e, nil, -1, "")
		if err != nil {
			t.Fatal(err)
		}
		cmd := gemini.Command(prompt, false)
		if last := cmd[len(cmd)-1]; !strings.HasPrefix(last, tt.want+"\n") || cmd[len(cmd)-2] != "-p" {
			t.Errorf("%s: command %q", tt.file, cmd)
		}
	}
	if _, _, err := (&agentFlags{names: []string{"gemini"}, prompt: "a", promptFile: task}).resolve(e, nil, -1, ""); err == nil {
		t.Error("--prompt and --prompt-file together accepted")
	}
}

// TestRunAgentImage: without --image an agent runs on its preset's image
// (claude's CLI is on the full image, or the agent image fetched in its
// place), with it on the one given; a missing image says how to build it.
func TestRunAgentImage(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("ANTHROPIC_API_KEY", "sk-test")
	home := t.TempDir()
	code, _, errOut := run(t, home, "", "run", "--project", t.TempDir(), "--agent", "claude", "--prompt", "x")
	if code == 0 || !strings.Contains(errOut, "agent image") || !strings.Contains(errOut, "image build --arch amd64 minimal") {
		t.Errorf("claude without a full image: exit %d, %s", code, errOut)
	}
	code, _, errOut = run(t, home, "", "run", "--project", t.TempDir(), "--image", "nosuch", "--agent", "claude", "--prompt", "x")
	if code == 0 || !strings.Contains(errOut, "nosuch") {
		t.Errorf("--image nosuch: exit %d, %s", code, errOut)
	}
}
