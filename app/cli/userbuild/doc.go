// Package userbuild holds the test of the agent image built as an
// ordinary user (image build agents run as nobody: the Debian base
// pulled, then its stages in builder VMs), the slowest test of the suite:
// in a package of its own, go test runs it beside app/cli's other VM
// tests. It runs airlock as a program, built from this tree, as that
// user.
//
// It has no code but tests, and must not import app/gui or fyne (like
// app/cli).
package userbuild
