package egress

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRule(t *testing.T) {
	tests := []struct {
		in      string
		want    Rule
		wantErr string
	}{
		{in: "api.github.com", want: Rule{Host: "api.github.com"}},
		{in: "API.GitHub.com.", want: Rule{Host: "api.github.com"}},
		{in: "*.github.com:8443", want: Rule{Host: "*.github.com", Port: 8443}},
		{in: "pypi.org:*", want: Rule{Host: "pypi.org", Port: AnyPort}},
		{in: "10.0.0.1:80", want: Rule{Host: "10.0.0.1", Port: 80}},
		{in: "[::1]:8080", want: Rule{Host: "::1", Port: 8080}},
		{in: "::1", want: Rule{Host: "::1"}},
		{in: "", wantErr: "empty"},
		{in: "*", wantErr: "wildcard"},
		{in: "*.com", wantErr: "two labels"},
		{in: "a.*.com", wantErr: "wildcard"},
		{in: "host:0", wantErr: "port"},
		{in: "host:70000", wantErr: "port"},
		{in: "bad host", wantErr: "not a valid"},
		{in: "[::1", wantErr: "missing ]"},
	}
	for _, tt := range tests {
		got, err := ParseRule(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseRule(%q) = %+v, %v; want error with %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseRule(%q) (-want +got):\n%s", tt.in, diff)
		}
		if again, err := ParseRule(got.String()); err != nil || !cmp.Equal(again, got) {
			t.Errorf("ParseRule(%q).String() = %q does not parse back: %+v, %v", tt.in, got.String(), again, err)
		}
	}
}

func mustRule(t *testing.T, s string, methods ...string) Rule {
	t.Helper()
	r, err := ParseRule(s)
	if err != nil {
		t.Fatal(err)
	}
	r.Methods = methods
	return r
}

func TestDecide(t *testing.T) {
	pol := &Policy{
		Allow: []Rule{
			mustRule(t, "github.com"),
			mustRule(t, "*.githubusercontent.com"),
			mustRule(t, "registry.example.com:*"),
			mustRule(t, "api.example.com", "GET", "HEAD"),
			mustRule(t, "10.1.2.3:8080"),
			mustRule(t, "*.corp.example:443"),
			mustRule(t, "api.limited.example", "GET", "HEAD"),
		},
		Deny: []Rule{mustRule(t, "evil.corp.example:*")},
		Secrets: []Secret{
			{Host: "api.anthropic.com", Header: "x-api-key", Name: "K", Value: "v", Placeholder: PlaceholderPrefix + "0123456789abcdef"},
			{Host: "api.limited.example", Header: "Authorization", Name: "GH", Value: "v", Placeholder: PlaceholderPrefix + "1123456789abcdef"},
			{Host: "plain.secret.example", Port: 80, Header: "Authorization", Name: "P", Value: "v", Placeholder: PlaceholderPrefix + "2123456789abcdef"},
		},
	}
	tests := []struct {
		req  Request
		want bool
		rule string
	}{
		{Request{"github.com", 443, "CONNECT", true, false, ""}, true, "github.com"},
		{Request{"GitHub.com.", 443, "CONNECT", true, false, ""}, true, "github.com"},
		{Request{"github.com", 80, "GET", false, false, ""}, true, "github.com"},
		{Request{"github.com", 8443, "CONNECT", true, false, ""}, false, "default deny"},
		{Request{"github.com", 443, "GET", false, false, ""}, false, "default deny"}, // plain HTTP to 443 is not the default
		{Request{"api.github.com", 443, "CONNECT", true, false, ""}, false, "default deny"},
		{Request{"raw.githubusercontent.com", 443, "CONNECT", true, false, ""}, true, "*.githubusercontent.com"},
		{Request{"a.b.githubusercontent.com", 443, "CONNECT", true, false, ""}, true, "*.githubusercontent.com"},
		{Request{"githubusercontent.com", 443, "CONNECT", true, false, ""}, false, "default deny"},
		{Request{"evilgithubusercontent.com", 443, "CONNECT", true, false, ""}, false, "default deny"},
		{Request{"registry.example.com", 5000, "CONNECT", true, false, ""}, true, "registry.example.com:*"},
		{Request{"api.example.com", 80, "GET", false, false, ""}, true, "api.example.com (GET,HEAD)"},
		{Request{"api.example.com", 80, "POST", false, false, ""}, false, "api.example.com (GET,HEAD)"},
		{Request{"api.example.com", 443, "CONNECT", true, false, ""}, false, "api.example.com (GET,HEAD)"}, // methods unseen in a tunnel
		{Request{"10.1.2.3", 8080, "GET", false, false, ""}, true, "10.1.2.3:8080"},
		{Request{"10.1.2.3", 80, "GET", false, false, ""}, false, "default deny"},
		{Request{"x.corp.example", 443, "CONNECT", true, false, ""}, true, "*.corp.example:443"},
		{Request{"evil.corp.example", 443, "CONNECT", true, false, ""}, false, "deny evil.corp.example:*"},
		{Request{"api.anthropic.com", 443, "CONNECT", true, false, ""}, true, "secret K for api.anthropic.com"},
		{Request{"api.anthropic.com", 80, "GET", false, false, ""}, false, "default deny"},
		{Request{"localhost", 80, "GET", false, false, ""}, false, "default deny"},
		// A secret's host keeps the method limits of the rules that match
		// it: the CONNECT is allowed (intercepted), each request inside
		// is decided with its method.
		{Request{"api.limited.example", 443, "CONNECT", true, false, ""}, true, "secret GH for api.limited.example"},
		{Request{"api.limited.example", 443, "GET", true, false, ""}, true, "api.limited.example (GET,HEAD)"},
		{Request{"api.limited.example", 443, "DELETE", true, false, ""}, false, "api.limited.example (GET,HEAD)"},
		{Request{"api.limited.example", 443, "POST", true, false, ""}, false, "api.limited.example (GET,HEAD)"},
		// Without a matching rule the secret allows its host, over TLS
		// only.
		{Request{"api.anthropic.com", 443, "POST", true, false, ""}, true, "secret K for api.anthropic.com"},
		{Request{"plain.secret.example", 80, "GET", false, false, ""}, false, "default deny"},
	}
	for _, tt := range tests {
		d := pol.Decide(tt.req)
		if d.Allowed != tt.want || d.Rule != tt.rule {
			t.Errorf("Decide(%+v) = %+v; want allowed=%v rule %q", tt.req, d, tt.want, tt.rule)
		}
		if !d.Allowed && d.Reason == "" {
			t.Errorf("Decide(%+v): denied without a reason", tt.req)
		}
	}
	if d := (&Policy{}).Decide(Request{"github.com", 443, "CONNECT", true, false, ""}); d.Allowed {
		t.Error("the zero policy allowed a request")
	}
}

func TestCovers(t *testing.T) {
	tests := []struct {
		a, b string
		am   []string
		bm   []string
		want bool
	}{
		{a: "github.com", b: "github.com", want: true},
		{a: "*.github.com", b: "api.github.com", want: true},
		{a: "*.github.com", b: "*.api.github.com", want: true},
		{a: "*.github.com", b: "github.com", want: false},
		{a: "api.github.com", b: "*.github.com", want: false},
		{a: "github.com:*", b: "github.com:22", want: true},
		{a: "github.com", b: "github.com:22", want: false},
		{a: "github.com", b: "github.com", bm: []string{"GET"}, want: true},
		{a: "github.com", am: []string{"GET"}, b: "github.com", want: false},
		{a: "github.com", am: []string{"GET", "HEAD"}, b: "github.com", bm: []string{"HEAD"}, want: true},
		{a: "github.com", am: []string{"GET"}, b: "github.com", bm: []string{"POST"}, want: false},
	}
	for _, tt := range tests {
		a, b := mustRule(t, tt.a, tt.am...), mustRule(t, tt.b, tt.bm...)
		if got := a.Covers(b); got != tt.want {
			t.Errorf("%s covers %s = %v, want %v", a, b, got, tt.want)
		}
	}
}

func TestSecretValidate(t *testing.T) {
	ph, err := NewPlaceholder()
	if err != nil {
		t.Fatal(err)
	}
	good := Secret{Host: "api.anthropic.com", Header: "x-api-key", Name: "ANTHROPIC_API_KEY", Value: "sk-real", Placeholder: ph}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := Secret{Host: "*.anthropic.com", Header: "x api key", Name: "1X", Port: -1}
	err = bad.Validate()
	for _, want := range []string{"wildcard", "header", "env", "no value", "placeholder", "port"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate of a bad secret: %v; want it to mention %q", err, want)
		}
	}
}
