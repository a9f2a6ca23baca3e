package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/egress"
)

func TestBuiltinPresets(t *testing.T) {
	presets, err := Load(t.TempDir()) // no agents.toml: the built-ins
	if err != nil {
		t.Fatal(err)
	}
	if got := Names(presets); !slices.Equal(got, []string{"claude", "codex", "demo", "gemini"}) {
		t.Fatalf("presets %v", got)
	}
	const prompt = `fix "the" test; rm -rf /`
	tests := []struct {
		name        string
		command     []string // with W for the wrapped prompt
		interactive []string
		cont        []string // with R for the reply
		env         map[string]string
		host        string
		secrets     []config.SecretRule
		jsonField   string
	}{
		{
			name:        "claude",
			command:     []string{"claude", "-p", "--output-format", "json", "--dangerously-skip-permissions", "W"},
			interactive: []string{"claude", "--dangerously-skip-permissions"},
			cont:        []string{"claude", "-p", "--continue", "--output-format", "json", "--dangerously-skip-permissions", "R"},
			env:         map[string]string{"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "IS_SANDBOX": "1"},
			host:        "api.anthropic.com",
			secrets: []config.SecretRule{
				{Env: "ANTHROPIC_API_KEY", Host: "api.anthropic.com", Header: "x-api-key"},
				{Env: "CLAUDE_CODE_OAUTH_TOKEN", Host: "api.anthropic.com", Header: "Authorization"},
			},
			jsonField: "result",
		},
		{
			name:        "codex",
			jsonField:   "item.text",
			command:     []string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "W"},
			interactive: []string{"codex", "--dangerously-bypass-approvals-and-sandbox"},
			cont:        []string{"codex", "exec", "resume", "--last", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "R"},
			env:         map[string]string{},
			host:        "api.openai.com",
			secrets:     []config.SecretRule{{Env: "CODEX_API_KEY", Host: "api.openai.com", Header: "Authorization"}},
		},
		{
			name:        "gemini",
			command:     []string{"gemini", "--yolo", "--skip-trust", "--output-format", "json", "-p", "W"},
			interactive: []string{"gemini", "--yolo", "--skip-trust"},
			cont:        []string{"gemini", "--resume", "latest", "--yolo", "--skip-trust", "--output-format", "json", "-p", "R"},
			env:         map[string]string{},
			host:        "generativelanguage.googleapis.com",
			secrets:     []config.SecretRule{{Env: "GEMINI_API_KEY", Host: "generativelanguage.googleapis.com", Header: "x-goog-api-key"}},
			jsonField:   "response",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := presets[tt.name]
			if p.Source != "builtin" || p.User != "agent" || p.Rationale.SummaryFile != ".airlock/summary.md" || p.Rationale.JSONField != tt.jsonField {
				t.Errorf("preset %+v", p)
			}
			wrapped := p.Prompt(prompt)
			if !strings.HasPrefix(wrapped, prompt+"\n") || !strings.Contains(wrapped, ".airlock/summary.md") {
				t.Errorf("wrapped prompt %q", wrapped)
			}
			want := replace(tt.command, "W", wrapped)
			if got := p.Command(prompt, false); !slices.Equal(got, want) {
				t.Errorf("command\n got %q\nwant %q", got, want)
			}
			if got := p.Command("", true); !slices.Equal(got, tt.interactive) {
				t.Errorf("interactive %q, want %q", got, tt.interactive)
			}
			if got := p.ContinueCommand("and the docs"); !slices.Equal(got, replace(tt.cont, "R", "and the docs")) {
				t.Errorf("continue %q", got)
			}
			if len(p.Env) != len(tt.env) {
				t.Errorf("env %v, want %v", p.Env, tt.env)
			}
			for k, v := range tt.env {
				if p.Env[k] != v {
					t.Errorf("env %v, want %v", p.Env, tt.env)
				}
			}
			rules, err := p.Rules()
			if err != nil || len(rules) != 1 || rules[0].Host != tt.host || rules[0].Source != "preset" {
				t.Errorf("rules %+v, %v", rules, err)
			}
			if s := p.Secrets(); !slices.Equal(s, tt.secrets) {
				t.Errorf("secrets %+v, want %+v", s, tt.secrets)
			}
			for _, s := range p.Secret {
				if s.How == "" {
					t.Errorf("secret %s does not say how to get it", s.Env)
				}
			}
			if p.CLI.Package == "" || p.CLI.Version == "" {
				t.Errorf("the preset does not say which CLI version it was checked against: %+v", p.CLI)
			}
			// The rules and secret feed a policy that allows the host and
			// carries the key there.
			pol, err := config.Policy(config.PolicyInput{Preset: rules, PresetSecrets: p.Secrets(), Lookup: func(string) (string, error) { return "sk-test", nil }})
			if err != nil {
				t.Fatal(err)
			}
			if !pol.Decide(egress.Request{Host: tt.host, Port: 443, Method: "POST", Connect: true}).Allowed || pol.Decide(egress.Request{Host: "example.com", Port: 443, Method: "CONNECT", Connect: true}).Allowed {
				t.Error("policy does not allow exactly the preset's host")
			}
			if env := pol.GuestEnv(); !strings.HasPrefix(env[tt.secrets[0].Env], egress.PlaceholderPrefix) {
				t.Errorf("guest env %v", env)
			}
		})
	}
}

func replace(argv []string, from, to string) []string {
	out := slices.Clone(argv)
	for i, a := range out {
		if a == from {
			out[i] = to
		}
	}
	return out
}

// codexExec is what codex exec --json 0.169.0 printed for a task (the
// lines as they came, with a commentary message and a reasoning item
// added around the final message).
const codexExec = `{"type":"thread.started","thread_id":"01a20f56-0bc9-7b80-827c-90fc3672430e"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"Writing the file first."}}
{"type":"item.started","item":{"id":"item_1","type":"file_change","changes":[{"path":"/workspace/notes/hello.txt","kind":"add"}],"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_1","type":"file_change","changes":[{"path":"/workspace/notes/hello.txt","kind":"add"}],"status":"completed"}}
{"type":"item.started","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc 'echo airlock-shell-$((6*7)) | tee shell.out'","aggregated_output":"","exit_code":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc 'echo airlock-shell-$((6*7)) | tee shell.out'","aggregated_output":"airlock-shell-42\n","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"I wrote notes/hello.txt.\n\nThe check printed airlock-shell-42."}}
{"type":"item.completed","item":{"id":"item_4","type":"reasoning","text":"**Done**"}}
{"type":"turn.completed","usage":{"input_tokens":200,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":40,"reasoning_output_tokens":0}}
`

func TestFinalMessage(t *testing.T) {
	presets, err := Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		agent, stdout string
		want          string // "" for none
	}{
		{"codex", codexExec, "I wrote notes/hello.txt.\n\nThe check printed airlock-shell-42."},
		// Lines that are not JSON (a CLI's notices), CRLF line ends.
		{"codex", "Reading additional input from stdin...\r\n" + strings.ReplaceAll(codexExec, "\n", "\r\n"), "I wrote notes/hello.txt.\n\nThe check printed airlock-shell-42."},
		// A turn that failed before any message: none.
		{"codex", `{"type":"thread.started","thread_id":"t"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"thinking"}}
{"type":"error","message":"unexpected status 401 Unauthorized"}
{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized"}}
`, ""},
		// Cut off mid-line: the last whole message.
		{"codex", codexExec[:strings.Index(codexExec, `{"type":"item.completed","item":{"id":"item_3"`)+30], "Writing the file first."},
		{"codex", "", ""},
		{"claude", `{"type":"result","result":"All done."}`, "All done."},
		// One JSON value: a JSON Lines reader is not used.
		{"claude", "{\"result\":\"a\"}\n{\"result\":\"b\"}\n", ""},
	}
	for _, tt := range tests {
		msg, ok := presets[tt.agent].FinalMessage([]byte(tt.stdout))
		if msg != tt.want || ok != (tt.want != "") {
			t.Errorf("%s: final message %q (%v), want %q\n%s", tt.agent, msg, ok, tt.want, tt.stdout)
		}
	}
}

func TestInteractivePrompt(t *testing.T) {
	p := Preset{Name: "x", CommandTemplate: []string{"x", "{prompt}"}, Interactive: []string{"x", "--", "{prompt}"}}
	if got := p.Command("", true); !slices.Equal(got, []string{"x", "--"}) {
		t.Errorf("no prompt: %q", got)
	}
	if got := p.Command("a b", true); !slices.Equal(got, []string{"x", "--", "a b"}) {
		t.Errorf("prompt: %q", got)
	}
	if got := p.Command("", false); !slices.Equal(got, []string{"x", ""}) {
		t.Errorf("non-interactive keeps the argument: %q", got)
	}
}

func TestUserOverride(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, `
[claude]
hosts = ["api.anthropic.com", "statsig.anthropic.com"]
rationale = { json_field = "result.text" }

[codex]
rationale = { json_field = "msg", json_lines = false }

[aider]
description = "aider"
command = ["aider", "--yes-always", "--message", "{prompt}"]
interactive = ["aider"]
hosts = ["api.openai.com"]
[[aider.secret]]
env = "OPENAI_API_KEY"
host = "api.openai.com"
header = "Authorization"
`)
	presets, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := presets["claude"]
	if !slices.Equal(c.Hosts, []string{"api.anthropic.com", "statsig.anthropic.com"}) || c.Rationale.JSONField != "result.text" {
		t.Errorf("override not applied: %+v", c)
	}
	// Keys the user did not set are the built-in's.
	if c.CommandTemplate[0] != "claude" || c.Rationale.SummaryFile != ".airlock/summary.md" || len(c.Secret) != 2 || c.Source != filepath.Join(dir, FileName) {
		t.Errorf("override lost built-in keys: %+v", c)
	}
	a, ok := presets["aider"]
	if !ok || !slices.Equal(a.Command("go", false), []string{"aider", "--yes-always", "--message", "go"}) {
		t.Errorf("added preset %+v", a)
	}
	x := presets["codex"]
	if x.Rationale.JSONField != "msg" || x.Rationale.JSONLines || x.Rationale.JSONMatch["item.type"] != "agent_message" || x.CommandTemplate[0] != "codex" {
		t.Errorf("codex's rationale override: %+v", x.Rationale)
	}
	if msg, ok := c.FinalMessage([]byte(`{"result": {"text": "done"}}`)); !ok || msg != "done" {
		t.Errorf("final message %q %v", msg, ok)
	}
	if _, ok := c.FinalMessage([]byte(`{"result": 3}`)); ok {
		t.Error("a non-string field read as a message")
	}
}

func TestBadFiles(t *testing.T) {
	tests := []struct {
		name, toml string
		want       []string
	}{
		{"syntax", "[claude\n", []string{FileName}},
		{"unknown key", "[claude]\ncomand = [\"x\"]\n", []string{FileName, "unknown keys", "claude.comand"}},
		{"every problem", `
[bad]
command = ["x"]
hosts = ["*"]
user = "Root!"
env = { "A-B" = "1" }
rationale = { summary_file = "../out", json_lines = true, json_match = { "item..type" = "x" } }
[[bad.secret]]
env = "K"
host = "*.example.com"
header = "x-api-key"
`, []string{FileName, "agent bad", "{prompt}", "interactive", "hosts", "Root!", "A-B", "../out", "*.example.com", "need json_field", `json_match "item..type"`}},
		{"wrong type", "[claude]\ncommand = \"claude -p\"\n", []string{FileName, "command"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, tt.toml)
			_, err := Load(dir)
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v; want it to contain %q", err, w)
				}
			}
		})
	}
}

func write(t *testing.T, dir, s string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// An agent preset may name registry presets among its hosts.
func TestPresetRegistryHosts(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, `
[claude]
hosts = ["api.anthropic.com", "@npm", "@pypi (GET)"]
`)
	presets, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := presets["claude"].Rules()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rules {
		got = append(got, r.Label()+" ["+r.Origin()+"]")
	}
	want := []string{
		"api.anthropic.com [preset]",
		"@npm registry.npmjs.org:443 (GET,HEAD) [preset @npm]",
		"@npm registry.yarnpkg.com:443 (GET,HEAD) [preset @npm]",
		"@pypi pypi.org:443 (GET) [preset @pypi]",
		"@pypi files.pythonhosted.org:443 (GET) [preset @pypi]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("rules\n%q\nwant\n%q", got, want)
	}

	write(t, dir, "[claude]\nhosts = [\"@npmjs\"]\n")
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "no registry preset @npmjs; the presets are @npm") {
		t.Errorf("an unknown registry preset: %v", err)
	}
}
