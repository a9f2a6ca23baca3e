package vm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSpecShares(t *testing.T) {
	ok := Spec{Kernel: "/k", StateDir: "/s"}
	tests := []struct {
		name   string
		shares []Share
		errs   []string
	}{
		{name: "none"},
		{name: "one", shares: []Share{{Tag: "workspace", HostPath: "/sb/staging"}}},
		{name: "longest tag", shares: []Share{{Tag: strings.Repeat("t", MaxShareTag), HostPath: "/x"}}},
		{name: "tag too long", shares: []Share{{Tag: strings.Repeat("t", MaxShareTag+1), HostPath: "/x"}}, errs: []string{"share 0: tag"}},
		{name: "empty tag", shares: []Share{{HostPath: "/x"}}, errs: []string{`tag ""`}},
		{name: "tag with a comma or colon", shares: []Share{{Tag: "a,b", HostPath: "/x"}, {Tag: "a:b", HostPath: "/y"}},
			errs: []string{`share 0: tag "a,b"`, `share 1: tag "a:b"`}},
		{name: "same tag twice and relative path", shares: []Share{{Tag: "w", HostPath: "/x"}, {Tag: "w", HostPath: "rel"}},
			errs: []string{`tag "w" is used twice`, `host path "rel" is not absolute`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			s.Shares = tt.shares
			err := s.Validate()
			if len(tt.errs) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate: no error")
			}
			for _, want := range tt.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func TestSpecSharesJSON(t *testing.T) {
	s := Spec{Kernel: "/k", StateDir: "/s", Shares: []Share{{Tag: "workspace", HostPath: "/sb", ReadOnly: true}}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"shares":[{"tag":"workspace","host_path":"/sb","read_only":true}]`) {
		t.Errorf("JSON: %s", b)
	}
	var back Spec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}
