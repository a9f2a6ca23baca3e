package agent

import "testing"

// Gemini CLI signs in with the Google account of the host's CLI when no
// GEMINI_API_KEY is set.
func TestGeminiPresetLogin(t *testing.T) {
	presets, err := Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := presets["gemini"].Login; got != "google" {
		t.Errorf("gemini's login is %q, want google", got)
	}
}
