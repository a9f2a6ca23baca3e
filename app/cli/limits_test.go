package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/config"
)

func TestMemoryFlag(t *testing.T) {
	for in, want := range map[string]config.Size{"2048": 2 * config.GiB, "2G": 2 * config.GiB, "512M": 512 * config.MiB, "1.5g": 1536 * config.MiB} {
		var m memoryFlag
		if err := m.Set(in); err != nil || m.Size != want {
			t.Errorf("--memory %s = %v, %v; want %v", in, m.Size, err, want)
		}
	}
	var m memoryFlag
	if err := m.Set("lots"); err == nil {
		t.Error("--memory lots: no error")
	}
}

// TestProjectCannotWiden runs against a project whose airlock.toml asks
// for more than the user allows and for an open network: both are ignored
// with a note, and no open-network warning is printed. The home has no
// image, so the run stops at boot.
func TestProjectCannotWiden(t *testing.T) {
	isolateUserConfig(t)
	project := t.TempDir()
	toml := "open_network = true\n[limits]\ncpus = 64\ntimeout = \"none\"\n"
	if err := os.WriteFile(filepath.Join(project, "airlock.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, errOut := run(t, t.TempDir(), "", "run", "--project", project, "--", "true")
	for _, want := range []string{
		"airlock.toml asks for cpus = 64, more than the 2 allowed: ignored",
		"airlock.toml asks for timeout = none, more than the 1h0m0s allowed: ignored",
		"airlock.toml asks for open_network = true: ignored",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "WARNING: open network") {
		t.Errorf("a project file opened the network:\n%s", errOut)
	}
}

func TestBadLimitFlags(t *testing.T) {
	isolateUserConfig(t)
	for _, args := range [][]string{
		{"exec", "--memory", "lots", "--", "true"},
		{"exec", "--memory", "1M", "--", "true"},
		{"run", "--disk", "8X", "--", "true"},
		{"exec", "--timeout", "5", "--", "true"},
	} {
		code, _, errOut := run(t, t.TempDir(), "", args...)
		if code == 0 || errOut == "" {
			t.Errorf("%q: exit %d, stderr %q; want an error", args, code, errOut)
		}
	}
}
