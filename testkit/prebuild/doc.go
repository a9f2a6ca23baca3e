// Package prebuild builds the images and layers the suite's VM tests
// share, before they need them. scripts/test starts it right after
// scripts/setup-debian, beside the Mac checks and the tests' own
// compiling: these builds wait mostly on the network and the disk
// (Debian's packages, npm's tarballs, dpkg), and a VM test that needs
// one in the middle of a lane held a slot of the CPU-bound VM lane while
// it waited. Each build is testenv's, under testenv's lock: a test that
// needs an image still being built waits for it, as it always did, and
// one already built is only checked.
//
// Only its test exists. It must not import app, fyne or a hypervisor
// package.
package prebuild
