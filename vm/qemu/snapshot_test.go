package qemu

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/vm"
)

// TestSandboxArg: QEMU on Linux runs under its own seccomp filter, which
// forbids new processes (a restore reads its state through a descriptor);
// not on macOS, whose QEMU has none. The filter is no part of the saved
// machine: a state saved without it restores with it.
func TestSandboxArg(t *testing.T) {
	spec := vm.Spec{Name: "t1", Kernel: "/img/vmlinux", StateDir: "/s", Link: vm.Link{Kind: vm.LinkSerial}}.WithDefaults(vm.AMD64)
	for goos, want := range map[string]bool{"linux": true, "darwin": false} {
		args, err := Args(spec, Host{Accel: TCG, Arch: vm.AMD64, OS: goos})
		if err != nil {
			t.Fatal(err)
		}
		i := slices.Index(args, "-sandbox")
		if got := i >= 0 && args[i+1] == Sandbox && strings.Contains(Sandbox, "spawn=deny"); got != want {
			t.Errorf("%s: -sandbox %s in %q", goos, map[bool]string{true: "wanted", false: "not wanted"}[want], args)
		}
		if goos == "linux" {
			without := slices.Delete(slices.Clone(args), i, i+2)
			if !slices.Equal(migrationArgs(args), migrationArgs(without)) {
				t.Errorf("the filter counts in the saved machine's command line")
			}
		}
	}
}

func TestRestoreArgs(t *testing.T) {
	spec := vm.Spec{Name: "t1", Kernel: "/img/vmlinux", Initrd: "/img/initrd", Cmdline: "panic=-1", StateDir: "/s",
		Link: vm.Link{Kind: vm.LinkSerial}}.WithDefaults(vm.AMD64)
	host := Host{Accel: TCG, Arch: vm.AMD64, OS: "linux", QBoot: "/q/qboot.rom"}
	args, err := Args(spec, host)
	if err != nil {
		t.Fatal(err)
	}
	saved := SavedMachine{Version: savedVersion, Accel: TCG, Arch: vm.AMD64, QBoot: "/q/qboot.rom", Args: args}

	got, gotHost, err := RestoreArgs(spec, saved, "/s/state", 0, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if want := append(append([]string(nil), args...), "-incoming", "defer"); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("RestoreArgs =\n%q\nwant\n%q", got, want)
	}
	if gotHost != host {
		t.Errorf("host = %+v, want %+v", gotHost, host)
	}

	// A vsock machine restores with a new cid.
	vspec := spec
	vspec.Link = vm.Link{Kind: vm.LinkVsock, Port: 1024}
	vhost := host
	vhost.Vsock, vhost.CID = true, 77
	vargs, err := Args(vspec, vhost)
	if err != nil {
		t.Fatal(err)
	}
	vsaved := saved
	vsaved.Vsock, vsaved.Args = true, vargs
	got, gotHost, err = RestoreArgs(vspec, vsaved, "/s/state", 1234, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if gotHost.CID != 1234 || !strings.Contains(strings.Join(got, " "), "guest-cid=1234") {
		t.Errorf("vsock restore: cid %d, args %q; want cid 1234", gotHost.CID, got)
	}

	// Another run directory, name and disk file restore: the stream does
	// not depend on them. Another disk count or a read-only disk does.
	dspec := spec
	dspec.Disks = []vm.Disk{{Path: "/warm/disk,1.img"}}
	dargs, err := Args(dspec, host)
	if err != nil {
		t.Fatal(err)
	}
	dsaved := saved
	dsaved.Args = dargs
	moved := dspec
	moved.Name, moved.StateDir, moved.Disks = "t2", "/run/other", []vm.Disk{{Path: "/sandboxes/x/disk.img"}}
	if got, _, err = RestoreArgs(moved, dsaved, "/s/state", 0, "linux"); err != nil {
		t.Errorf("restore into another run dir with another disk file: %v", err)
	} else if j := strings.Join(got, " "); !strings.Contains(j, "file=/sandboxes/x/disk.img") || !strings.Contains(j, "file,id=console,path=/dev/fd/5") {
		t.Errorf("restore args keep the saved paths: %q", got)
	}
	// A machine saved when QEMU wrote the console log itself (its path on
	// the command line) restores into the console pipe.
	fileSaved := dsaved
	fileSaved.Args = slices.Clone(dargs)
	for i, a := range fileSaved.Args {
		if strings.HasPrefix(a, "file,id=console,") {
			fileSaved.Args[i] = "file,id=console,path=/run/t1/console.log"
		}
	}
	if _, _, err := RestoreArgs(moved, fileSaved, "/s/state", 0, "linux"); err != nil {
		t.Errorf("restore a machine saved with a console file: %v", err)
	}
	for name, change := range map[string]func(*vm.Spec){
		"read-only disk": func(s *vm.Spec) { s.Disks = []vm.Disk{{Path: "/d", ReadOnly: true}} },
		"no disk":        func(s *vm.Spec) { s.Disks = nil },
		"two disks":      func(s *vm.Spec) { s.Disks = []vm.Disk{{Path: "/d"}, {Path: "/e"}} },
		"qcow2 disk":     func(s *vm.Spec) { s.Disks = []vm.Disk{{Path: "/d", Format: "qcow2"}} },
		"kernel":         func(s *vm.Spec) { s.Kernel = "/other/vmlinux" },
		"cmdline":        func(s *vm.Spec) { s.Cmdline += " airlock.disk=vda:/workspace" },
	} {
		c := dspec
		change(&c)
		if _, _, err := RestoreArgs(c, dsaved, "/s/state", 0, "linux"); err == nil {
			t.Errorf("%s: restore accepted", name)
		}
	}

	// A booted machine's shared RAM, saved to a file, restores mapped
	// private from the file beside the state; a state with its RAM in the
	// stream restores into anonymous memory.
	mhost := host
	mhost.Memory = Memory{Shared: true}
	margs, err := Args(spec, mhost)
	if err != nil {
		t.Fatal(err)
	}
	msaved := saved
	msaved.Args, msaved.RAMFile = margs, true
	got, gotHost, err = RestoreArgs(spec, msaved, "/w/a,b/state", 0, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if gotHost.Memory != (Memory{File: "/w/a,b/state.ram"}) || !slices.Contains(got, "memory-backend-file,id=mem,size=512M,mem-path=/w/a,,b/state.ram,share=off") {
		t.Errorf("restore of a RAM file: memory %+v, args %q", gotHost.Memory, got)
	}
	msaved.RAMFile = false
	if got, gotHost, err = RestoreArgs(spec, msaved, "/w/state", 0, "linux"); err != nil {
		t.Fatal(err)
	} else if gotHost.Memory != (Memory{}) || !slices.Contains(got, "memory-backend-ram,id=mem,size=512M") {
		t.Errorf("restore of a stream: memory %+v, args %q", gotHost.Memory, got)
	}
	// The size of the RAM is not masked.
	big := spec
	big.MemoryMiB = 1024
	if _, _, err := RestoreArgs(big, msaved, "/w/state", 0, "linux"); err == nil {
		t.Error("a restore with more RAM than the saved machine accepted")
	}

	// Another spec, format or shares: refused, saying why.
	other := spec
	other.MemoryMiB = spec.MemoryMiB * 2
	if _, _, err := RestoreArgs(other, saved, "/s/state", 0, "linux"); err == nil || !strings.Contains(err.Error(), "does not describe the saved machine") {
		t.Errorf("other memory size: %v", err)
	}
	for _, v := range []int{0, 1, savedVersion + 1} {
		// Version 1 had the RAM in the stream, without x-ignore-shared:
		// its stream does not load into this format.
		old := saved
		old.Version = v
		if _, _, err := RestoreArgs(spec, old, "/s/state", 0, "linux"); err == nil || !strings.Contains(err.Error(), "save the machine again") {
			t.Errorf("format %d: %v, want a refusal saying to save again", v, err)
		}
	}
	shared := spec
	shared.Shares = []vm.Share{{Tag: "w", HostPath: "/w"}}
	if _, _, err := RestoreArgs(shared, saved, "/s/state", 0, "linux"); !errors.Is(err, vm.ErrNotSupported) || !strings.Contains(err.Error(), "virtio-fs") {
		t.Errorf("shares: %v, want ErrNotSupported naming virtio-fs", err)
	}
}

func TestSaveWithSharesNotSupported(t *testing.T) {
	m := &machine{name: "t", spec: vm.Spec{Shares: []vm.Share{{Tag: "w", HostPath: "/w"}}}}
	err := m.Save(t.Context(), filepath.Join(t.TempDir(), "state"))
	if !errors.Is(err, vm.ErrNotSupported) || !strings.Contains(err.Error(), "virtio-fs") {
		t.Errorf("Save = %v, want ErrNotSupported naming virtio-fs", err)
	}
}

// initCounter says READY on the link, echoes it, and prints a counter on
// the console every 100 ms, so a restored guest shows it runs. The guest
// reads EOF from the port whenever the host side disconnects, so the echo
// starts again after each connection.
const initCounter = initPrologue + powerButton + `(i=0; while :; do i=$((i+1)); echo "TICK $i"; sleep 0.1; done) &
exec 3<>$port; echo READY >&3; while :; do cat <&3 >&3; echo CAT-ENDED; sleep 0.2; done
`

// qmpStatus is the run state QEMU reports (query-status).
func qmpStatus(t testing.TB, m vm.Machine) string {
	t.Helper()
	qm := m.(*machine)
	qm.mu.Lock()
	q := qm.qmp
	qm.mu.Unlock()
	if q == nil {
		t.Fatal("no QMP connection")
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := q.call(t.Context(), "query-status", nil, &st); err != nil {
		t.Fatal(err)
	}
	return st.Status
}

// lastTick is the highest TICK the console log shows.
func lastTick(path string) int {
	b, _ := os.ReadFile(path)
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		var i int
		if _, err := fmt.Sscanf(strings.TrimSpace(l), "TICK %d", &i); err == nil && i > n {
			n = i
		}
	}
	return n
}

func stopMachine(m vm.Machine) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m.Stop(ctx)
	m.Wait()
}

func TestSaveRestore(t *testing.T) {
	v := needVM(t)
	spec := v.spec(t, initCounter)
	b := testBackend(t)
	m, err := b.Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer stopMachine(m)
	waitReady(t, m)

	state := filepath.Join(t.TempDir(), "state")
	start := time.Now()
	if err := m.(vm.Snapshotter).Save(t.Context(), state); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(state)
	t.Logf("save: %v, %d MiB", time.Since(start).Round(time.Millisecond), fi.Size()>>20)
	if s, qs := m.State(), qmpStatus(t, m); s != vm.StateRunning || qs != "running" {
		t.Errorf("after Save: State %v, QEMU %q; want running", s, qs)
	}
	if err := m.(vm.Snapshotter).Save(t.Context(), state); err == nil {
		t.Error("Save over an existing state succeeded")
	}
	// A paused machine stays paused through a save, and resumes.
	p := m.(vm.Pauser)
	if err := p.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := m.(vm.Snapshotter).Save(t.Context(), state+"2"); err != nil {
		t.Fatal(err)
	}
	if s, qs := m.State(), qmpStatus(t, m); s != vm.StatePaused || qs != "postmigrate" {
		t.Errorf("after saving a paused machine: State %v, QEMU %q; want paused, postmigrate", s, qs)
	}
	if err := p.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if qs := qmpStatus(t, m); qs != "running" {
		t.Errorf("resumed after a save: QEMU %q", qs)
	}
	stopMachine(m)
	ticks := lastTick(m.ConsoleLog())

	// Restore into a fresh machine with the same spec; the console log is
	// appended to by a new QEMU, so start it empty.
	os.Remove(m.ConsoleLog())
	start = time.Now()
	r, err := vm.Restorer(b).Restore(t.Context(), spec, state)
	if err != nil {
		t.Fatal(err)
	}
	defer stopMachine(r)
	t.Logf("restore to running: %v", time.Since(start).Round(time.Millisecond))
	if s, qs := r.State(), qmpStatus(t, r); s != vm.StateRunning || qs != "running" {
		t.Errorf("restored: State %v, QEMU %q; want running", s, qs)
	}
	// The guest goes on counting where the saved one was.
	deadline := time.Now().Add(30 * time.Second)
	for lastTick(r.ConsoleLog()) < ticks+5 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := lastTick(r.ConsoleLog()); n < ticks+5 {
		t.Errorf("restored guest counts to %d, want past %d; console: %q", n, ticks+5, vm.TailConsole(r.ConsoleLog(), 5))
	}
	// The serial link: the guest's cat still has the port open.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := r.DialLink(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, "after restore\n")
	if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != "after restore\n" {
		t.Errorf("link echo after restore = %q, %v", got, err)
	}
	c.Close()

	// The restored machine powers off as usual.
	sctx, scancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer scancel()
	r.Stop(sctx)
	if err := r.Wait(); err != nil {
		t.Errorf("Wait after Stop of the restored machine: %v", err)
	}
	checkGone(t, r, spec)
}

// BenchmarkSaveRestore compares a cold boot to a guest that answers on the
// link with a restore to a guest that answers, in the same run.
func BenchmarkSaveRestore(b *testing.B) {
	v := needVM(b)
	spec := v.spec(b, initCounter)
	backend := New(Config{Accel: testAccel()})
	answer := func(m vm.Machine, hello bool) {
		ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
		defer cancel()
		c, err := m.DialLink(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Minute))
		r := bufio.NewReader(c)
		if hello {
			if l, err := r.ReadString('\n'); err != nil || l != "READY\n" {
				b.Fatalf("guest said %q, %v", l, err)
			}
		}
		io.WriteString(c, "ping\n")
		if l, err := r.ReadString('\n'); err != nil || l != "ping\n" {
			b.Fatalf("echo %q, %v", l, err)
		}
	}
	state := filepath.Join(b.TempDir(), "state")
	var cold, restore, save time.Duration
	n := 0
	for b.Loop() {
		start := time.Now()
		m, err := backend.Start(b.Context(), spec)
		if err != nil {
			b.Fatal(err)
		}
		answer(m, true)
		cold += time.Since(start)
		start = time.Now()
		if err := m.(vm.Snapshotter).Save(b.Context(), state); err != nil {
			b.Fatal(err)
		}
		save += time.Since(start)
		stopMachine(m)

		start = time.Now()
		r, err := backend.Restore(b.Context(), spec, state)
		if err != nil {
			b.Fatal(err)
		}
		answer(r, false)
		restore += time.Since(start)
		stopMachine(r)
		os.Remove(state)
		os.Remove(state + SavedSuffix)
		os.Remove(state + RAMSuffix)
		n++
	}
	b.ReportMetric(float64(cold.Milliseconds())/float64(n), "cold-ms/op")
	b.ReportMetric(float64(save.Milliseconds())/float64(n), "save-ms/op")
	b.ReportMetric(float64(restore.Milliseconds())/float64(n), "restore-ms/op")
}
