package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// DebianEnv returns a gzip tar of a minimal Debian 12 root file system
// (mmdebstrap's minbase variant, apt pointing at deb.debian.org) with
// Go (Debian's golang-go) and Docker inside the VM's packages
// (images.DockerPackages: docker.io, iptables, curl) installed, and no
// git and no node: the base layer tests build project images on where
// no registry is reachable. One layer serves the Go project's
// environment, the Docker environment and the bare base the agent
// layer is stacked on: three layers made it three mmdebstraps of
// minutes each, in three lanes of the suite. Installing these in a
// builder VM is what the tests leave out (dpkg unpacking the Go
// toolchain's 15,000 files took a test 15 minutes under QEMU without
// KVM, the engine minutes more); TestGoProjectEnvironment proves apt
// installing in a builder VM on a small package. It is made once per
// test home (the .debs cached beside the full image's) and needs root
// and mmdebstrap, as the full image does.
func DebianEnv(t testing.TB) string {
	t.Helper()
	return debianLayer(t, "bookworm-env-amd64", "debian-env", []string{"ca-certificates", "golang-go", "docker.io", "iptables", "curl"})
}

// DebianTools is a minbase Debian 12 with the full image's Debian packages
// (image.FullSpec) already installed: a base on which the agent image's
// first stage finds nothing left to install. Installing those packages
// in a builder VM takes tens of minutes under QEMU without KVM (dpkg
// unpacking 90 packages); the test that proves the agent image's build
// starts from it, and TestGoProjectEnvironment proves apt installing in
// a builder VM on a small package.
func DebianTools(t testing.TB) string {
	t.Helper()
	return debianLayer(t, "bookworm-tools-amd64", "debian-tools", image.FullSpec(vm.AMD64).Packages)
}

// debianLayer makes (once per test home) the gzip tar name.tar.gz of a
// minbase Debian 12 with include installed, caching the .debs under
// cache/debs/cacheName.
func debianLayer(t testing.TB, name, cacheName string, include []string) string {
	t.Helper()
	h := Home(t)
	unlock := lock(t, filepath.Join(h, ".build-"+cacheName+".lock"))
	defer unlock()
	// The file is named after what is in it, so that a layer made with
	// other packages is never taken for this one.
	sum := sha256.Sum256([]byte(strings.Join(include, "\x00")))
	out := filepath.Join(h, "debian-base", name+"-"+hex.EncodeToString(sum[:4])+".tar.gz")
	if _, err := os.Stat(out); err == nil {
		return out
	}
	if os.Getuid() != 0 {
		Skip(t, Root, "the Debian base layers are made by mmdebstrap as root")
	}
	mm, err := exec.LookPath("mmdebstrap")
	if err != nil {
		t.Fatal("mmdebstrap not found: scripts/setup-debian installs it")
	}
	cache := filepath.Join(h, "cache", "debs", cacheName)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	tmp := out + ".tmp.tar.gz"
	start := time.Now()
	// dpkg syncs nothing (force-unsafe-io): the tree becomes a tar and is
	// gone, and minbase took 60-67 s so instead of 84-89 s.
	cmd := exec.CommandContext(ctx, mm, "--mode=root", "--variant=minbase", "--arch=amd64", "--format=tar",
		"--include="+strings.Join(include, ","), "--dpkgopt=force-unsafe-io",
		"--setup-hook=mkdir -p \"$1\"/var/cache/apt/archives/",
		"--setup-hook=sync-in "+cache+" /var/cache/apt/archives/",
		"--customize-hook=sync-out /var/cache/apt/archives "+cache,
		"--customize-hook=rm -rf \"$1\"/var/cache/apt/archives/*.deb \"$1\"/var/lib/apt/lists/*",
		"bookworm", tmp, "deb http://deb.debian.org/debian bookworm main")
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		t.Fatalf("mmdebstrap: %v\n%s", err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		t.Fatal(err)
	}
	t.Logf("made the Debian layer %s with mmdebstrap in %s", out, time.Since(start).Round(time.Second))
	return out
}

// NpmTarball is p's tarball from the npm registry, fetched once with the
// host's npm into the test home's cache (where the full image's build
// keeps it too) and shared by every test binary.
func NpmTarball(t testing.TB, p image.NpmPackage) string {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("npm fetches %s from the npm registry (scripts/setup-debian installs it): %v", p, err)
	}
	dir := filepath.Join(Home(t), "cache", "npm", "packs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	defer lock(t, filepath.Join(dir, ".lock"))()
	file, err := image.NpmPack(context.Background(), npm, p, dir)
	if err != nil {
		t.Fatal(err)
	}
	return file
}
