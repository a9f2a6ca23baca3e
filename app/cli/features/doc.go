// Package features holds the test of Dev Container features installed
// for real: a feature fetched from a registry after the environment is
// confirmed, its install.sh run in a builder VM with its options, its
// containerEnv in every run. It is apart from app/cli's other VM tests
// so that go test runs it side by side; the test binary acts as airlock
// for the VM supervisors it spawns (clitest.Main).
//
// It has no code but tests, and must not import app/gui or fyne (like
// app/cli).
package features
