// Package agents holds the tests of the real agent CLIs (Claude Code,
// Codex, Gemini CLI) in VMs of the full image: API keys and subscription
// sign-ins through the egress proxy against fake vendors, and their
// faults (a vendor's error, a rejected credential, the time limit). They
// are app/cli's slowest tests, kept in a package of their own so that go
// test runs them beside app/cli's other VM tests; the test binary acts as
// airlock for the VM supervisors it spawns (clitest.Main).
//
// It has no code but tests, and must not import app/gui or fyne (like
// app/cli).
package agents
