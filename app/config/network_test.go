package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/egress"
)

func TestUserPath(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	got, _ := UserPath(env(map[string]string{"XDG_CONFIG_HOME": "/x/cfg", "HOME": "/home/u"}))
	if got != "/x/cfg/airlock/config.toml" {
		t.Errorf("with XDG_CONFIG_HOME: %s", got)
	}
	got, _ = UserPath(env(map[string]string{"XDG_CONFIG_HOME": "relative", "HOME": "/home/u"}))
	if got != "/home/u/.config/airlock/config.toml" {
		t.Errorf("without a usable XDG_CONFIG_HOME: %s", got)
	}
}

func writeFile(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

func TestLoadUser(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.toml")
	if u, err := LoadUser(p); err != nil || len(u.Network.Allow) != 0 {
		t.Fatalf("missing file: %+v, %v", u, err)
	}
	writeFile(t, p, `
[network]
allow = ["github.com", "*.pypi.org:443"]
[[network.secret]]
host = "api.anthropic.com"
header = "x-api-key"
env = "ANTHROPIC_API_KEY"
[secrets]
ANTHROPIC_API_KEY = "sk-test"
`, 0o600)
	u, err := LoadUser(p)
	if err != nil {
		t.Fatal(err)
	}
	want := User{
		Network: Network{Allow: []string{"github.com", "*.pypi.org:443"}, Secret: []SecretRule{{Host: "api.anthropic.com", Header: "x-api-key", Env: "ANTHROPIC_API_KEY"}}},
		Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-test"},
	}
	if diff := cmp.Diff(want, u); diff != "" {
		t.Errorf("LoadUser (-want +got):\n%s", diff)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadUser(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("secrets in a world-readable file: %v", err)
	}

	writeFile(t, p, `
[network]
allow = ["ok.com", "bad host", "x.com:99999"]
deny = ["*"]
[[network.host]]
host = "api.x.com"
methods = ["get", "CONNECT"]
[[network.secret]]
host = "*.x.com"
header = "x-api-key"
env = "1BAD"
[secrets]
"bad-name" = ""
`, 0o600)
	_, err = LoadUser(p)
	for _, want := range []string{"bad host", "99999", "network.deny", "CONNECT", "wildcard", "1BAD", "bad-name", "empty"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadUser of a bad file: %v\nwant it to mention %q", err, want)
		}
	}
	writeFile(t, p, "[netwrk]\n", 0o600)
	if _, err := LoadUser(p); err == nil || !strings.Contains(err.Error(), "unknown keys netwrk") {
		t.Errorf("unknown key: %v", err)
	}
}

func TestWidening(t *testing.T) {
	user := Network{Allow: []string{"*.github.com", "pypi.org"}, Secret: []SecretRule{{Host: "api.anthropic.com", Header: "x-api-key", Env: "K"}}}
	flags := []egress.Rule{{Host: "example.com", Port: 8080}}
	project := Network{
		Allow:  []string{"api.github.com", "pypi.org", "example.com:8080", "evil.com", "pypi.org:22"},
		Deny:   []string{"gist.github.com"},
		Host:   []HostRule{{Host: "pypi.org", Methods: []string{"GET"}}},
		Secret: []SecretRule{{Host: "api.anthropic.com", Header: "x-api-key", Env: "K"}, {Host: "evil.com", Header: "x-api-key", Env: "K"}},
	}
	got := Widening(user, project, flags)
	want := []string{"allow evil.com", "allow pypi.org:22", "secret K in header x-api-key to evil.com"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Widening (-want +got):\n%s", diff)
	}
	if got := Widening(user, Network{Deny: []string{"x.com"}}, nil); len(got) != 0 {
		t.Errorf("a deny-only project widens: %v", got)
	}
}

func TestPolicy(t *testing.T) {
	user := User{
		Network: Network{Allow: []string{"github.com"}, Secret: []SecretRule{{Host: "api.anthropic.com", Header: "x-api-key", Env: "ANTHROPIC_API_KEY"}}},
		Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-user"},
	}
	project := Project{Network: Network{Allow: []string{"evil.com"}, Deny: []string{"github.com"}}}
	flags := []egress.Rule{{Host: "example.com", Source: "flag"}}

	pol, err := Policy(PolicyInput{User: user, Project: project, Flags: flags})
	if err != nil {
		t.Fatal(err)
	}
	decide := func(pol *egress.Policy, host string) bool {
		return pol.Decide(egress.Request{Host: host, Port: 443, Method: "CONNECT", Connect: true}).Allowed
	}
	if decide(pol, "evil.com") {
		t.Error("an unconfirmed project widened the policy")
	}
	if decide(pol, "github.com") {
		t.Error("the project's deny did not narrow the policy")
	}
	if !decide(pol, "example.com") || !decide(pol, "api.anthropic.com") {
		t.Error("a flag or the user's secret host is not allowed")
	}
	if len(pol.Secrets) != 1 || pol.Secrets[0].Value != "sk-user" || !strings.HasPrefix(pol.Secrets[0].Placeholder, egress.PlaceholderPrefix) {
		t.Errorf("secrets: %+v", pol.Secrets)
	}
	if env := pol.GuestEnv(); env["ANTHROPIC_API_KEY"] != pol.Secrets[0].Placeholder {
		t.Errorf("guest env %v", env)
	}

	pol, err = Policy(PolicyInput{User: user, Project: project, ProjectTrusted: true})
	if err != nil {
		t.Fatal(err)
	}
	if !decide(pol, "evil.com") {
		t.Error("a confirmed project's allow is not honoured")
	}

	// A secret with no value anywhere: a clear error, every one listed.
	user.Secrets = nil
	user.Network.Secret = append(user.Network.Secret, SecretRule{Host: "api.openai.com", Header: "Authorization", Env: "OPENAI_API_KEY"})
	_, err = Policy(PolicyInput{User: user})
	for _, want := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing secrets: %v; want it to name %s", err, want)
		}
	}
	pol, err = Policy(PolicyInput{User: user, Lookup: func(name string) (string, error) {
		v, _, err := egress.LookupSecret(name, nil, func(k string) string { return "env-" + k })
		return v, err
	}})
	if err != nil || len(pol.Secrets) != 2 || pol.Secrets[1].Value != "env-OPENAI_API_KEY" {
		t.Errorf("secrets from the environment: %+v, %v", pol, err)
	}
}

func TestTrust(t *testing.T) {
	tr := Trust{Path: filepath.Join(t.TempDir(), "home", "trust.json")}
	if ok, err := tr.Trusted("/p", "aa"); ok || err != nil {
		t.Fatalf("empty store: %v, %v", ok, err)
	}
	if err := tr.Confirm("/p", "aa"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := tr.Trusted("/p", "aa"); !ok {
		t.Error("confirmed file not trusted")
	}
	if ok, _ := tr.Trusted("/p", "bb"); ok {
		t.Error("a changed file is still trusted")
	}
	if ok, _ := tr.Trusted("/q", "aa"); ok {
		t.Error("another project is trusted")
	}
	if ok, _ := tr.Trusted("/p", ""); ok {
		t.Error("an empty hash is trusted")
	}
}

func TestPolicyPreset(t *testing.T) {
	preset := []egress.Rule{{Host: "api.openai.com", Source: "preset"}}
	ps := []SecretRule{{Host: "api.openai.com", Header: "Authorization", Env: "OPENAI_API_KEY"}, {Host: "api.anthropic.com", Header: "x-api-key", Env: "ANTHROPIC_API_KEY"}}
	user := User{Network: Network{Secret: []SecretRule{{Host: "proxy.example.com", Header: "x-api-key", Env: "ANTHROPIC_API_KEY"}}}}
	pol, err := Policy(PolicyInput{Preset: preset, PresetSecrets: ps, User: user, Lookup: func(name string) (string, error) { return "v-" + name, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if !pol.Decide(egress.Request{Host: "api.openai.com", Port: 443, Method: "CONNECT", Connect: true}).Allowed {
		t.Error("the preset's host is not allowed")
	}
	// The user's ANTHROPIC_API_KEY replaces the preset's; OPENAI_API_KEY comes from the preset.
	var got []string
	for _, s := range pol.Secrets {
		got = append(got, s.Name+"@"+s.Host+"="+s.Value)
	}
	want := []string{"OPENAI_API_KEY@api.openai.com=v-OPENAI_API_KEY", "ANTHROPIC_API_KEY@proxy.example.com=v-ANTHROPIC_API_KEY"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("secrets %v, want %v", got, want)
	}
	if _, err := Policy(PolicyInput{PresetSecrets: ps[:1]}); err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Errorf("a preset's secret with no value: %v", err)
	}
}

func TestLoadUserHostExec(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.toml")
	writeFile(t, p, "[review]\nhost_exec = [\"scripts/deploy/**\", \"tools/*.py\"]\n", 0o600)
	u, err := LoadUser(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"scripts/deploy/**", "tools/*.py"}, u.Review.HostExec); diff != "" {
		t.Errorf("host_exec (-want +got):\n%s", diff)
	}
	// Every bad pattern is named at once, with what is wanted.
	writeFile(t, p, "[review]\nhost_exec = [\"\", \"../x\", \"a/[b\"]\n", 0o600)
	_, err = LoadUser(p)
	for _, want := range []string{"review.host_exec 1", "review.host_exec 2", "no \"..\"", "review.host_exec 3", "not a valid glob"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadUser: error %v, want one containing %q", err, want)
		}
	}
	writeFile(t, p, "[review]\nhost_exe = [\"x\"]\n", 0o600)
	if _, err := LoadUser(p); err == nil || !strings.Contains(err.Error(), "[review] host_exec") {
		t.Errorf("LoadUser with a typo: %v, want the known keys named", err)
	}
	for _, bad := range []string{"", "/", "../x", "a//b", "a/[/b", "x\x00"} {
		if err := validPathPattern(bad); err == nil {
			t.Errorf("validPathPattern(%q) accepted it", bad)
		}
	}
	for _, good := range []string{"scripts/deploy/**", "tools/*.py", "/Brewfile", "ci/"} {
		if err := validPathPattern(good); err != nil {
			t.Errorf("validPathPattern(%q): %v", good, err)
		}
	}
	// A project's airlock.toml cannot touch the list.
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, FileName), "[review]\nhost_exec = []\n", 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "unknown keys review") {
		t.Errorf("Load of a project with [review]: %v, want unknown keys", err)
	}
}

func TestLoadUserMergeTool(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.toml")
	writeFile(t, p, "[review]\nmerge_tool = \"code --wait --merge $MINE $THEIRS '$BASE' \\\"--out=$OUTPUT\\\"\"\n", 0o600)
	u, err := LoadUser(p)
	if err != nil {
		t.Fatal(err)
	}
	argv, err := u.Review.MergeToolArgv()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"code", "--wait", "--merge", "$MINE", "$THEIRS", "$BASE", "--out=$OUTPUT"}, argv); diff != "" {
		t.Errorf("argv (-want +got):\n%s", diff)
	}
	for tool, want := range map[string]string{
		"meld $MINE $THEIRS":              "name $OUTPUT",
		"meld $MINE $HOME $OUTPUT":        `"$HOME" is not one of`,
		"meld 'unclosed $OUTPUT":          "quote is not closed",
		"$OUTPUT $MINE":                   "first word is the program",
		`kdiff3 $BASE $MINE -o $OUTPUT \`: "ends with a backslash",
	} {
		if _, err := (Review{MergeTool: tool}).MergeToolArgv(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", tool, err, want)
		}
	}
	writeFile(t, p, "[review]\nmerge_tool = \"meld $MINE\"\n", 0o600)
	if _, err := LoadUser(p); err == nil || !strings.Contains(err.Error(), "review.merge_tool") {
		t.Errorf("load with a bad merge tool: %v", err)
	}
	if argv, err := (Review{}).MergeToolArgv(); argv != nil || err != nil {
		t.Errorf("no merge tool: %q %v", argv, err)
	}
}
