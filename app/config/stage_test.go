package config

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/egress"
)

// TestStageFromTOML: [[network.stage]] entries as the user's config.toml
// and a project's airlock.toml spell them, with their defaults.
func TestStageFromTOML(t *testing.T) {
	const file = `
[[network.stage]]
host = "api.github.com"

[[network.stage]]
host = "hooks.slack.com:8443"
methods = ["post", "PUT"]
paths = ["/services/**", "/repos/*/*/issues/*/comments"]
max_body = "2M"
reply = { status = 201, headers = { "X-Held" = "yes" }, body = '{"id": {{id}}}' }

[[network.stage]]
host = "api.sendgrid.com"
max_body = 4096
[network.stage.reply]
status = 204
`
	want := []egress.Stage{
		{Host: "api.github.com", Source: "user"},
		{Host: "hooks.slack.com", Port: 8443, Methods: []string{"POST", "PUT"}, Paths: []string{"/services/**", "/repos/*/*/issues/*/comments"},
			MaxBody: 2 << 20, Source: "user", Reply: egress.Reply{Status: 201, Header: map[string]string{"X-Held": "yes"}, Body: `{"id": {{id}}}`}},
		{Host: "api.sendgrid.com", MaxBody: 4096, Source: "user", Reply: egress.Reply{Status: 204}},
	}

	p := filepath.Join(t.TempDir(), "config.toml")
	writeFile(t, p, file, 0o600)
	u, err := LoadUser(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := u.Network.Stages("user")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("user stages (-want +got):\n%s", diff)
	}
	if m := got[0].StageMethods(); strings.Join(m, ",") != "POST,PUT,PATCH,DELETE" {
		t.Errorf("default methods %v", m)
	}
	if s := u.Network.Stage[1].String(); s != "stage hooks.slack.com:8443 (POST,PUT) /services/** /repos/*/*/issues/*/comments" {
		t.Errorf("String() = %q", s)
	}

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, FileName), file, 0o644)
	proj, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err = proj.Network.Stages("project")
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i].Source = "project"
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("project stages (-want +got):\n%s", diff)
	}

	// A typo in an entry is named.
	writeFile(t, filepath.Join(dir, FileName), "[[network.stage]]\nhost = \"a.com\"\nreplly = {}\n", 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "unknown keys network.stage.replly") {
		t.Errorf("a typo: %v", err)
	}
}

// TestStageBadEntries: every bad entry is reported at once, with its
// number, from either file.
func TestStageBadEntries(t *testing.T) {
	const file = `
[[network.stage]]
host = "ok.example.com"

[[network.stage]]
host = "a.example.com"
reply = { status = 404 }

[[network.stage]]
host = "b.example.com:*"

[[network.stage]]
host = "c.example.com (POST)"

[[network.stage]]
host = "d.example.com"
paths = ["repos/*/issues"]

[[network.stage]]
host = "e.example.com"
paths = ["/a**"]

[[network.stage]]
host = "f.example.com"
max_body = "100M"

[[network.stage]]
host = "g.example.com"
max_body = "none"

[[network.stage]]
host = "*"

[[network.stage]]
host = "h.example.com"
methods = ["CONNECT"]
reply = { headers = { "Content-Length" = "3" } }
`
	wants := []string{
		"network.stage 2", "reply status 404",
		"network.stage 3", "one port",
		"network.stage 4", "give the methods in methods = [...]",
		"network.stage 5", "absolute path",
		"network.stage 6", "whole segments",
		"network.stage 7", "max_body 100.0 MiB: want at most 16.0 MiB",
		"network.stage 8", "max_body none: a stage holds bodies up to a limit",
		"network.stage 9", "wildcard",
		"network.stage 10", `method "CONNECT"`, "set by the proxy",
	}
	p := filepath.Join(t.TempDir(), "config.toml")
	writeFile(t, p, file, 0o600)
	_, userErr := LoadUser(p)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, FileName), file, 0o644)
	_, projErr := Load(dir)
	for name, err := range map[string]error{"user": userErr, "project": projErr} {
		for _, w := range wants {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s file: %v\nwant it to say %q", name, err, w)
			}
		}
		if err != nil && strings.Contains(err.Error(), "network.stage 1:") {
			t.Errorf("%s file: the good entry is reported: %v", name, err)
		}
	}
	if _, err := (Network{Stage: []StageRule{{Host: "x.com", MaxBody: 3 * KiB}}}).Stages("user"); err != nil {
		t.Errorf("a small max_body: %v", err)
	}
}

// TestStageWidening: a project's stage is a widening when no user rule
// (or flag) already allows what it holds: once approved, the host sends
// it.
func TestStageWidening(t *testing.T) {
	user := Network{Allow: []string{"*.github.com"}, Host: []HostRule{{Host: "slack.com", Methods: []string{"GET"}}, {Host: "api.sendgrid.com", Methods: []string{"POST", "GET"}}}}
	flags := []egress.Rule{{Host: "hooks.example.com", Source: "flag"}}
	project := Network{Stage: []StageRule{
		{Host: "api.github.com", Paths: []string{"/repos/**"}}, // *.github.com allows every method
		{Host: "slack.com"}, // GET only
		{Host: "api.sendgrid.com", Methods: []string{"POST"}}, // POST allowed
		{Host: "api.sendgrid.com"},                            // PUT, PATCH, DELETE are not
		{Host: "hooks.example.com"},                           // a flag allows it
		{Host: "evil.com"},
		{Host: "api.github.com:8443"}, // another port
	}}
	got := Widening(user, project, flags)
	want := []string{
		"stage slack.com (POST,PUT,PATCH,DELETE)",
		"stage api.sendgrid.com (POST,PUT,PATCH,DELETE)",
		"stage evil.com (POST,PUT,PATCH,DELETE)",
		"stage api.github.com:8443 (POST,PUT,PATCH,DELETE)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Widening (-want +got):\n%s", diff)
	}
	// An entry that does not parse does not shift the names of the rest.
	got = Widening(user, Network{Stage: []StageRule{{Host: "*"}, {Host: "evil.com", Methods: []string{"POST"}}}}, nil)
	if diff := cmp.Diff([]string{"stage evil.com (POST)"}, got); diff != "" {
		t.Errorf("Widening after a bad entry (-want +got):\n%s", diff)
	}
}

// TestStagePolicy: the user's stages always count; an untrusted
// project's stage counts only when the user's rules allow what it holds
// anyway (it narrows), a trusted project's always.
func TestStagePolicy(t *testing.T) {
	user := User{Network: Network{
		Allow: []string{"*.github.com"},
		Stage: []StageRule{{Host: "api.slack.com"}},
	}}
	project := Project{Network: Network{Stage: []StageRule{
		{Host: "api.github.com", Methods: []string{"POST"}, Reply: StageReply{Status: 201}},
		{Host: "evil.com"},
	}}}
	hosts := func(pol *egress.Policy) []string {
		var out []string
		for _, st := range pol.Stage {
			out = append(out, st.Source+" "+st.String())
		}
		return out
	}
	pol, err := Policy(PolicyInput{User: user, Project: project})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"user api.slack.com (POST,PUT,PATCH,DELETE)", "project api.github.com (POST)"}, hosts(pol)); diff != "" {
		t.Errorf("untrusted (-want +got):\n%s", diff)
	}
	if !pol.Inspects() {
		t.Error("a policy with stages does not inspect")
	}
	held := func(pol *egress.Policy, host string) bool {
		d := pol.Decide(egress.Request{Host: host, Port: 443, Method: "POST", Path: "/x", Connect: true})
		return d.Allowed && d.Stage != nil
	}
	if !held(pol, "api.github.com") || !held(pol, "api.slack.com") || held(pol, "evil.com") {
		t.Error("untrusted: what is held is not what the stages say")
	}
	if d := pol.Decide(egress.Request{Host: "evil.com", Port: 443, Method: "CONNECT", Connect: true, Inspect: true}); d.Allowed {
		t.Errorf("an untrusted project's stage opened evil.com: %+v", d)
	}

	pol, err = Policy(PolicyInput{User: user, Project: project, ProjectTrusted: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"user api.slack.com (POST,PUT,PATCH,DELETE)", "project api.github.com (POST)", "project evil.com (POST,PUT,PATCH,DELETE)"}, hosts(pol)); diff != "" {
		t.Errorf("trusted (-want +got):\n%s", diff)
	}
	if !held(pol, "evil.com") {
		t.Error("trusted: the project's stage does not hold")
	}

	// A project's deny still wins over the user's stage.
	project.Network.Deny = []string{"api.slack.com"}
	pol, err = Policy(PolicyInput{User: user, Project: project})
	if err != nil {
		t.Fatal(err)
	}
	if d := pol.Decide(egress.Request{Host: "api.slack.com", Port: 443, Method: "CONNECT", Connect: true, Inspect: true}); d.Allowed {
		t.Errorf("a denied staged host: %+v", d)
	}

	// A bad stage entry fails the policy, naming it.
	user.Network.Stage = append(user.Network.Stage, StageRule{Host: "x.com", Reply: StageReply{Status: 500}})
	if _, err := Policy(PolicyInput{User: user}); err == nil || !strings.Contains(err.Error(), "network.stage 2") {
		t.Errorf("a bad stage: %v", err)
	}
}
