// Package agents holds the tests of the real agent CLIs Claude Code and
// Codex in VMs of the full image: API keys and subscription sign-ins
// through the egress proxy against fake vendors, their faults (a vendor's
// error, a rejected credential, the time limit), and staged actions
// (held requests sent from the host). Gemini CLI's, the slowest, are in
// app/cli/gemini: go test runs the two packages side by side, and beside
// app/cli's other VM tests. The test binary acts as airlock for the VM
// supervisors it spawns (clitest.Main).
//
// It has no code but tests, and must not import app/gui or fyne (like
// app/cli).
package agents
