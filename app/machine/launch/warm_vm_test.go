package launch_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// warmHome is a home of its own holding a copy of the test image, so that
// the test may change the image's files.
func warmHome(t *testing.T) string {
	t.Helper()
	img := testenv.Image(t, vm.AMD64)
	home := t.TempDir()
	dst := image.Dir(home, img.Name, img.Arch)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", img.Dir+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("copy the image: %v\n%s", err, out)
	}
	return home
}

// workspaceDisk makes a sparse ext4 disk of size bytes, as a sandbox's.
func workspaceDisk(t *testing.T, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=1,root_owner=0:0", p).CombinedOutput(); err != nil {
		testenv.Skip(t, testenv.Mkfs, fmt.Sprintf("mkfs.ext4: %v\n%s", err, out))
	}
	return p
}

type notices struct {
	mu   sync.Mutex
	msgs []string
}

func (n *notices) add(s string) {
	n.mu.Lock()
	n.msgs = append(n.msgs, s)
	n.mu.Unlock()
}

func (n *notices) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.msgs, "\n")
}

// warmBoot boots with Warm set and a fresh workspace disk.
func warmBoot(t *testing.T, home string, o launch.Options) (*launch.Guest, *notices) {
	t.Helper()
	var n notices
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	o.Home, o.Arch, o.Backend, o.Notice = home, vm.AMD64, backend(t, home), n.add
	g, err := launch.Boot(ctx, o)
	if err != nil {
		t.Fatalf("boot: %v (notices: %s)", err, n.String())
	}
	t.Logf("ready in %s (warm %v); notices: %q", g.BootTime.Round(time.Millisecond), g.Warm, n.msgs)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return g, &n
}

func withDisk(t *testing.T) launch.Options {
	return launch.Options{Warm: true, Disks: []launch.Disk{{Path: workspaceDisk(t, 256<<20), Mount: "/workspace"}}}
}

func sh(t *testing.T, g *launch.Guest, script string) string {
	t.Helper()
	out, errOut, err := run(t, g, client.Command{Script: script})
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, errOut)
	}
	return strings.TrimSpace(out)
}

// TestWarmStart saves a warm snapshot on a first boot, restores two
// machines from it that answer at once and share no identity or random
// state, mount their own disks, and goes back to a cold boot when the
// image changed or when asked.
func TestWarmStart(t *testing.T) {
	testenv.SkipIfShort(t)
	home := warmHome(t)

	// First boot: no snapshot yet; it boots cold and saves one.
	g0, n0 := warmBoot(t, home, withDisk(t))
	if g0.Warm || !strings.Contains(n0.String(), "no warm snapshot") || !strings.Contains(n0.String(), "saving one") {
		t.Fatalf("first boot: warm %v, notices %q; want a cold boot that saves a snapshot", g0.Warm, n0.String())
	}
	if m := sh(t, g0, "grep ' /workspace ' /proc/mounts"); !strings.Contains(m, "ext4") || !g0.DisksMounted {
		t.Fatalf("first boot: /workspace not mounted at first contact (DisksMounted %v): %q", g0.DisksMounted, m)
	}
	recs, _ := filepath.Glob(filepath.Join(launch.WarmDir(home, "minimal", vm.AMD64), "*", "warm.json"))
	if len(recs) != 1 {
		t.Fatalf("warm records after the first boot: %q", recs)
	}

	// Two sandboxes restored from the one snapshot.
	type facts struct{ hostKey, hostname, uuid, random, disk string }
	var got []facts
	for i := range 2 {
		g, n := warmBoot(t, home, withDisk(t))
		if !g.Warm || n.String() != "" || !g.DisksMounted {
			t.Fatalf("restore %d: warm %v, disks mounted %v, notices %q; want a restore mounting the disk at first contact", i, g.Warm, g.DisksMounted, n.String())
		}
		sh(t, g, "echo sandbox"+string(rune('A'+i))+" > /workspace/mark")
		got = append(got, facts{
			hostKey:  g.Client.Welcome().HostKey,
			hostname: sh(t, g, "hostname"),
			uuid:     sh(t, g, "cat /proc/sys/kernel/random/uuid"),
			random:   sh(t, g, "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'"),
			disk:     sh(t, g, "grep ' /workspace ' /proc/mounts; ls -A /workspace; cat /workspace/mark"),
		})
	}
	a, b := got[0], got[1]
	t.Logf("restored: %+v\n%+v", a, b)
	if a.hostKey == b.hostKey || a.hostKey == g0.Client.Welcome().HostKey {
		t.Errorf("restored guests share a host key: %s", a.hostKey)
	}
	if a.hostname == b.hostname {
		t.Errorf("restored guests share the hostname %q", a.hostname)
	}
	if a.uuid == b.uuid || a.random == b.random || len(a.random) != 64 {
		t.Errorf("restored guests share random state: uuid %s / %s, urandom %s / %s", a.uuid, b.uuid, a.random, b.random)
	}
	for i, f := range got {
		want := "sandbox" + string(rune('A'+i))
		if !strings.Contains(f.disk, "ext4") || !strings.HasSuffix(f.disk, "mark\n"+want) && !strings.HasSuffix(f.disk, want) {
			t.Errorf("restore %d: workspace %q, want its own ext4 disk holding only mark=%s", i, f.disk, want)
		}
		if strings.Contains(f.disk, "lost+found") {
			t.Errorf("restore %d: lost+found left in the workspace: %q", i, f.disk)
		}
	}

	// A snapshot of another shape is another snapshot: no disk here.
	g1, n1 := warmBoot(t, home, launch.Options{Warm: true})
	if g1.Warm || !strings.Contains(n1.String(), "no warm snapshot") {
		t.Errorf("other shape: warm %v, notices %q; want a cold boot saving its own", g1.Warm, n1.String())
	}

	// The image's initrd rewritten: the snapshot is stale.
	img, err := image.Load(home, "minimal", vm.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(img.Initrd)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // a later modification time
	if err := os.WriteFile(img.Initrd, data, 0o644); err != nil {
		t.Fatal(err)
	}
	g2, n2 := warmBoot(t, home, withDisk(t))
	if g2.Warm || !strings.Contains(n2.String(), "initrd changed") {
		t.Errorf("changed image: warm %v, notices %q; want a cold boot saying the initrd changed", g2.Warm, n2.String())
	}
	g3, n3 := warmBoot(t, home, withDisk(t))
	if !g3.Warm || n3.String() != "" {
		t.Errorf("after the new snapshot: warm %v, notices %q; want a restore", g3.Warm, n3.String())
	}

	// Warm unset (airlock --cold): a cold boot, no notice.
	o := withDisk(t)
	o.Warm = false
	g4, n4 := warmBoot(t, home, o)
	if g4.Warm || n4.String() != "" || g4.DisksMounted {
		t.Errorf("cold: warm %v, disks mounted at first contact %v, notices %q", g4.Warm, g4.DisksMounted, n4.String())
	}
	if m := sh(t, g4, "grep ' /workspace ' /proc/mounts"); !strings.Contains(m, "ext4") {
		t.Errorf("cold boot: /workspace not mounted: %q", m)
	}
}

// TestWarmStartVirtiofsBootsCold: a machine with a virtio-fs share cannot
// be snapshotted; a warm boot of one says so and boots cold, and no
// snapshot is saved.
func TestWarmStartVirtiofsBootsCold(t *testing.T) {
	testenv.SkipIfShort(t)
	if _, err := os.Stat("/usr/lib/qemu/virtiofsd"); err != nil {
		testenv.Skip(t, testenv.Virtiofsd, fmt.Sprintf("no virtiofsd: %v", err))
	}
	home := warmHome(t)
	share := t.TempDir()
	if err := os.WriteFile(filepath.Join(share, "hello"), []byte("shared\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g, n := warmBoot(t, home, launch.Options{Warm: true,
		Shares: []launch.Share{{Share: vm.Share{Tag: "workspace", HostPath: share}, Mount: "/workspace"}}})
	if g.Warm || !strings.Contains(n.String(), "virtio-fs share (workspace)") || !strings.Contains(n.String(), "cannot be snapshotted") {
		t.Errorf("warm boot with a share: warm %v, notices %q; want a cold boot saying a virtio-fs machine cannot be snapshotted", g.Warm, n.String())
	}
	if got := sh(t, g, "cat /workspace/hello"); got != "shared" {
		t.Errorf("share: %q", got)
	}
	if recs, _ := filepath.Glob(filepath.Join(launch.WarmDir(home, "minimal", vm.AMD64), "*", "warm.json")); len(recs) != 0 {
		t.Errorf("a snapshot was saved of a machine with a share: %q", recs)
	}
}

// TestWarmStartFullImage: the full image boots from its own root disk, so
// its warm snapshot keeps that disk as it was when saved, and a restored
// sandbox boots a copy of it: the restored guest's root file system works
// (reads, writes, no ext4 errors), two restored sandboxes do not share
// what they write, and a sandbox whose root disk already holds an earlier
// round boots cold and says why.
func TestWarmStartFullImage(t *testing.T) {
	testenv.SkipIfShort(t)
	img := testenv.FullImage(t, vm.AMD64)
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "images", img.Name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(img.Dir, image.Dir(home, img.Name, img.Arch)); err != nil {
		t.Fatal(err)
	}
	roots := t.TempDir()
	full := func(root string) launch.Options {
		o := withDisk(t)
		o.Image, o.RootDisk = img.Name, filepath.Join(roots, root)
		return o
	}

	g0, n0 := warmBoot(t, home, full("0.img"))
	if g0.Warm || !strings.Contains(n0.String(), "saving one") {
		t.Fatalf("first boot: warm %v, notices %q; want a cold boot that saves a snapshot", g0.Warm, n0.String())
	}
	const check = "grep ' / ' /proc/mounts; echo sandbox > /home/agent/probe.txt && sync && cat /home/agent/probe.txt; node --version >/dev/null && echo node-ok; dmesg | grep -ci 'ext4.*error' || true"
	for _, name := range []string{"1.img", "2.img"} {
		g, n := warmBoot(t, home, full(name))
		if !g.Warm {
			t.Fatalf("%s: not restored; notices %q", name, n.String())
		}
		out := sh(t, g, "test ! -e /home/agent/probe.txt && echo fresh; "+check)
		for _, want := range []string{"fresh", "/dev/vda / ext4 rw", "sandbox", "node-ok"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s restored: %q lacks %q", name, out, want)
			}
		}
		if !strings.HasSuffix(out, "\n0") {
			t.Errorf("%s restored: ext4 errors in the kernel log: %q", name, out)
		}
		// Off before its disk boots again below.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("%s: shutdown: %v", name, err)
		}
		cancel()
	}

	// A later round of sandbox 1: its disk has moved on, so it boots cold,
	// and what the first round wrote is there.
	g3, n3 := warmBoot(t, home, full("1.img"))
	if g3.Warm || !strings.Contains(n3.String(), "earlier rounds") {
		t.Errorf("a later round: warm %v, notices %q; want a cold boot that says why", g3.Warm, n3.String())
	}
	if out := sh(t, g3, "cat /home/agent/probe.txt"); out != "sandbox" {
		t.Errorf("a later round: /home/agent/probe.txt = %q", out)
	}
	// On a root disk, Docker's modules came along from the initramfs.
	checkDockerKernel(t, g3)
}

// TestColdBootKeepsWarmSnapshot alternates cold and warm boots of one
// machine shape: a cold boot asked for (Warm unset, airlock --cold) and one
// that must be cold (a virtio-fs share) leave the current snapshot alone,
// so every warm boot after them restores it, and its files are the ones
// the first boot saved (not rewritten, not replaced).
func TestColdBootKeepsWarmSnapshot(t *testing.T) {
	testenv.SkipIfShort(t)
	home := warmHome(t)
	shutdown := func(g *launch.Guest) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}

	g0, n0 := warmBoot(t, home, withDisk(t))
	if g0.Warm || !strings.Contains(n0.String(), "saving one") {
		t.Fatalf("first boot: warm %v, notices %q; want a cold boot that saves a snapshot", g0.Warm, n0.String())
	}
	shutdown(g0)
	recs, _ := filepath.Glob(filepath.Join(launch.WarmDir(home, "minimal", vm.AMD64), "*", "warm.json"))
	if len(recs) != 1 {
		t.Fatalf("warm records after the first boot: %q", recs)
	}
	dir := filepath.Dir(recs[0])
	snap := snapshotFiles(t, dir)

	_, virtiofsErr := os.Stat("/usr/lib/qemu/virtiofsd")
	for round := range 3 {
		o := withDisk(t)
		o.Warm = false
		g, n := warmBoot(t, home, o)
		if g.Warm || n.String() != "" {
			t.Errorf("round %d, cold: warm %v, notices %q; want a cold boot that says nothing", round, g.Warm, n.String())
		}
		shutdown(g)
		if round == 1 && virtiofsErr == nil {
			// A boot that must be cold: a machine with a share.
			g, n := warmBoot(t, home, launch.Options{Warm: true,
				Shares: []launch.Share{{Share: vm.Share{Tag: "workspace", HostPath: t.TempDir()}, Mount: "/workspace"}}})
			if g.Warm || !strings.Contains(n.String(), "virtio-fs share") {
				t.Errorf("round %d, share: warm %v, notices %q; want a cold boot that says why", round, g.Warm, n.String())
			}
			shutdown(g)
		}
		if got := snapshotFiles(t, dir); got != snap {
			t.Fatalf("round %d: the cold boot touched the warm snapshot:\nbefore %s\nafter  %s", round, snap, got)
		}
		g, n = warmBoot(t, home, withDisk(t))
		if !g.Warm || n.String() != "" {
			t.Fatalf("round %d, warm after cold: warm %v in %s, notices %q; want a restore of the first boot's snapshot",
				round, g.Warm, g.BootTime, n.String())
		}
		if got := sh(t, g, "grep ' /workspace ' /proc/mounts"); !strings.Contains(got, "ext4") {
			t.Errorf("round %d, restored: /workspace not mounted: %q", round, got)
		}
		shutdown(g)
		if got := snapshotFiles(t, dir); got != snap {
			t.Fatalf("round %d: a restore rewrote the warm snapshot:\nbefore %s\nafter  %s", round, snap, got)
		}
	}
}

// snapshotFiles describes the files of a warm snapshot's directory: name,
// inode, size and modification time of each, and the record's content.
func snapshotFiles(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		var ino uint64
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = st.Ino
		}
		fmt.Fprintf(&b, "%s ino %d size %d mtime %d; ", e.Name(), ino, fi.Size(), fi.ModTime().UnixNano())
	}
	rec, err := os.ReadFile(filepath.Join(dir, "warm.json"))
	if err != nil {
		t.Fatal(err)
	}
	b.Write(rec)
	return b.String()
}
