//go:build darwin && cgo

package vz_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/guest"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/internal/testenv"
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

// TestBootAndRun boots the minimal image of this Mac's architecture under
// Virtualization.framework, runs a command over the vsock link through the
// guest agent, and powers the guest off.
//
// It needs the test binary signed with the virtualization entitlement
// (go test -exec packaging/codesign-exec), a Mac that can run VMs (not a
// GitHub-hosted arm64 runner: no nested virtualization there), and the
// minimal image in $AIRLOCK_TEST_HOME: images are built on Linux
// (airlock image build --arch arm64 minimal) and copied over, since
// apt-get is not on a Mac.
func TestBootAndRun(t *testing.T) {
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

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	spec := vm.Spec{
		Name: "vz-boot-test", Arch: arch,
		Kernel: im.Kernel, Initrd: im.Initrd, Cmdline: im.Cmdline,
		Link:     vm.Link{Kind: vm.LinkVsock, Port: guest.VsockPort},
		StateDir: t.TempDir(),
	}
	start := time.Now()
	m, err := vz.New(vz.Config{Notice: func(s string) { t.Log(s) }}).Start(ctx, spec)
	if err != nil {
		switch msg := err.Error(); {
		case strings.Contains(msg, "com.apple.security.virtualization"):
			skipOrFail(t, "the test binary lacks the virtualization entitlement: run go test -exec \"$PWD/packaging/codesign-exec\": "+msg)
		case strings.Contains(msg, "not available on this hardware"):
			skipOrFail(t, "this Mac cannot run VMs (a VM itself, without nested virtualization, like GitHub's hosted arm64 runners): "+msg)
		}
		t.Fatal(err)
	}
	defer m.Stop(context.Background())
	if k := m.LinkKind(); k != vm.LinkVsock {
		t.Errorf("LinkKind = %q, want vsock", k)
	}

	id, err := client.NewIdentity(spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Connect(ctx, m.DialLink, client.Config{Identity: id})
	if err != nil {
		console, _ := os.ReadFile(m.ConsoleLog())
		t.Fatalf("connect to the guest agent: %v\nconsole:\n%s", err, console)
	}
	defer c.Close()
	t.Logf("boot to agent: %v", time.Since(start).Round(time.Millisecond))

	var out bytes.Buffer
	if err := c.Run(ctx, client.Command{Args: []string{"uname", "-m"}, Stdout: &out}); err != nil {
		t.Fatalf("uname -m: %v", err)
	}
	want := map[vm.Arch]string{vm.ARM64: "aarch64", vm.AMD64: "x86_64"}[arch]
	if got := strings.TrimSpace(out.String()); got != want {
		t.Errorf("uname -m = %q, want %q", got, want)
	}

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
