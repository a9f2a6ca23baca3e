// Package docker holds the tests of Docker inside the VM (airlock run
// --docker, docker = true in airlock.toml): a Docker Engine started in a
// real VM before the command, its containers run by the command's user.
// They are apart from app/cli's other VM tests so that go test runs them
// side by side; the test binary acts as airlock for the VM supervisors it
// spawns (clitest.Main).
//
// It has no code but tests, and must not import app/gui or fyne (like
// app/cli).
package docker
