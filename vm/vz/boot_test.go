//go:build darwin && cgo

package vz_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/guest"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
	"github.com/airlock-dev/airlock/vm/vz"
)

// requireEnv makes the conditions this test skips on failures instead: set
// it where a Mac is meant to run VMs (the self-hosted CI runner).
const requireEnv = "AIRLOCK_VZ_REQUIRE"

// skipOrFail skips, or fails when requireEnv is set.
func skipOrFail(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv(requireEnv) != "" {
		t.Fatalf("%s (%s is set, so this is a failure)", msg, requireEnv)
	}
	t.Skip(msg)
}

// booted is a minimal-image machine with a connected guest client.
type booted struct {
	spec    vm.Spec
	backend *vz.Backend
	m       vm.Machine
	id      client.Identity
	c       *client.Client
}

// bootMinimal boots the minimal image of this Mac's architecture under
// Virtualization.framework and connects to its guest agent over vsock.
//
// It needs the test binary signed with the virtualization entitlement
// (go test -exec packaging/codesign-exec), a Mac that can run VMs (not a
// GitHub-hosted arm64 runner: no nested virtualization there), and the
// minimal image in $AIRLOCK_TEST_HOME: images are built on Linux
// (airlock image build --arch arm64 minimal) and copied over, since
// apt-get is not on a Mac. Without them it skips, saying why.
func bootMinimal(t *testing.T, ctx context.Context) *booted {
	t.Helper()
	testenv.SkipIfShort(t)
	arch := vm.Arch(runtime.GOARCH)
	h := testenv.Home(t)
	im, err := image.Load(h, image.DefaultName, arch)
	if errors.Is(err, image.ErrNotFound) {
		skipOrFail(t, "no "+string(arch)+" minimal image in "+h+": build it on Linux with `airlock image build --arch "+
			string(arch)+" minimal` and copy its images/ folder here (CI: the guest-images artifact)")
	}
	if err != nil {
		t.Fatal(err)
	}
	b := &booted{
		spec: vm.Spec{
			Name: "vz-test", Arch: arch,
			Kernel: im.Kernel, Initrd: im.Initrd, Cmdline: im.Cmdline,
			Link:     vm.Link{Kind: vm.LinkVsock, Port: guest.VsockPort},
			StateDir: t.TempDir(),
		},
		backend: vz.New(vz.Config{Notice: func(s string) { t.Log(s) }}),
	}
	start := time.Now()
	b.m, err = b.backend.Start(ctx, b.spec)
	if err != nil {
		switch msg := err.Error(); {
		case strings.Contains(msg, "com.apple.security.virtualization"):
			skipOrFail(t, "the test binary lacks the virtualization entitlement: run go test -exec \"$PWD/packaging/codesign-exec\": "+msg)
		case strings.Contains(msg, "not available on this hardware"):
			skipOrFail(t, "this Mac cannot run VMs (a VM itself, without nested virtualization, like GitHub's hosted arm64 runners): "+msg)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { b.m.Stop(context.Background()) })
	if k := b.m.LinkKind(); k != vm.LinkVsock {
		t.Errorf("LinkKind = %q, want vsock", k)
	}
	if b.id, err = client.NewIdentity(b.spec.Name); err != nil {
		t.Fatal(err)
	}
	b.c = connect(t, ctx, b.m, b.id, false)
	t.Logf("boot to agent: %v", time.Since(start).Round(time.Millisecond))
	return b
}

// connect connects to the guest agent; resume is false for a guest's
// first contact and true after (a restored guest keeps its identity).
func connect(t *testing.T, ctx context.Context, m vm.Machine, id client.Identity, resume bool) *client.Client {
	t.Helper()
	c, err := client.Connect(ctx, m.DialLink, client.Config{Identity: id, Resume: resume})
	if err != nil {
		console, _ := os.ReadFile(m.ConsoleLog())
		t.Fatalf("connect to the guest agent: %v\nconsole:\n%s", err, console)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func run(t *testing.T, ctx context.Context, c *client.Client, script string) string {
	t.Helper()
	var out bytes.Buffer
	if err := c.Run(ctx, client.Command{Script: script, Stdout: &out}); err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	return strings.TrimSpace(out.String())
}

func powerOff(t *testing.T, ctx context.Context, c *client.Client, m vm.Machine) {
	t.Helper()
	if err := c.PowerOff(ctx); err != nil {
		t.Errorf("power off: %v", err)
	}
	if err := m.Wait(); err != nil {
		t.Errorf("Wait after power-off: %v", err)
	}
	if s := m.State(); s != vm.StateStopped {
		t.Errorf("State = %v after Wait, want stopped", s)
	}
}

// TestBootAndRun boots the minimal image, runs a command over the vsock
// link through the guest agent, and powers the guest off.
func TestBootAndRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b := bootMinimal(t, ctx)
	want := map[vm.Arch]string{vm.ARM64: "aarch64", vm.AMD64: "x86_64"}[b.spec.Arch]
	if got := run(t, ctx, b.c, "uname -m"); got != want {
		t.Errorf("uname -m = %q, want %q", got, want)
	}
	powerOff(t, ctx, b.c, b.m)
}

// TestSaveRestore saves a running machine, stops it, restores it from the
// file and finds the guest as it was (Apple silicon, macOS 14 or later).
func TestSaveRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	b := bootMinimal(t, ctx)
	run(t, ctx, b.c, "echo before-save > /tmp/marker")
	state := filepath.Join(t.TempDir(), "machine.state")
	err := b.m.(vm.Snapshotter).Save(ctx, state)
	if errors.Is(err, vm.ErrNotSupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := b.m.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	b.c.Close()

	m, err := vm.Restorer(b.backend).Restore(ctx, b.spec, state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	if s := m.State(); s != vm.StateRunning {
		t.Errorf("State after Restore = %v, want running", s)
	}
	// The restored guest already has its identity: a resume, not a first
	// contact.
	c := connect(t, ctx, m, b.id, true)
	if got := run(t, ctx, c, "cat /tmp/marker"); got != "before-save" {
		t.Errorf("/tmp/marker after restore = %q, want before-save", got)
	}
	powerOff(t, ctx, c, m)
}
