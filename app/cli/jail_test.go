package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/testkit/testenv"
)

// TestAgentJail: the sandbox's command runs in the guest agent's jail,
// here as root on the minimal image (the most it could be): the probe
// finds vsock and packet sockets, ptrace of PID 1 and its memory, io_uring, bpf,
// userfaultfd and mount refused, no_new_privs set, and a write outside
// the workspace, the caches, its home and /tmp refused, while writes
// in those work and come back as the run's changes; the denials are
// counted in the audit log, by syscall. Its verify is jailed too. An ordinary build in the jail is proven by
// TestGoProjectEnvironment (go test, as its verify) and the agent CLIs'
// tests (node, npm's caches).
func TestAgentJail(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	proj := t.TempDir()
	if err := os.WriteFile(filepath.Join(proj, "README"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The agent's binary: its copy in /run/airlock-guest on an image
	// with a root disk, /init on the minimal image (all initramfs).
	script := `g=/run/airlock-guest/init; [ -x $g ] || g=/init
$g jail-probe /etc/jail-test > probe.txt 2>&1
echo inside > inside; echo t > /tmp/t && echo tmp-ok >> probe.txt; echo h > $HOME/h && echo home-ok >> probe.txt
grep NoNewPrivs /proc/self/status >> probe.txt`
	code, out, errOut := airlockCLI(t, home, "--json", "run", "--arch", "amd64", "--project", proj, "--disk", "none",
		"--verify", "grep -q 'no_new_privs: set' probe.txt && ! touch /etc/verify-test", "--", "sh", "-c", script)
	var res runResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Changes == nil {
		t.Fatalf("run: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	_, diff, _ := airlockCLI(t, home, "diff", res.Sandbox, "probe.txt")
	for _, want := range []string{
		"vsock socket: denied (operation not permitted)",
		"packet socket: denied (operation not permitted)",
		"ptrace of PID 1: denied (operation not permitted)",
		"read PID 1's memory: denied (open /proc/1/mem: permission denied)",
		"io_uring: denied (operation not permitted)",
		"bpf: denied (operation not permitted)",
		"userfaultfd: denied (operation not permitted)",
		"mount: denied (operation not permitted)",
		"no_new_privs: set",
		"write /etc/jail-test: denied (open /etc/jail-test: permission denied)",
		"tmp-ok", "home-ok", "NoNewPrivs:\t1",
	} {
		if !strings.Contains(diff, want) {
			t.Errorf("the probe in the jail lacks %q:\n%s", want, diff)
		}
	}
	if strings.Contains(diff, "guest link's device: allowed") {
		t.Errorf("the guest link's device opens in the jail:\n%s", diff)
	}
	if _, d, _ := airlockCLI(t, home, "diff", res.Sandbox, "inside"); !strings.Contains(d, "+inside") {
		t.Errorf("a write in the workspace did not come back:\n%s", d)
	}
	// The denials are counted in the audit, by syscall.
	_, logs, _ := airlockCLI(t, home, "logs", "--audit", res.Sandbox)
	for _, want := range []string{`"event":"seccomp","data":{"denied":7,"syscalls":{"bpf":1,"io_uring_setup":1,"mount":1,"ptrace":1,"socket":2,"userfaultfd":1}}`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the audit log lacks %q:\n%s", want, logs)
		}
	}
	if _, l, _ := airlockCLI(t, home, "logs", res.Sandbox); !strings.Contains(l, "the agent's jail refused 7 calls: bpf 1, io_uring_setup 1, mount 1, ptrace 1, socket 2, userfaultfd 1") {
		t.Errorf("airlock logs does not say what the jail refused:\n%s", l)
	}
	if code != 0 {
		t.Errorf("run (its verify in the jail too): exit %d\n%s%s", code, out, errOut)
	}
}
