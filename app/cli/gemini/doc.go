// Package gemini holds the tests of Gemini CLI from the full image in a
// VM against its fake vendors: with an API key and signed in with Google
// (Code Assist). They are app/cli's slowest (the CLI starts slowly under
// TCG), kept apart from the other agent CLIs' tests (app/cli/agents) so
// that go test runs the two side by side; the test binary acts as airlock
// for the VM supervisors it spawns (clitest.Main).
//
// It has no code but tests, and must not import app/gui or fyne (like
// app/cli).
package gemini
