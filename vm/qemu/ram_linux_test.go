package qemu

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/vm"
)

// initFill says READY on the link and answers each line: "fill" writes
// 64 MiB into a file of the guest's RAM-backed root (guest memory the
// host's copy of it must take in private pages), anything else is echoed.
// A counter on the console shows the guest runs.
const initFill = initPrologue + powerButton + `(i=0; while :; do i=$((i+1)); echo "TICK $i"; sleep 0.1; done) &
exec 3<>$port; echo READY >&3
while :; do
  while read -r l <&3; do
    case "$l" in
    fill) yes airlock | head -c 67108864 >/fill; echo FILLED >&3;;
    *) echo "$l" >&3;;
    esac
  done
  sleep 0.2
done
`

// memUse is a QEMU process's memory as /proc says, in bytes.
type memUse struct {
	RSS, Anon, File, Shmem int64 // status: VmRSS, RssAnon, RssFile, RssShmem
	PSS                    int64 // smaps_rollup: Pss, shared pages split between their users
}

// private is the memory only this process holds: its anonymous and
// shared-memory pages (the guest RAM of a booted machine is a memfd).
func (u memUse) private() int64 { return u.Anon + u.Shmem }

func (u memUse) String() string {
	return fmt.Sprintf("RSS %d MiB (anon %d, file %d, shmem %d), PSS %d MiB", u.RSS>>20, u.Anon>>20, u.File>>20, u.Shmem>>20, u.PSS>>20)
}

// readMemUse reads the memory use of machine m's QEMU.
func readMemUse(t testing.TB, m vm.Machine) memUse {
	t.Helper()
	pid := m.(*machine).cmd.Process.Pid
	var u memUse
	fields := map[string]*int64{"VmRSS:": &u.RSS, "RssAnon:": &u.Anon, "RssFile:": &u.File, "RssShmem:": &u.Shmem, "Pss:": &u.PSS}
	for _, f := range []string{"status", "smaps_rollup"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			w := strings.Fields(l)
			if len(w) == 3 && w[2] == "kB" {
				if p, ok := fields[w[0]]; ok {
					n, _ := strconv.ParseInt(w[1], 10, 64)
					*p = n << 10
				}
			}
		}
	}
	if u.RSS == 0 {
		t.Fatalf("no VmRSS for qemu %d", pid)
	}
	return u
}

// allocated is the disk space a file takes (its blocks, not its size).
func allocated(t testing.TB, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func fileHash(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// ask sends line over a new link connection and returns the answer.
func ask(t testing.TB, m vm.Machine, line string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := m.DialLink(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	io.WriteString(c, line+"\n")
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("answer to %q: %v", line, err)
	}
	return strings.TrimSpace(got)
}

// restoreAs restores the state at path into a machine of its own: spec
// with another name and state dir.
func restoreAs(t testing.TB, b *Backend, spec vm.Spec, path, name string) vm.Machine {
	t.Helper()
	spec.Name, spec.StateDir = name, t.TempDir()
	r, err := b.Restore(t.Context(), spec, path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRestoreMapsRAM checks that a restored machine holds only the memory
// it uses: its RAM is the saved RAM file mapped private, not a copy of it.
// It also checks that the file never changes, while machines restored from
// it run side by side and write to their memory.
func TestRestoreMapsRAM(t *testing.T) {
	v := needVM(t)
	spec := v.spec(t, initFill)
	spec.MemoryMiB = 2048
	b := testBackend(t)
	m, err := b.Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer stopMachine(m)
	waitReady(t, m)
	cold := readMemUse(t, m)
	t.Logf("cold-booted: %s", cold)

	state := filepath.Join(t.TempDir(), "state")
	if err := m.(vm.Snapshotter).Save(t.Context(), state); err != nil {
		t.Fatal(err)
	}
	stopMachine(m)
	saved, err := ReadSaved(state)
	if err != nil {
		t.Fatal(err)
	}
	ram := state + RAMSuffix
	fi, err := os.Stat(ram)
	if err != nil || !saved.RAMFile {
		t.Fatalf("saved RAM file: %v (recorded %v)", err, saved.RAMFile)
	}
	sfi, _ := os.Stat(state)
	ramUsed := allocated(t, ram)
	t.Logf("saved: state %d KiB, RAM file %d MiB holding %d MiB", sfi.Size()>>10, fi.Size()>>20, ramUsed>>20)
	if fi.Size() != int64(spec.MemoryMiB)<<20 {
		t.Errorf("RAM file is %d bytes, want the guest's %d MiB", fi.Size(), spec.MemoryMiB)
	}
	if ramUsed > fi.Size()/4 {
		t.Errorf("RAM file takes %d MiB on disk; the guest used far less of its %d MiB (holes for untouched pages)", ramUsed>>20, spec.MemoryMiB)
	}
	if sfi.Size() > 16<<20 {
		t.Errorf("state is %d MiB: the RAM went into the stream", sfi.Size()>>20)
	}
	before := fileHash(t, ram)

	// Two machines from the same file at once.
	r1 := restoreAs(t, b, spec, state, "r1")
	defer stopMachine(r1)
	r2 := restoreAs(t, b, spec, state, "r2")
	defer stopMachine(r2)
	for _, r := range []vm.Machine{r1, r2} {
		if got := ask(t, r, "hello"); got != "hello" {
			t.Fatalf("restored guest answered %q", got)
		}
	}
	restored := readMemUse(t, r1)
	t.Logf("restored: %s", restored)
	if limit := cold.RSS * 12 / 10; restored.RSS > limit {
		t.Errorf("restored machine holds %d MiB, over 1.2x the %d MiB of the cold-booted one", restored.RSS>>20, cold.RSS>>20)
	}
	if restored.RSS > int64(spec.MemoryMiB)<<20/4 {
		t.Errorf("restored machine holds %d MiB of a %d MiB guest", restored.RSS>>20, spec.MemoryMiB)
	}
	// Its guest RAM is mapped, not copied into private memory: what it
	// holds privately is less than what the guest had used.
	if p := restored.private(); p > ramUsed*3/4 {
		t.Errorf("restored machine holds %d MiB privately, the saved RAM is %d MiB: the restore copied it", p>>20, ramUsed>>20)
	}

	// A guest that writes its memory writes private copies: the file and
	// the other machine stay as they were.
	if got := ask(t, r1, "fill"); got != "FILLED" {
		t.Fatalf("fill: %q", got)
	}
	filled := readMemUse(t, r1)
	t.Logf("after writing 64 MiB: %s", filled)
	if filled.private() < restored.private()+48<<20 {
		t.Errorf("writing 64 MiB grew private memory from %d to %d MiB", restored.private()>>20, filled.private()>>20)
	}
	if got := ask(t, r2, "still here"); got != "still here" {
		t.Errorf("the other restored guest answered %q", got)
	}
	var wg sync.WaitGroup
	for _, r := range []vm.Machine{r1, r2} {
		wg.Add(1)
		go func() { defer wg.Done(); stopMachine(r) }()
	}
	wg.Wait()
	if after := fileHash(t, ram); after != before {
		t.Fatal("the saved RAM file changed while restored machines ran")
	}
	// And it restores again, as saved.
	r3 := restoreAs(t, b, spec, state, "r3")
	defer stopMachine(r3)
	if got := ask(t, r3, "again"); got != "again" {
		t.Errorf("third restore answered %q", got)
	}
}

// BenchmarkRestoreMemory prints the memory of an idle restored machine
// beside that of an idle cold-booted one, same guest and size, same run,
// and what four machines restored from one state hold together (RSS
// counts the pages they share once per machine; PSS splits them).
func BenchmarkRestoreMemory(b *testing.B) {
	v := needVM(b)
	spec := v.spec(b, initFill)
	spec.MemoryMiB = 2048
	backend := New(Config{Accel: testAccel()})
	idle := func() { time.Sleep(2 * time.Second) }
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	for b.Loop() {
		m, err := backend.Start(b.Context(), spec)
		if err != nil {
			b.Fatal(err)
		}
		if got := ask(b, m, "hello"); got != "READY" && got != "hello" {
			b.Fatalf("guest said %q", got)
		}
		idle()
		cold := readMemUse(b, m)
		state := filepath.Join(b.TempDir(), "state")
		if err := m.(vm.Snapshotter).Save(b.Context(), state); err != nil {
			b.Fatal(err)
		}
		stopMachine(m)

		r := restoreAs(b, backend, spec, state, "r")
		ask(b, r, "hello")
		idle()
		restored := readMemUse(b, r)
		stopMachine(r)

		var four memUse
		var ms []vm.Machine
		for i := range 4 {
			ms = append(ms, restoreAs(b, backend, spec, state, fmt.Sprintf("r%d", i)))
		}
		for _, m := range ms {
			ask(b, m, "hello")
		}
		idle()
		for _, m := range ms {
			u := readMemUse(b, m)
			four.RSS += u.RSS
			four.PSS += u.PSS
		}
		for _, m := range ms {
			stopMachine(m)
		}
		b.Logf("%d MiB guest: cold-booted %s; restored %s; 4 restored: RSS %d MiB, PSS %d MiB",
			spec.MemoryMiB, cold, restored, four.RSS>>20, four.PSS>>20)
		b.ReportMetric(mib(cold.RSS), "cold-rss-MiB")
		b.ReportMetric(mib(restored.RSS), "restored-rss-MiB")
		b.ReportMetric(float64(restored.RSS)/float64(cold.RSS), "restored/cold")
		b.ReportMetric(mib(four.RSS), "4-restored-rss-MiB")
		b.ReportMetric(mib(four.PSS), "4-restored-pss-MiB")
	}
}
