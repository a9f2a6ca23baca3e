package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// isolateUserConfig points the user configuration at an empty directory,
// so a developer's own config.toml does not change what a test gets.
func isolateUserConfig(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
}

// execJSON runs airlock exec --json and decodes its result.
func execJSON(t *testing.T, home string, args ...string) execResult {
	t.Helper()
	code, out, errOut := airlockCLI(t, home, append([]string{"exec", "--json", "--arch", "amd64"}, args...)...)
	var res execResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("exec %q: exit %d, %v\nstdout:\n%s\nstderr:\n%s", args, code, err, out, errOut)
	}
	return res
}

// TestCPUsAndMemory boots VMs with --cpus and --memory and checks what
// the guest sees: memory is limited by the host's only (8 GiB, past the
// 4 GiB below the PCI hole, on a host that has it), and more than the
// host has is refused before anything boots.
func TestCPUsAndMemory(t *testing.T) {
	testenv.SkipIfShort(t)
	isolateUserConfig(t)
	home := testenv.VMHome(t)
	tests := []struct {
		cpus, memory string
		wantCPUs     int
		wantMiB      int
		cold         bool // no warm snapshot of its RAM saved
	}{
		{"1", "512M", 1, 512, false},
		{"2", "768M", 2, 768, false},
	}
	if host := plan.HostMemory(); host >= 10<<30 {
		tests = append(tests, struct {
			cpus, memory string
			wantCPUs     int
			wantMiB      int
			cold         bool
		}{"1", "8GiB", 1, 8192, true})
	} else {
		t.Logf("this host has %d MiB: no 8 GiB machine", host>>20)
	}
	past := strconv.FormatInt(plan.HostMemory()>>20+1024, 10) // MiB
	start := time.Now()
	code, out, errOut := airlockCLI(t, home, "exec", "--arch", "amd64", "--memory", past, "--", "true")
	if code == 0 || !strings.Contains(errOut, "is more than this host has") {
		t.Errorf("--memory %s MiB, past the host's: exit %d\n%s%s", past, code, out, errOut)
	}
	t.Logf("refused --memory %s in %s", past, time.Since(start).Round(time.Millisecond))
	for _, tt := range tests {
		args := []string{"--cpus", tt.cpus, "--memory", tt.memory}
		if tt.cold {
			args = append(args, "--cold")
		}
		start := time.Now()
		res := execJSON(t, home, append(args, "--", "sh", "-c", "nproc; sed -n 's/^MemTotal: *\\([0-9]*\\) kB/\\1/p' /proc/meminfo")...)
		f := strings.Fields(res.Stdout)
		if res.ExitCode != 0 || len(f) != 2 {
			t.Fatalf("--cpus %s --memory %s: exit %d, stdout %q, stderr %q", tt.cpus, tt.memory, res.ExitCode, res.Stdout, res.Stderr)
		}
		cpus, _ := strconv.Atoi(f[0])
		kb, _ := strconv.Atoi(f[1])
		// MemTotal is the memory less what the kernel keeps for itself.
		if cpus != tt.wantCPUs || kb > tt.wantMiB*1024 || kb < tt.wantMiB*1024*3/4 {
			t.Errorf("--cpus %s --memory %s: the guest sees %d CPUs and %d kB; want %d CPUs and a little under %d MiB", tt.cpus, tt.memory, cpus, kb, tt.wantCPUs, tt.wantMiB)
		}
		t.Logf("--memory %s: %d kB in %s", tt.memory, kb, time.Since(start).Round(time.Millisecond))
	}
}

// TestOpenNetwork checks that the default VM has no network device and
// cannot reach a server on the host, and that --open-network gives it a
// device, an address (QEMU user networking) and a way to the host's
// 127.0.0.1 through 10.0.2.2.
func TestOpenNetwork(t *testing.T) {
	testenv.SkipIfShort(t)
	isolateUserConfig(t)
	home := testenv.VMHome(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from the host")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf("ls /sys/class/net; ifconfig 2>/dev/null | grep 'inet addr'; printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 10.0.2.2 %d | grep -q 'hello from the host' && echo HOST REACHED || echo UNREACHABLE", port)

	res := execJSON(t, home, "--", "sh", "-c", script)
	if res.Network != "none" || strings.Fields(res.Stdout)[0] != "lo" || !strings.Contains(res.Stdout, "UNREACHABLE") ||
		strings.Contains(res.Stdout, "HOST REACHED") {
		t.Errorf("default VM: network %q, stdout:\n%s\nwant only lo, and the host unreachable", res.Network, res.Stdout)
	}
	if strings.Fields(res.Stdout)[1] != "inet" {
		t.Errorf("default VM has more than lo:\n%s", res.Stdout)
	}

	res = execJSON(t, home, "--open-network", "--", "sh", "-c", script)
	if res.Network != "open" || !strings.Contains(res.Stdout, "eth0") || !strings.Contains(res.Stdout, "inet addr:10.0.2.15") ||
		!strings.Contains(res.Stdout, "HOST REACHED") {
		t.Errorf("open network: network %q, stdout:\n%s\nstderr:\n%s\nwant eth0 with 10.0.2.15 and the host reached", res.Network, res.Stdout, res.Stderr)
	}

	// Without --json, the warning is printed.
	code, _, errOut := airlockCLI(t, home, "exec", "--arch", "amd64", "--open-network", "--", "true")
	if code != 0 || !strings.Contains(errOut, "WARNING: open network") {
		t.Errorf("exec --open-network: exit %d, no warning:\n%s", code, errOut)
	}
}

// TestDiskQuota fills the workspace disk from inside a real VM: the
// command sees ENOSPC, the host's disk image never takes more than its
// size, and what the command kept is collected.
func TestDiskQuota(t *testing.T) {
	testenv.SkipIfShort(t)
	isolateUserConfig(t)
	home := testenv.VMHome(t)
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "README"), []byte("a project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const quota = 128 << 20
	agent := `echo kept > note.txt
dd if=/dev/zero of=fill.bin bs=1M count=300 2> dd.err
echo "dd exit $?" >> dd.err
df -k /workspace | tail -1 > df.txt
rm fill.bin
echo "written after the disk was full" > after.txt
`
	code, out, errOut := airlockCLI(t, home, "run", "--arch", "amd64", "--disk", "128M", "--project", project, "--", "sh", "-c", agent)
	if code != 0 {
		t.Fatalf("run: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	st, err := sandbox.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	list, err := st.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("sandboxes: %v, %v", list, err)
	}
	sb, err := st.Get(list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sb.Changeset(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range cs.Files {
		files[f.Path] = string(f.Status)
	}
	for _, p := range []string{"note.txt", "dd.err", "df.txt", "after.txt"} {
		if _, ok := files[p]; !ok {
			t.Errorf("%s was not collected; changes: %v", p, files)
		}
	}
	if _, ok := files["fill.bin"]; ok {
		t.Errorf("fill.bin was collected: %v", files)
	}
	if _, ok := files["lost+found"]; ok {
		t.Errorf("mkfs's lost+found shows up as a change: %v", files)
	}
	_, diff, _ := airlockCLI(t, home, "diff", sb.ID)
	if !strings.Contains(diff, "No space left on device") || strings.Contains(diff, "dd exit 0") {
		t.Errorf("dd past the quota did not fail with ENOSPC; the diff:\n%s", diff)
	}
	evs, err := sb.ReadAudit()
	if err != nil {
		t.Fatal(err)
	}
	var disk map[string]any
	for _, e := range evs {
		if e.Event == sandbox.EventDisk {
			disk, _ = e.Data.(map[string]any)
		}
	}
	size, _ := disk["size_bytes"].(float64)
	used, _ := disk["allocated_bytes"].(float64)
	if size != quota || used <= 0 || used > quota {
		t.Errorf("workspace disk on the host: size %v, allocated %v; want %d and at most that", size, used, quota)
	}
	if _, err := os.Stat(sb.Path(pipeline.DiskFile)); !os.IsNotExist(err) {
		t.Errorf("the workspace disk was kept after the run: %v", err)
	}
	meta, err := sb.Meta()
	if err != nil {
		t.Fatal(err)
	}
	if meta.Limits == nil || meta.Limits.Disk != quota || meta.Network != sandbox.NetworkNone {
		t.Errorf("sandbox.json: limits %+v, network %q", meta.Limits, meta.Network)
	}
}

// TestTimeoutKeepsWork runs a command past its time limit in a real VM:
// it is stopped, airlock exits 124, and what it wrote before is
// reviewable.
func TestTimeoutKeepsWork(t *testing.T) {
	testenv.SkipIfShort(t)
	isolateUserConfig(t)
	home := testenv.VMHome(t)
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "README"), []byte("a project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := airlockCLI(t, home, "run", "--arch", "amd64", "--timeout", "3s", "--project", project, "--",
		"sh", "-c", "echo partial > partial.txt; sleep 600")
	if code != sandbox.TimeoutExitCode {
		t.Fatalf("run past --timeout: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, sandbox.TimeoutExitCode, out, errOut)
	}
	if !strings.Contains(out, "1 file changed: 1 added") {
		t.Errorf("the work done before the time limit was not collected:\n%s", out)
	}
}
