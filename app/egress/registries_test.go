package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRegistryPresets(t *testing.T) {
	want := map[string][]string{
		"npm":      {"registry.npmjs.org:443", "registry.yarnpkg.com:443"},
		"pypi":     {"pypi.org:443", "files.pythonhosted.org:443"},
		"go":       {"proxy.golang.org:443", "sum.golang.org:443"},
		"crates":   {"index.crates.io:443", "static.crates.io:443", "crates.io:443"},
		"rubygems": {"rubygems.org:443", "index.rubygems.org:443"},
		"maven":    {"repo.maven.apache.org:443", "repo1.maven.org:443"},
		// apt speaks plain HTTP by default: the default ports, 80 and 443.
		"debian": {"deb.debian.org", "security.debian.org"},
		"docker": {"registry-1.docker.io:443", "auth.docker.io:443", "production.cloudflare.docker.com:443", "production.cloudfront.docker.com:443",
			"docker-images-prod.6aa30f8b08e16409b46e0173d6de2f56.r2.cloudflarestorage.com:443"},
		"ghcr": {"ghcr.io:443", "pkg-containers.githubusercontent.com:443"},
		"mcr":  {"mcr.microsoft.com:443", "*.data.mcr.microsoft.com:443"},
	}
	var names []string
	for _, g := range Registries() {
		names = append(names, g.Name)
		if g.Description == "" {
			t.Errorf("@%s has no description", g.Name)
		}
	}
	if diff := cmp.Diff([]string{"npm", "pypi", "go", "crates", "rubygems", "maven", "debian", "docker", "ghcr", "mcr"}, names); diff != "" {
		t.Errorf("presets (-want +got):\n%s", diff)
	}
	for name, hosts := range want {
		rules, err := ParseRules("@" + name)
		if err != nil {
			t.Fatalf("@%s: %v", name, err)
		}
		var got []string
		for _, r := range rules {
			got = append(got, r.String())
			if !slices.Equal(r.Methods, []string{"GET", "HEAD"}) {
				t.Errorf("@%s: %s allows %v, want GET and HEAD only", name, r.Host, r.Methods)
			}
			if r.Registry != name {
				t.Errorf("@%s: %s has Registry %q", name, r.Host, r.Registry)
			}
			if err := r.Validate(); err != nil {
				t.Errorf("@%s: %s: %v", name, r.Host, err)
			}
		}
		wantStr := make([]string, len(hosts))
		for i, h := range hosts {
			wantStr[i] = h + " (GET,HEAD)"
		}
		if diff := cmp.Diff(wantStr, got); diff != "" {
			t.Errorf("@%s (-want +got):\n%s", name, diff)
		}
	}
}

func TestParseRulesPresetSyntax(t *testing.T) {
	tests := []struct {
		in      string
		methods []string
		n       int
		wantErr string
	}{
		{in: " @npm ", methods: []string{"GET", "HEAD"}, n: 2},
		{in: "@NPM", methods: []string{"GET", "HEAD"}, n: 2},
		{in: "@npm (get, head, put)", methods: []string{"GET", "HEAD", "PUT"}, n: 2},
		{in: "@npm(GET)", methods: []string{"GET"}, n: 2},
		{in: "pypi.org", n: 1},
		{in: "pypi.org (GET)", methods: []string{"GET"}, n: 1},
		{in: "@nmp", wantErr: "no registry preset @nmp; the presets are @npm, @pypi, @go, @crates, @rubygems, @maven, @debian, @docker, @ghcr, @mcr"},
		{in: "@", wantErr: "no registry preset"},
		{in: "@npm (CONNECT)", wantErr: "method"},
		{in: "@npm ()", wantErr: "method"},
		{in: "@npm (GET", wantErr: "parentheses"},
		{in: "@npm GET)", wantErr: "without its ("},
		{in: "@npm:443", wantErr: "no registry preset"},
		{in: "(GET)", wantErr: "without a host"},
		{in: "x.com (G ET)", wantErr: "method"},
	}
	for _, tt := range tests {
		got, err := ParseRules(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseRules(%q) = %v, %v; want error with %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRules(%q): %v", tt.in, err)
			continue
		}
		if len(got) != tt.n {
			t.Errorf("ParseRules(%q) = %d rules, want %d", tt.in, len(got), tt.n)
		}
		for _, r := range got {
			if !slices.Equal(r.Methods, tt.methods) {
				t.Errorf("ParseRules(%q): %s allows %v, want %v", tt.in, r.Host, r.Methods, tt.methods)
			}
		}
	}
	// One host is wanted where a preset cannot stand (a secret's host).
	if _, err := ParseRule("@npm"); err == nil || !strings.Contains(err.Error(), "registry preset") {
		t.Errorf("ParseRule(@npm) = %v, want an error naming the preset", err)
	}
	// A rule with methods reads back from its String.
	r, err := ParseRule("api.github.com:8443 (GET,HEAD)")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ParseRule(r.String()); err != nil || !cmp.Equal(again, r) {
		t.Errorf("%q does not parse back: %+v, %v", r.String(), again, err)
	}
}

func TestDecideRegistryPreset(t *testing.T) {
	npm, err := ParseRules("@npm")
	if err != nil {
		t.Fatal(err)
	}
	for i := range npm {
		npm[i].Source = "user"
	}
	deb, _ := ParseRules("@debian")
	pol := &Policy{Allow: append(npm, deb...)}
	tests := []struct {
		req    Request
		want   bool
		rule   string
		reason string
	}{
		{Request{Host: "registry.npmjs.org", Port: 443, Method: "GET", Connect: true}, true, "@npm registry.npmjs.org:443 (GET,HEAD)", ""},
		{Request{Host: "registry.npmjs.org", Port: 443, Method: "HEAD", Connect: true}, true, "@npm registry.npmjs.org:443 (GET,HEAD)", ""},
		{Request{Host: "registry.npmjs.org", Port: 443, Method: "POST", Connect: true}, false, "@npm registry.npmjs.org:443 (GET,HEAD)",
			`POST registry.npmjs.org:443 is not allowed: the @npm preset (user rule "registry.npmjs.org:443 (GET,HEAD)") allows GET, HEAD only`},
		{Request{Host: "registry.npmjs.org", Port: 443, Method: "PUT", Connect: true}, false, "@npm registry.npmjs.org:443 (GET,HEAD)", "the @npm preset"},
		// A proxy that can see inside the tunnel lets it open.
		{Request{Host: "registry.npmjs.org", Port: 443, Method: "CONNECT", Connect: true, Inspect: true}, true, "@npm registry.npmjs.org:443 (GET,HEAD)", ""},
		// One that cannot refuses it: the method limit would be blind.
		{Request{Host: "registry.npmjs.org", Port: 443, Method: "CONNECT", Connect: true}, false, "@npm registry.npmjs.org:443 (GET,HEAD)", "the @npm preset"},
		// Port 443 only: not plain HTTP on 80, not another port.
		{Request{Host: "registry.npmjs.org", Port: 80, Method: "GET"}, false, "default deny", ""},
		{Request{Host: "registry.npmjs.org", Port: 8443, Method: "CONNECT", Connect: true, Inspect: true}, false, "default deny", ""},
		{Request{Host: "evil.registry.npmjs.org", Port: 443, Method: "CONNECT", Connect: true, Inspect: true}, false, "default deny", ""},
		// apt's plain HTTP, and HTTPS sources.
		{Request{Host: "deb.debian.org", Port: 80, Method: "GET"}, true, "@debian deb.debian.org (GET,HEAD)", ""},
		{Request{Host: "security.debian.org", Port: 443, Method: "GET", Connect: true}, true, "@debian security.debian.org (GET,HEAD)", ""},
		{Request{Host: "deb.debian.org", Port: 80, Method: "POST"}, false, "@debian deb.debian.org (GET,HEAD)", "the @debian preset (rule"},
	}
	for _, tt := range tests {
		d := pol.Decide(tt.req)
		if d.Allowed != tt.want || d.Rule != tt.rule || !strings.Contains(d.Reason, tt.reason) {
			t.Errorf("Decide(%+v) = %+v; want allowed=%v rule %q reason with %q", tt.req, d, tt.want, tt.rule, tt.reason)
		}
		if d.Allowed && tt.req.Method == "CONNECT" && !d.Intercept {
			t.Errorf("Decide(%+v) allowed a tunnel with a method limit without intercepting it", tt.req)
		}
	}
	if !pol.Inspects() {
		t.Error("a policy with a registry preset does not ask for a CA")
	}
	if (&Policy{Allow: []Rule{{Host: "github.com"}}}).Inspects() {
		t.Error("a policy of plain hosts asks for a CA")
	}
}

// An explicit rule for a preset's host widens what it allows through
// itself only: the preset's rules stay read-only.
func TestDecideRegistryPresetAndExplicitRule(t *testing.T) {
	npm, _ := ParseRules("@npm")
	for i := range npm {
		npm[i].Source = "user"
	}
	publish := Rule{Host: "registry.npmjs.org", Port: 443, Methods: []string{"GET", "HEAD", "PUT", "POST"}, Source: "project"}
	pol := &Policy{Allow: append(npm, publish)}
	tests := []struct {
		req  Request
		want bool
		rule string
	}{
		{Request{Host: "registry.npmjs.org", Port: 443, Method: "GET", Connect: true}, true, "@npm registry.npmjs.org:443 (GET,HEAD)"},
		{Request{Host: "registry.npmjs.org", Port: 443, Method: "PUT", Connect: true}, true, "registry.npmjs.org:443 (GET,HEAD,PUT,POST)"},
		{Request{Host: "registry.npmjs.org", Port: 443, Method: "POST", Connect: true}, true, "registry.npmjs.org:443 (GET,HEAD,PUT,POST)"},
		{Request{Host: "registry.npmjs.org", Port: 443, Method: "DELETE", Connect: true}, false, "@npm registry.npmjs.org:443 (GET,HEAD)"},
		// The explicit rule names one host: the preset's other host stays
		// read-only.
		{Request{Host: "registry.yarnpkg.com", Port: 443, Method: "PUT", Connect: true}, false, "@npm registry.yarnpkg.com:443 (GET,HEAD)"},
	}
	for _, tt := range tests {
		d := pol.Decide(tt.req)
		if d.Allowed != tt.want || d.Rule != tt.rule {
			t.Errorf("Decide(%+v) = %+v; want allowed=%v rule %q", tt.req, d, tt.want, tt.rule)
		}
	}
	// A rule without methods for the host opens it whole, as a plain
	// tunnel: that is the explicit rule's doing.
	whole := &Policy{Allow: append(slices.Clone(npm), Rule{Host: "registry.npmjs.org", Port: 443, Source: "flag"})}
	if d := whole.Decide(Request{Host: "registry.npmjs.org", Port: 443, Method: "CONNECT", Connect: true, Inspect: true}); !d.Allowed || d.Intercept || d.Rule != "registry.npmjs.org:443" {
		t.Errorf("an explicit rule without methods: %+v; want an opaque tunnel by that rule", d)
	}
}

// Through the proxy: a registry preset's host answers GET inside its
// intercepted TLS, and a POST is refused with a 403 naming the preset.
func TestProxyRegistryPreset(t *testing.T) {
	var got []string
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.Host+r.URL.Path)
		fmt.Fprintf(w, "package %s", r.URL.Path)
	}))
	upCA, err := NewCA("upstream")
	if err != nil {
		t.Fatal(err)
	}
	up.TLS = &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) { return upCA.Leaf(hi.ServerName) }}
	up.StartTLS()
	defer up.Close()
	npm, _ := ParseRules("@npm")
	for i := range npm {
		npm[i].Source = "user"
	}
	h := newHarness(t, &Policy{Allow: npm})
	h.roots.AddCert(upCA.Certificate())
	h.net.add("registry.npmjs.org:443", up.Listener.Addr().String())
	c := h.client()

	code, body := get(t, c, "https://registry.npmjs.org/left-pad")
	if code != 200 || body != "package /left-pad" {
		t.Fatalf("GET through @npm: %d %q", code, body)
	}
	if r := h.last(t); !r.Allowed || r.Mode != ModeIntercept || r.Rule != "@npm registry.npmjs.org:443 (GET,HEAD)" {
		t.Errorf("record of the GET: %+v", r)
	}

	resp, err := c.Post("https://registry.npmjs.org/left-pad", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "the @npm preset") || !strings.Contains(string(b), "[[network.host]]") {
		t.Errorf("POST through @npm: %d %q; want 403 naming the preset and how to allow it", resp.StatusCode, b)
	}
	if r := h.last(t); r.Allowed || !strings.Contains(r.Reason, "the @npm preset") {
		t.Errorf("record of the POST: %+v", r)
	}
	if slices.Contains(got, "POST registry.npmjs.org/left-pad") {
		t.Error("the refused POST reached the registry")
	}

	// Without a CA the proxy cannot see methods: the tunnel is refused,
	// and the reason says why.
	noCA := New(Config{Dial: h.net.dial}, &Policy{Allow: npm})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = noCA.Serve(ctx, l) }()
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "CONNECT registry.npmjs.org:443 HTTP/1.1\r\nHost: registry.npmjs.org:443\r\n\r\n")
	resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "cannot be seen inside an HTTPS tunnel") || !strings.Contains(string(b), "the @npm preset") {
		t.Errorf("CONNECT to a proxy without a CA: %d %q", resp.StatusCode, b)
	}
}

// FuzzParseRules: whatever a configuration holds, a rule read from it
// reads back from its String, and a preset expands to valid rules.
func FuzzParseRules(f *testing.F) {
	for _, s := range []string{"@npm", "@npm (GET,HEAD,PUT)", "x.com (get)", "[::1]:80 (GET)", "a(b)", "@", "()", "*.x.com:* (POST)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rules, err := ParseRules(s)
		if err != nil {
			return
		}
		for _, r := range rules {
			if err := r.Validate(); err != nil {
				t.Fatalf("ParseRules(%q) gave an invalid rule %+v: %v", s, r, err)
			}
			if r.Registry != "" {
				continue
			}
			again, err := ParseRule(r.String())
			if err != nil || !cmp.Equal(again, r) {
				t.Fatalf("ParseRules(%q) = %+v, whose String %q reads back as %+v, %v", s, r, r.String(), again, err)
			}
		}
	})
}
