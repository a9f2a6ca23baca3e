package cli

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
)

// TestProjectNetworkNeedsTrust: an airlock.toml that allows a host the
// user does not is refused, listing what it asks for, until the user
// confirms that exact file; a changed file needs a new confirmation. No VM
// is booted for a refusal.
func TestProjectNetworkNeedsTrust(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	home := t.TempDir()
	project := t.TempDir()
	toml := filepath.Join(project, "airlock.toml")
	writeTOML := func(s string) {
		if err := os.WriteFile(toml, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeTOML("[network]\nallow = [\"example.com\"]\ndeny = [\"gist.github.com\"]\n")

	code, _, errOut := airlockCLI(t, home, "run", "--project", project, "--", "true")
	if code != ExitError || !strings.Contains(errOut, "allow example.com") || !strings.Contains(errOut, "airlock trust "+project) ||
		strings.Contains(errOut, "gist.github.com") {
		t.Fatalf("unconfirmed project: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(home, "sandboxes")); err == nil {
		if entries, _ := os.ReadDir(filepath.Join(home, "sandboxes")); len(entries) > 0 {
			t.Errorf("a refused run created a sandbox: %v", entries)
		}
	}
	// --allow from the user covers it: nothing to confirm (the run then
	// fails later for want of an image, which is not this test's).
	_, _, errOut = airlockCLI(t, home, "run", "--project", project, "--allow", "example.com", "--", "true")
	if strings.Contains(errOut, "airlock trust") {
		t.Errorf("a host the user allows still needs confirmation:\n%s", errOut)
	}

	code, out, errOut := airlockCLI(t, home, "trust", project)
	if code != 0 || !strings.Contains(out, "allow example.com") {
		t.Fatalf("trust: exit %d\n%s%s", code, out, errOut)
	}
	_, _, errOut = airlockCLI(t, home, "run", "--project", project, "--", "true")
	if strings.Contains(errOut, "airlock trust") {
		t.Errorf("a confirmed project is refused:\n%s", errOut)
	}

	writeTOML("[network]\nallow = [\"example.com\", \"evil.example\"]\n")
	code, _, errOut = airlockCLI(t, home, "run", "--project", project, "--", "true")
	if code != ExitError || !strings.Contains(errOut, "allow evil.example") {
		t.Errorf("a changed file is still trusted: exit %d\n%s", code, errOut)
	}

	// A user configuration with a problem is reported, every problem.
	cfg := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "airlock", "config.toml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("[network]\nallow = [\"a b\", \"*\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = airlockCLI(t, home, "exec", "--", "true")
	if code != ExitError || !strings.Contains(errOut, `"a b"`) || !strings.Contains(errOut, `"*"`) {
		t.Errorf("bad user config: exit %d\n%s", code, errOut)
	}
}

// TestRunProjectAllowInVM: once confirmed, the project's host is reachable
// from a real VM through airlock run, and every request is a line on
// stderr; the same host without confirmation... is covered above.
func TestRunProjectAllowInVM(t *testing.T) {
	testenv.SkipIfShort(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	home := testenv.VMHome(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from the project's host\n")
	}))
	defer up.Close()
	port := up.Listener.Addr().(*net.TCPAddr).Port
	project := netclientProject(t)
	if err := os.WriteFile(filepath.Join(project, "airlock.toml"), []byte(fmt.Sprintf("[network]\nallow = [\"127.0.0.1:%d\"]\n", port)), 0o644); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/x", port)
	code, out, errOut := airlockCLI(t, home, "run", "--arch", "amd64", "--trust-project", "--project", project, "--",
		"sh", "-c", "./netclient get "+url+"; ./netclient get http://not-allowed.example/")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "status 200\nhello from the project's host") || !strings.Contains(out, "status 403") {
		t.Errorf("guest output:\n%s", out)
	}
	if !strings.Contains(errOut, fmt.Sprintf("airlock: net: allowed GET 127.0.0.1:%d/x → 200", port)) ||
		!strings.Contains(errOut, "airlock: net: DENIED GET not-allowed.example:80/ → 403") {
		t.Errorf("live request lines on stderr:\n%s", errOut)
	}
}

// TestExecAllowInVM: airlock exec --allow reaches a host from a real VM,
// and everything else is denied with the 403 that says how to allow it.
func TestExecAllowInVM(t *testing.T) {
	testenv.SkipIfShort(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	home := testenv.VMHome(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello exec\n")
	}))
	defer up.Close()
	nc, err := os.Open(testenv.NetClient(t, vm.AMD64))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	script := fmt.Sprintf("cat > /tmp/nc && chmod +x /tmp/nc && /tmp/nc get %s/ && /tmp/nc get http://elsewhere.example/", up.URL)
	code, out, errOut := airlockCLIIn(t, home, nc, "exec", "--arch", "amd64", "-i", "--allow", up.Listener.Addr().String(), "--", "sh", "-c", script)
	if code != 0 || !strings.Contains(out, "status 200\nhello exec") || !strings.Contains(out, "status 403") ||
		!strings.Contains(out, "--allow elsewhere.example") {
		t.Fatalf("exec: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "airlock: net: DENIED GET elsewhere.example:80/") {
		t.Errorf("no live line for the denied request:\nstderr %q\nstdout %q", errOut, out)
	}
}

// TestRegistryPresetFlags: --allow takes registry presets on run and
// exec, an unknown one is refused before any VM with the list of
// presets, and airlock trust lists a project's preset by name and host.
func TestRegistryPresetFlags(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	home := t.TempDir()
	project := t.TempDir()
	for _, args := range [][]string{
		{"run", "--project", project, "--allow", "@npn", "--", "true"},
		{"exec", "--allow", "@npn", "--", "true"},
	} {
		code, _, errOut := airlockCLI(t, home, args...)
		if code != ExitError || !strings.Contains(errOut, "no registry preset @npn; the presets are @npm, @pypi, @go, @crates, @rubygems, @maven, @debian, @docker, @ghcr, @mcr") {
			t.Errorf("%v: exit %d\n%s", args, code, errOut)
		}
	}
	if err := os.WriteFile(filepath.Join(project, "airlock.toml"), []byte("[network]\nallow = [\"@pypi\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := airlockCLI(t, home, "run", "--project", project, "--", "true")
	if code != ExitError || !strings.Contains(errOut, "allow @pypi files.pythonhosted.org:443 (GET,HEAD)") {
		t.Errorf("a project asking for @pypi: exit %d\n%s", code, errOut)
	}
	// The user's own --allow @pypi covers what the project asks.
	_, _, errOut = airlockCLI(t, home, "run", "--project", project, "--allow", "@pypi", "--", "true")
	if strings.Contains(errOut, "airlock trust") || strings.Contains(errOut, "registry preset") {
		t.Errorf("--allow @pypi does not cover the project's @pypi:\n%s", errOut)
	}
	code, out, errOut := airlockCLI(t, home, "trust", project)
	if code != 0 || !strings.Contains(out, "allow @pypi pypi.org:443 (GET,HEAD)") {
		t.Errorf("trust: exit %d\n%s%s", code, out, errOut)
	}
}

// netclientProject is a project holding the guest's test HTTP client,
// ./netclient (testenv.NetClient).
func netclientProject(t *testing.T) string {
	t.Helper()
	project := t.TempDir()
	data, err := os.ReadFile(testenv.NetClient(t, vm.AMD64))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "netclient"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	return project
}
