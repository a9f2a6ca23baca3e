package egress

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestSubstitute(t *testing.T) {
	const ph = PlaceholderPrefix + "00112233445566778899aabbccddeeff"
	s := &Secret{Host: "api.example.com", Header: "authorization", Name: "TOKEN", Value: "real", Placeholder: ph}
	tests := []struct {
		name   string
		header http.Header
		want   http.Header
		did    bool
	}{
		{"bearer", http.Header{"Authorization": {"Bearer " + ph}}, http.Header{"Authorization": {"Bearer real"}}, true},
		{"bare", http.Header{"Authorization": {ph}}, http.Header{"Authorization": {"real"}}, true},
		{"twice", http.Header{"Authorization": {ph + "," + ph}}, http.Header{"Authorization": {"real,real"}}, true},
		{"other header untouched", http.Header{"X-Other": {ph}}, http.Header{"X-Other": {ph}}, false},
		{"no placeholder", http.Header{"Authorization": {"Bearer mine"}}, http.Header{"Authorization": {"Bearer mine"}}, false},
	}
	for _, tt := range tests {
		did := substitute(tt.header, s, s.Value)
		if did != tt.did || tt.header.Get("Authorization") != tt.want.Get("Authorization") || tt.header.Get("X-Other") != tt.want.Get("X-Other") {
			t.Errorf("%s: got %v %v, want %v %v", tt.name, tt.header, did, tt.want, tt.did)
		}
	}
}

func TestLeak(t *testing.T) {
	a := Secret{Host: "a.example", Header: "x-api-key", Name: "A", Value: "va", Placeholder: PlaceholderPrefix + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}
	b := Secret{Host: "b.example", Header: "x-api-key", Name: "B", Value: "vb", Placeholder: PlaceholderPrefix + "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}
	pol := &Policy{Secrets: []Secret{a, b}}
	req := func(u string, h http.Header) *http.Request {
		pu, _ := url.Parse(u)
		return &http.Request{URL: pu, Host: pu.Host, Header: h}
	}
	tests := []struct {
		name string
		own  *Secret
		r    *http.Request
		body string
		want string // leaked secret's name, or ""
	}{
		{"own header", &pol.Secrets[0], req("https://a.example/", http.Header{"X-Api-Key": {a.Placeholder}}), "", ""},
		{"own in body", &pol.Secrets[0], req("https://a.example/", nil), "k=" + a.Placeholder, ""},
		{"other's header", &pol.Secrets[0], req("https://a.example/", http.Header{"X-Api-Key": {b.Placeholder}}), "", "B"},
		{"plain header", nil, req("http://x.example/", http.Header{"Cookie": {"k=" + a.Placeholder}}), "", "A"},
		{"plain url", nil, req("http://x.example/?k="+b.Placeholder, nil), "", "B"},
		{"plain body", nil, req("http://x.example/", nil), strings.Repeat("x", 100) + a.Placeholder, "A"},
		{"clean", nil, req("http://x.example/", http.Header{"Accept": {"*/*"}}), "hello", ""},
	}
	for _, tt := range tests {
		got := pol.leak(tt.own, tt.r)
		if got == nil {
			if scan := newPlaceholderScanner(io.NopCloser(strings.NewReader(tt.body)), pol.foreign(tt.own)); scan != nil {
				_, _ = io.ReadAll(scan)
				got = scan.Found()
			}
		}
		name := ""
		if got != nil {
			name = got.Name
		}
		if name != tt.want {
			t.Errorf("%s: leak = %q, want %q", tt.name, name, tt.want)
		}
	}
}

func TestValidateSource(t *testing.T) {
	ph, _ := NewPlaceholder()
	s := Secret{Host: "a.test", Header: "Authorization", Name: "TOKEN", Placeholder: ph}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "no value") {
		t.Errorf("neither Value nor Source: %v, want no value", err)
	}
	s.Source = func(context.Context) (string, error) { return "v", nil }
	if err := s.Validate(); err != nil {
		t.Errorf("a Source alone: %v", err)
	}
}
