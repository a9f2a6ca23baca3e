// Package testenv gives tests that boot real VMs what they need: an Airlock
// home with the minimal guest image built from the current source (the
// guest agent is rebuilt from this tree, the Debian packages are cached),
// shared by every test package of a run and built once under a file lock.
//
// A test that cannot run for want of something of the host (KVM, root,
// qemu-img, virtiofsd, …) calls Skip with the Capability it lacks: it
// skips, or fails when AIRLOCK_TEST_REQUIRE (RequireEnv) requires that
// capability, as CI does for everything its machine provides. -short skips
// stay plain skips.
//
// Only tests import it. It must not import app, fyne or a hypervisor
// package.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// HomeEnv names the directory that test images are built into. CI sets it
// inside the checkout so that images are built once per run; unset, a
// directory under the system temp dir is used.
const HomeEnv = "AIRLOCK_TEST_HOME"

// SkipIfShort skips a test that boots a real VM when -short is given. CI
// never passes -short.
func SkipIfShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a real VM; skipped with -short")
	}
}

// Home returns the shared test home, creating it.
func Home(t testing.TB) string {
	t.Helper()
	h := os.Getenv(HomeEnv)
	if h == "" {
		h = filepath.Join(os.TempDir(), "airlock-test-home")
	}
	h, err := filepath.Abs(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(h, 0o755); err != nil {
		t.Fatal(err)
	}
	return h
}

// VMHome is an Airlock home of its own (sandboxes, objects) that shares
// the test images (the minimal image built) and caches of Home.
func VMHome(t testing.TB) string {
	t.Helper()
	Image(t, vm.AMD64)
	shared := Home(t)
	home := t.TempDir()
	for _, d := range []string{"images", "cache"} {
		if err := os.Symlink(filepath.Join(shared, d), filepath.Join(home, d)); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

// RepoRoot is the root of the Airlock source tree.
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the source tree")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Image returns the minimal image for arch in the shared test home, built
// from this tree's guest agent. It is rebuilt when the agent binary changed.
// The build takes ~20 s on a fresh machine (downloads cached afterwards).
func Image(t testing.TB, arch vm.Arch) *image.Image {
	t.Helper()
	h := Home(t)
	unlock := lock(t, filepath.Join(h, ".build.lock"))
	defer unlock()

	guest := GuestBinary(t, arch)
	sum, err := fileSHA256(guest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := image.Load(h, image.DefaultName, arch)
	why := staleWhy(im, err, sum)
	if why == "" && builderNewer(t, im.Meta.Created) {
		why = "the image builder's source is newer than it"
	}
	if why == "" {
		return im
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t.Logf("building the minimal %s image into %s: %s", arch, h, why)
	im, err = image.Build(ctx, image.BuildOptions{Home: h, Name: image.DefaultName, Arch: arch, GuestBinary: guest})
	if err != nil {
		t.Fatalf("build the %s test image: %v", arch, err)
	}
	return im
}

// FullImage returns the full image for arch in the shared test home,
// built from this tree's guest agent: a Debian root disk with node and
// the agent CLIs (image.FullSpec), built once per test home (minutes on a
// fresh machine; the .debs and npm packages are cached in the home) and
// rebuilt when the agent binary changed. Building needs root, mmdebstrap
// and npm (scripts/setup-debian); without them the test fails saying so.
func FullImage(t testing.TB, arch vm.Arch) *image.Image {
	t.Helper()
	h := Home(t)
	unlock := lock(t, filepath.Join(h, ".build-full.lock"))
	defer unlock()

	guest := GuestBinary(t, arch)
	sum, err := fileSHA256(guest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := image.Load(h, image.FullName, arch)
	why := staleWhy(im, err, sum)
	if why == "" {
		return im
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	t.Logf("building the full %s image into %s (minutes on a fresh machine): %s", arch, h, why)
	im, err = image.Build(ctx, image.BuildOptions{Home: h, Name: image.FullName, Arch: arch, GuestBinary: guest})
	if err != nil {
		t.Fatalf("build the full %s test image (needs root, mmdebstrap and npm: scripts/setup-debian): %v", arch, err)
	}
	return im
}

// staleWhy says why a test image must be built (the error loading it, or
// the guest agent it holds is not this tree's), or "" when it need not.
func staleWhy(im *image.Image, err error, sum string) string {
	if err != nil {
		return err.Error()
	}
	if im.Meta.Guest.SHA256 != sum {
		return fmt.Sprintf("it holds guest agent %.12s, this tree's is %.12s", im.Meta.Guest.SHA256, sum)
	}
	return ""
}

// builderNewer reports whether the image builder's source changed after
// built, so a developer's cached test image is rebuilt with it.
func builderNewer(t testing.TB, built time.Time) bool {
	files, _ := filepath.Glob(filepath.Join(RepoRoot(t), "vm", "image", "*.go"))
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.ModTime().After(built) {
			return true
		}
	}
	return false
}

// GuestBinary builds airlock-guest for linux/arch from this tree into the
// test home and returns its path. It is built once per test binary, under
// a lock: the test binaries that go test runs side by side share it, and
// hash it for their images.
func GuestBinary(t testing.TB, arch vm.Arch) string {
	t.Helper()
	return buildOnce(t, "airlock-guest-linux-"+string(arch), "./guest/cmd/airlock-guest", arch)
}

// built are the paths buildOnce built in this process, by output name.
var built struct {
	sync.Mutex
	paths map[string]string
}

// buildOnce builds the package pkg for linux/arch into the test home's
// guest/name, once per process, holding a lock on the home so no other
// test binary reads a half-written file.
func buildOnce(t testing.TB, name, pkg string, arch vm.Arch) string {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	if p, ok := built.paths[name]; ok {
		return p
	}
	h := Home(t)
	out := filepath.Join(h, "guest", name)
	unlock := lock(t, filepath.Join(h, ".build-guest.lock"))
	defer unlock()
	// -buildvcs=false on the command line: the images in the shared
	// home record the guest agent's hash, and a test that moves
	// XDG_CONFIG_HOME (where go env keeps GOFLAGS) built one stamped with
	// the commit, so every test binary rebuilt the full image for itself.
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = RepoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+string(arch))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s for %s: %v\n%s", pkg, arch, err, b)
	}
	if built.paths == nil {
		built.paths = map[string]string{}
	}
	built.paths[name] = out
	return out
}

// ForeignArchReady reports whether apt can download packages for arch,
// and why not.
func ForeignArchReady(arch vm.Arch) (bool, string) {
	if string(arch) == runtime.GOARCH {
		return true, ""
	}
	out, err := exec.Command("dpkg", "--print-foreign-architectures").Output()
	if err != nil {
		return false, "dpkg not available: " + err.Error()
	}
	for _, a := range strings.Fields(string(out)) {
		if a == string(arch) {
			return true, ""
		}
	}
	return false, "dpkg has no " + string(arch) + " foreign architecture (scripts/setup-debian adds it)"
}

func lock(t testing.TB, path string) func() {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}

// NetClient builds, for a linux guest of arch, the small static HTTP
// client in testdata/netclient (busybox has no HTTPS client that goes
// through a proxy) and returns its path, in the test home, built once per
// test binary (GuestBinary).
func NetClient(t testing.TB, arch vm.Arch) string {
	t.Helper()
	return buildOnce(t, "netclient-linux-"+string(arch), "./testkit/testenv/testdata/netclient", arch)
}

// Sbin finds a host tool a test checks its results with (e2fsck,
// debugfs), also in the sbin directories a non-root PATH lacks; without
// it the test fails: scripts/setup-debian installs them.
func Sbin(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return filepath.Join(d, name)
		}
	}
	t.Fatalf("%s not found: install e2fsprogs (scripts/setup-debian does)", name)
	return ""
}

// CopyMinimal puts a copy of the minimal image into home: a home of its
// own (not sharing the test images), as a new user's.
func CopyMinimal(t testing.TB, minimal *image.Image, home string) {
	t.Helper()
	imgDir := image.Dir(home, image.DefaultName, vm.AMD64)
	if err := os.MkdirAll(imgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{image.KernelFile, image.InitrdFile, image.MetaFile} {
		b, err := os.ReadFile(filepath.Join(minimal.Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(imgDir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
