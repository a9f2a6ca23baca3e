package agent

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// TestDeps enforces DESIGN.md's import rules for the guest agent and its
// binary: they run in every VM and must not link the host's world. The
// binary alone may link sync/manifest and sync/transfer (with the
// sync/objects it needs): its manifest, untar and tar subcommands are the
// guest's end of transfer.
func TestDeps(t *testing.T) {
	check(t, ".", nil)
	check(t, "../cmd/airlock-guest", []string{
		"github.com/airlock-dev/airlock/sync/manifest",
		"github.com/airlock-dev/airlock/sync/objects",
		"github.com/airlock-dev/airlock/sync/transfer",
	})
}

func check(t *testing.T, pkg string, allowed []string) {
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		testenv.Skip(t, testenv.Go, fmt.Sprintf("go list: %v", err))
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
		if slices.Contains(allowed, dep) {
			continue
		}
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f)) {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
