package agent

import "testing"

// TestCodexLogin: without CODEX_API_KEY, Codex signs in with a ChatGPT
// plan's sign-in kept on the host, a login Airlock knows.
func TestCodexLogin(t *testing.T) {
	presets, err := Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := presets["codex"]
	if p.Login != "chatgpt" {
		t.Errorf("codex's login is %q, want chatgpt", p.Login)
	}
	if err := p.Validate(); err != nil {
		t.Error(err)
	}
}
