package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
)

// TestSupervisedSandboxVM boots a sandbox's VM through a supervisor as
// airlock run does, lets the client go as a crashed airlock would, and
// finds and stops the VM with airlock ls and airlock stop.
func TestSupervisedSandboxVM(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	st, err := sandbox.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := st.Create(sandbox.Meta{Project: t.TempDir(), Image: "minimal", Arch: "amd64", Command: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := supervisedBackend(&env{stderr: io.Discard, quiet: true}, home, 0)
	if err != nil {
		t.Fatal(err)
	}
	g, err := launch.Boot(context.Background(), launch.Options{Home: home, Name: sb.ID, Arch: vm.AMD64, Backend: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Kill)
	if err := g.Client.Run(t.Context(), client.Command{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	g.Client.Close() // the client goes; the VM stays with its supervisor

	// A restarted airlock reconnects from the run directory alone.
	g2, err := launch.Attach(t.Context(), launch.Options{Home: home, Name: sb.ID})
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := g2.Client.Run(t.Context(), client.Command{Script: "echo again", Stdout: &again}); err != nil || again.String() != "again\n" {
		t.Errorf("a command after attaching: %q, %v", again.String(), err)
	}
	g2.Client.Close()

	vmOf := func() string {
		t.Helper()
		code, out, errOut := airlockCLI(t, home, "ls", "--json")
		if code != 0 {
			t.Fatalf("ls: exit %d: %s", code, errOut)
		}
		var rows []lsRow
		if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
			t.Fatalf("ls --json: %q, %v", out, err)
		}
		return rows[0].VM
	}
	if got := vmOf(); got != "running" {
		t.Errorf("ls says the VM is %q, want running", got)
	}
	if _, out, _ := airlockCLI(t, home, "ls"); !strings.Contains(out, "running") {
		t.Errorf("ls does not show the running VM:\n%s", out)
	}
	if code, _, errOut := airlockCLI(t, home, "rm", sb.ID); code == 0 || !strings.Contains(errOut, "VM is running") {
		t.Errorf("rm of a sandbox whose VM runs: exit %d, %q", code, errOut)
	}
	t0 := time.Now()
	code, out, errOut := airlockCLI(t, home, "stop", "--timeout", "30s", sb.ID[:4])
	if code != 0 || strings.TrimSpace(out) != "stopped "+sb.ID {
		t.Fatalf("stop: exit %d, %q, %q", code, out, errOut)
	}
	t.Logf("stopped in %s", time.Since(t0).Round(time.Millisecond))
	if err := g.Machine.Wait(); err != nil {
		t.Errorf("the guest did not power off cleanly: %v", err)
	}
	if got := vmOf(); got != "" {
		t.Errorf("ls after stop says the VM is %q", got)
	}
	if code, _, errOut := airlockCLI(t, home, "stop", sb.ID); code == 0 || !strings.Contains(errOut, "no VM supervisor") {
		t.Errorf("stop of a stopped VM: exit %d, %q", code, errOut)
	}
}
