package config

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/egress"
)

// Registry presets are read from the user's config.toml and from a
// project's airlock.toml, in allow, in [[network.host]] and in deny.
func TestRegistryPresetsInFiles(t *testing.T) {
	dir := t.TempDir()
	user := filepath.Join(dir, "config.toml")
	writeFile(t, user, `
[network]
allow = ["@npm", "@debian"]
[[network.host]]
host = "@crates"
methods = ["get", "head", "put"]
`, 0o600)
	u, err := LoadUser(user)
	if err != nil {
		t.Fatal(err)
	}
	proj := t.TempDir()
	writeFile(t, filepath.Join(proj, FileName), `
[network]
allow = ["@pypi (GET)"]
deny = ["@maven"]
`, 0o644)
	p, err := Load(proj)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := Policy(PolicyInput{User: u, Project: p, ProjectTrusted: true})
	if err != nil {
		t.Fatal(err)
	}
	decide := func(host string, port int, method string) egress.Decision {
		return pol.Decide(egress.Request{Host: host, Port: port, Method: method, Connect: port == 443})
	}
	tests := []struct {
		host   string
		port   int
		method string
		want   bool
		rule   string
	}{
		{"registry.npmjs.org", 443, "GET", true, "@npm registry.npmjs.org:443 (GET,HEAD)"},
		{"registry.yarnpkg.com", 443, "POST", false, "@npm registry.yarnpkg.com:443 (GET,HEAD)"},
		{"deb.debian.org", 80, "GET", true, "@debian deb.debian.org (GET,HEAD)"},
		{"static.crates.io", 443, "PUT", true, "@crates static.crates.io:443 (GET,HEAD,PUT)"},
		{"files.pythonhosted.org", 443, "GET", true, "@pypi files.pythonhosted.org:443 (GET)"},
		{"files.pythonhosted.org", 443, "HEAD", false, "@pypi files.pythonhosted.org:443 (GET)"},
		{"repo1.maven.org", 443, "GET", false, "deny @maven repo1.maven.org:443"},
	}
	for _, tt := range tests {
		d := decide(tt.host, tt.port, tt.method)
		if d.Allowed != tt.want || d.Rule != tt.rule {
			t.Errorf("%s %s:%d = %+v; want allowed=%v by %q", tt.method, tt.host, tt.port, d, tt.want, tt.rule)
		}
	}
	if d := decide("registry.yarnpkg.com", 443, "POST"); !strings.Contains(d.Reason, `the @npm preset (user rule "registry.yarnpkg.com:443 (GET,HEAD)")`) {
		t.Errorf("reason %q does not name the preset and where it came from", d.Reason)
	}
	// An untrusted project's preset widens nothing, and is listed as
	// what it asks for, by name.
	got := Widening(u.Network, p.Network, nil)
	if len(got) != 2 || got[0] != "allow @pypi pypi.org:443 (GET)" || got[1] != "allow @pypi files.pythonhosted.org:443 (GET)" {
		t.Errorf("Widening = %q", got)
	}
	// The same preset in both files widens nothing.
	if got := Widening(u.Network, Network{Allow: []string{"@npm"}}, nil); len(got) != 0 {
		t.Errorf("a preset the user allows too widens: %q", got)
	}
}

func TestRegistryPresetsInFilesBad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.toml")
	writeFile(t, p, `
[network]
allow = ["@nmp"]
deny = ["@npm (GET)", "@nope"]
[[network.host]]
host = "@pypi (GET)"
methods = ["HEAD"]
[[network.host]]
host = "@go"
methods = ["CONNECT"]
[[network.secret]]
host = "@npm"
header = "Authorization"
env = "NPM_TOKEN"
[[network.secret]]
host = "registry.npmjs.org (GET)"
header = "Authorization"
env = "NPM_TOKEN2"
`, 0o600)
	_, err := LoadUser(p)
	for _, want := range []string{
		"no registry preset @nmp; the presets are @npm, @pypi, @go, @crates, @rubygems, @maven, @debian",
		"a deny rule refuses a host whole",
		"@nope",
		"methods both in host and in methods",
		`method "CONNECT"`,
		`"@npm" is a registry preset`,
		"a secret's host takes no methods",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadUser of bad presets: %v\nwant it to mention %q", err, want)
		}
	}
	proj := t.TempDir()
	writeFile(t, filepath.Join(proj, FileName), "[network]\nallow = [\"@rust\"]\n", 0o644)
	if _, err := Load(proj); err == nil || !strings.Contains(err.Error(), "no registry preset @rust") {
		t.Errorf("airlock.toml with an unknown preset: %v", err)
	}
}
