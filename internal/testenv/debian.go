package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// DebianBase returns a gzip tar of a minimal Debian 12 root file system
// (mmdebstrap's minbase variant, apt pointing at deb.debian.org), the
// base layer tests build images on where no registry is reachable. It is
// made once per test home (the .debs are cached beside the full image's)
// and needs root and mmdebstrap, as the full image does.
func DebianBase(t testing.TB) string {
	t.Helper()
	h := Home(t)
	unlock := lock(t, filepath.Join(h, ".build-debian-base.lock"))
	defer unlock()
	out := filepath.Join(h, "debian-base", "bookworm-minbase-amd64.tar.gz")
	if _, err := os.Stat(out); err == nil {
		return out
	}
	if os.Getuid() != 0 {
		Skip(t, Root, "the Debian base layer is made by mmdebstrap as root")
	}
	mm, err := exec.LookPath("mmdebstrap")
	if err != nil {
		t.Fatal("mmdebstrap not found: scripts/setup-debian installs it")
	}
	cache := filepath.Join(h, "cache", "debs", "debian-base")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	tmp := out + ".tmp.tar.gz"
	t.Logf("making a Debian base layer with mmdebstrap into %s", out)
	cmd := exec.CommandContext(ctx, mm, "--mode=root", "--variant=minbase", "--arch=amd64", "--format=tar",
		"--include=ca-certificates",
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
	return out
}
