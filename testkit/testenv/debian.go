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

// DebianBase returns a gzip tar of a minimal Debian 12 root file system
// (mmdebstrap's minbase variant, apt pointing at deb.debian.org), the
// base layer tests build images on where no registry is reachable. It is
// made once per test home (the .debs are cached beside the full image's)
// and needs root and mmdebstrap, as the full image does.
func DebianBase(t testing.TB) string {
	t.Helper()
	return debianLayer(t, "bookworm-minbase-amd64", "debian-base", []string{"ca-certificates"})
}

// DebianTools is DebianBase with the full image's Debian packages
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

// DebianGo is DebianBase with Go (Debian's golang-go) installed: the
// image of a Go project's environment in tests. Installing Go in a
// builder VM (dpkg unpacking some 15,000 files of the toolchain and its
// sources under QEMU without KVM, then bringing them back) took a test
// 15 minutes; the test installs a small package there instead.
func DebianGo(t testing.TB) string {
	t.Helper()
	return debianLayer(t, "bookworm-go-amd64", "debian-go", []string{"ca-certificates", "golang-go"})
}

// DebianDocker is DebianBase with Docker inside the VM's packages
// (images.DockerPackages: Debian's docker.io, iptables and curl) installed: the
// base of a Docker environment in tests, whose apt step in the builder
// VM then finds nothing to install (dpkg unpacking the engine takes
// minutes under QEMU without KVM; TestGoProjectEnvironment proves apt
// installing in a builder VM).
func DebianDocker(t testing.TB) string {
	t.Helper()
	return debianLayer(t, "bookworm-docker-amd64", "debian-docker", []string{"ca-certificates", "docker.io", "iptables", "curl"})
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
