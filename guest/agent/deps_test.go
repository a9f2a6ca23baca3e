package agent

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps enforces DESIGN.md's import rules for the guest agent and its
// binary: they run in every VM and must not link the host's world.
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "../cmd/airlock-guest").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	forbidden := []string{
		"testing",
		"github.com/airlock-dev/airlock/vm",
		"github.com/airlock-dev/airlock/app",
		"github.com/airlock-dev/airlock/review",
		"github.com/airlock-dev/airlock/sync",
		"github.com/airlock-dev/airlock/guest/client",
		"fyne.io/",
		"github.com/Code-Hex/vz",
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f)) {
				t.Errorf("guest agent depends on %s", dep)
			}
		}
	}
}
