package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/agent"
	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// TestPlanAgentCredentials: an agent signs in with any one of its
// secrets; only the ones found are sent, and an agent with none stops
// the plan before anything is pulled, built or booted, saying what to
// set.
func TestPlanAgentCredentials(t *testing.T) {
	env := map[string]string{}
	pl, _ := testPlanner(t, "")
	pl.Getenv = func(k string) string { return env[k] }
	project := t.TempDir()

	_, err := pl.Run(t.Context(), Request{Project: project, Agents: []string{"claude"}, Prompt: "x"})
	var ce *CredentialError
	if !errors.As(err, &ce) {
		t.Fatalf("plan without a credential: %v, want a CredentialError", err)
	}
	msg := err.Error()
	for _, want := range []string{"agent claude cannot sign in", "ANTHROPIC_API_KEY: an API key", "CLAUDE_CODE_OAUTH_TOKEN: a Claude subscription", "claude setup-token", "[secrets]", "Nothing was run"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q:\n%s", want, msg)
		}
	}
	if c, _ := pl.Credentials("claude"); c.Ready || c.String() != "not signed in: set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN" {
		t.Errorf("credentials %+v: %s", c, c)
	}
	if c, _ := pl.Credentials("codex"); c.Ready || c.String() != "not signed in: set CODEX_API_KEY, or sign in with the chatgpt login" {
		t.Errorf("credentials %+v: %s", c, c)
	}
	if c, _ := pl.Credentials("demo"); !c.Ready {
		t.Errorf("the demo agent needs no credential: %+v", c)
	}

	// A subscription's token alone: it is the one sent, as a Bearer
	// token's placeholder; the API key is not asked for.
	env["CLAUDE_CODE_OAUTH_TOKEN"] = "sk-ant-oat01-test"
	if c, _ := pl.Credentials("claude"); !c.Ready || c.String() != "ready: signs in with CLAUDE_CODE_OAUTH_TOKEN (environment)" {
		t.Errorf("credentials %+v: %s", c, c)
	}
	p, err := pl.Run(t.Context(), Request{Project: project, Agents: []string{"claude"}, Prompt: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pol := p.Runs[0].Network.Policy
	if len(pol.Secrets) != 1 || pol.Secrets[0].Name != "CLAUDE_CODE_OAUTH_TOKEN" || pol.Secrets[0].Header != "Authorization" || pol.Secrets[0].Value != "sk-ant-oat01-test" {
		t.Errorf("secrets %+v", pol.Secrets)
	}
	guest := pol.GuestEnv()
	if _, ok := guest["ANTHROPIC_API_KEY"]; ok || !strings.HasPrefix(guest["CLAUDE_CODE_OAUTH_TOKEN"], egress.PlaceholderPrefix) {
		t.Errorf("guest environment %v", guest)
	}
	// Both: both are sent (the CLI picks).
	env["ANTHROPIC_API_KEY"] = "sk-ant-api-test"
	p2, err := pl.Run(t.Context(), Request{Project: project, Agents: []string{"claude"}, Prompt: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if n := len(p2.Runs[0].Network.Policy.Secrets); n != 2 {
		t.Errorf("%d secrets, want both", n)
	}
	// A command needs no credential, nor an open network.
	delete(env, "ANTHROPIC_API_KEY")
	delete(env, "CLAUDE_CODE_OAUTH_TOKEN")
	if _, err := pl.Run(t.Context(), Request{Project: project, Command: []string{"true"}}); err != nil {
		t.Errorf("a command: %v", err)
	}
	if _, err := pl.Run(t.Context(), Request{Project: project, Agents: []string{"claude"}, Prompt: "x", OpenNetwork: true}); err != nil {
		t.Errorf("an open network: %v", err)
	}
}

// TestPresetCLIVersions: the built-in presets' flags were checked
// against the CLI versions they record; the images (the full image and
// the agent image, both image.FullSpec) pin exactly those, and every CLI
// the images install has a preset.
func TestPresetCLIVersions(t *testing.T) {
	presets, err := agent.Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range []vm.Arch{vm.AMD64, vm.ARM64} {
		pinned := map[string]string{}
		for _, p := range image.FullSpec(arch).Agents {
			pinned[p.Name] = p.Version
		}
		checked := map[string]string{}
		for _, name := range agent.Names(presets) {
			ps := presets[name]
			if ps.CLI.Package == "" {
				if needsAgentCLIs(ps.Image) {
					t.Errorf("agent %s runs on image %s but does not say which CLI version it was checked against (cli = { package, version })", name, ps.Image)
				}
				continue
			}
			checked[ps.CLI.Package] = ps.CLI.Version
			if v, ok := pinned[ps.CLI.Package]; !ok {
				t.Errorf("agent %s: the %s image does not install %s", name, arch, ps.CLI.Package)
			} else if v != ps.CLI.Version {
				t.Errorf("agent %s was checked against %s %s, but the %s image pins %s: run its CI test (app/cli TestClaudeCLI, TestCodexCLI, TestGeminiCLI) on the new version and update presets.toml", name, ps.CLI.Package, ps.CLI.Version, arch, v)
			}
		}
		for pkg := range pinned {
			if _, ok := checked[pkg]; !ok {
				t.Errorf("the %s image installs %s, which no preset runs", arch, pkg)
			}
		}
	}
}
