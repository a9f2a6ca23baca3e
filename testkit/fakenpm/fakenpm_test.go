package fakenpm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/testkit/testenv"
)

// TestNpmInstallsFromIt: the host's npm installs a stand-in CLI from the
// fake registry, scoped name and all, and the command prints its line;
// a package the registry lacks is a 404 npm reports.
func TestNpmInstallsFromIt(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		testenv.Skip(t, testenv.Npm, "npm not found (scripts/setup-debian installs it)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Skip(t, testenv.Npm, "node not found (scripts/setup-debian installs it with npm)")
	}
	reg := Start(t, "127.0.0.1:0", CLI(t, "@example/tool", "1.2.3", "example-tool", "1.2.3 (Example)"))
	prefix, cache := t.TempDir(), t.TempDir()
	install := func(pkg string) (string, error) {
		cmd := exec.Command(npm, "install", "--global", "--prefix", prefix, "--cache", cache, "--registry", reg.URL,
			"--no-fund", "--no-audit", "--no-update-notifier", "--loglevel=error", pkg)
		cmd.Env = append(os.Environ(), "npm_config_userconfig="+filepath.Join(cache, "npmrc"), "HTTP_PROXY=", "http_proxy=", "HTTPS_PROXY=", "https_proxy=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := install("@example/tool@1.2.3"); err != nil {
		t.Fatalf("npm install: %v\n%s\nrequests: %q", err, out, reg.Requests())
	}
	out, err := exec.Command(filepath.Join(prefix, "bin", "example-tool")).CombinedOutput()
	if err != nil || string(out) != "1.2.3 (Example)\n" {
		t.Errorf("example-tool: %v %q", err, out)
	}
	if out, err := install("@example/missing@1.0.0"); err == nil || !strings.Contains(out, "404") {
		t.Errorf("a package the registry lacks installed, or npm did not say 404: %v\n%s", err, out)
	}
	var tarball bool
	for _, r := range reg.Requests() {
		tarball = tarball || r == "GET /@example/tool/-/tool-1.2.3.tgz 200"
	}
	if !tarball {
		t.Errorf("npm did not fetch the tarball: %q", reg.Requests())
	}
}
