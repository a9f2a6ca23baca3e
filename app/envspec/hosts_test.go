package envspec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseAddHost(t *testing.T) {
	good := map[string]HostEntry{
		"db:10.0.0.5":                       {Name: "db", IP: "10.0.0.5"},
		"db=10.0.0.5":                       {Name: "db", IP: "10.0.0.5"},
		"host.docker.internal:host-gateway": {Name: "host.docker.internal", IP: "127.0.0.1"},
		"v6:::1":                            {Name: "v6", IP: "::1"},
		"v6:[2001:DB8::33]":                 {Name: "v6", IP: "2001:db8::33"},
		"v6=2001:db8:0:0::33":               {Name: "v6", IP: "2001:db8::33"},
		"under_score-1.example:127.0.0.1":   {Name: "under_score-1.example", IP: "127.0.0.1"},
	}
	for in, want := range good {
		got, err := ParseAddHost(in)
		if err != nil || got != want {
			t.Errorf("ParseAddHost(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	bad := []string{
		"",
		"db",                           // no address
		"db:",                          // empty address
		":1.2.3.4",                     // empty name
		"evil\n1.2.3.4 x:127.0.0.1",    // a second line in the name
		"evil:1.2.3.4\n5.6.7.8 github", // a second line in the address
		"evil:1.2.3.4 other",           // a second name
		"two names:1.2.3.4",            // a space in the name
		"tab\tname:1.2.3.4",            // a tab
		"x:1.2.3.4\x00",                // a NUL
		"-dash:1.2.3.4",                // a name starting with '-'
		"dash-:1.2.3.4",                // ending with '-'
		"a..b:1.2.3.4",                 // an empty label
		".a:1.2.3.4",                   // a leading dot
		"#comment:1.2.3.4",             // /etc/hosts comment
		"x:1.2.3",                      // not an address
		"x:1.2.3.4.5",                  //
		"x:01.2.3.4",                   // leading zero
		"x:localhost",                  // a name is not an address
		"x:fe80::1%eth0",               // a zone
		"x:[fe80::1%eth0]",             //
		"x:host-gateway6",              //
		"1.2.3.4:1.2.3.4",              // an address as the name
		"ünïcode:1.2.3.4",              // not ASCII
		strings.Repeat("a", 64) + ":1.2.3.4",
		strings.Repeat("a.", 127) + "a:1.2.3.4", // 255 characters
	}
	for _, in := range bad {
		if got, err := ParseAddHost(in); err == nil {
			t.Errorf("ParseAddHost(%q) = %+v, want an error", in, got)
		}
	}
	for _, h := range []HostEntry{{Name: "x", IP: "127.0.0.01"}, {Name: "x", IP: "::0001"}, {Name: "x y", IP: "1.2.3.4"}, {Name: "x", IP: "1.2.3.4\nevil"}} {
		if CheckHostEntry(h) == nil {
			t.Errorf("CheckHostEntry(%+v) passed", h)
		}
	}
	if err := CheckHostEntry(HostEntry{Name: "db", IP: "2001:db8::33"}); err != nil {
		t.Error(err)
	}
}

// TestStartAndAddHosts reads postStartCommand, postAttachCommand and
// runArgs --add-host: they are kept for every sandbox, asked of the user
// (ConfirmKey), and not part of what is built (Key).
func TestStartAndAddHosts(t *testing.T) {
	read := func(t *testing.T, body string) *Environment {
		t.Helper()
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{".devcontainer/devcontainer.json": body})
		env, err := Find(dir)
		if err != nil {
			t.Fatalf("Find: %v", err)
		}
		return env
	}
	plain := read(t, `{"image": "debian:bookworm", "postCreateCommand": "make"}`)
	env := read(t, `{"image": "debian:bookworm", "postCreateCommand": "make",
		"postAttachCommand": ["echo", "attached"],
		"postStartCommand": {"b": "echo b", "a": ["echo", "a"]},
		"runArgs": ["--add-host", "db:10.0.0.5", "--add-host=host.docker.internal:host-gateway", "--add-host", "v6=::1"]}`)
	want := []Step{
		{Origin: "postStartCommand", Name: "a", Argv: []string{"echo", "a"}},
		{Origin: "postStartCommand", Name: "b", Shell: "echo b"},
		{Origin: "postAttachCommand", Argv: []string{"echo", "attached"}},
	}
	if diff := cmp.Diff(want, env.Start); diff != "" {
		t.Errorf("Start (-want +got):\n%s", diff)
	}
	wantHosts := []HostEntry{{"db", "10.0.0.5"}, {"host.docker.internal", "127.0.0.1"}, {"v6", "::1"}}
	if diff := cmp.Diff(wantHosts, env.AddHosts); diff != "" {
		t.Errorf("AddHosts (-want +got):\n%s", diff)
	}
	if !env.AsWritten() {
		t.Errorf("not as written: %v", env.Warnings)
	}
	if env.Key() != plain.Key() {
		t.Error("start commands and /etc/hosts entries changed the image's key: adding one would rebuild the environment")
	}
	if env.ConfirmKey() == plain.ConfirmKey() {
		t.Error("start commands and /etc/hosts entries are not part of what the user confirms")
	}
	// Each change asks again.
	for _, other := range []string{
		`"postStartCommand": {"b": "echo b", "a": ["echo", "A"]}, "postAttachCommand": ["echo", "attached"]`,
		`"postStartCommand": {"b": "echo b", "a": ["echo", "a"]}, "postAttachCommand": "echo attached"`,
		`"postStartCommand": {"b": "echo b", "a": ["echo", "a"]}`,
		`"postAttachCommand": {"b": "echo b", "a": ["echo", "a"]}, "postStartCommand": ["echo", "attached"]`,
	} {
		o := read(t, `{"image": "debian:bookworm", "postCreateCommand": "make", `+other+`,
			"runArgs": ["--add-host", "db:10.0.0.5", "--add-host=host.docker.internal:host-gateway", "--add-host", "v6=::1"]}`)
		if o.ConfirmKey() == env.ConfirmKey() {
			t.Errorf("%s: the same confirmation", other)
		}
	}
	o := read(t, `{"image": "debian:bookworm", "postCreateCommand": "make", "postAttachCommand": ["echo", "attached"],
		"postStartCommand": {"b": "echo b", "a": ["echo", "a"]}, "runArgs": ["--add-host", "db:10.0.0.6", "--add-host=host.docker.internal:host-gateway", "--add-host", "v6=::1"]}`)
	if o.ConfirmKey() == env.ConfirmKey() {
		t.Error("another address: the same confirmation")
	}
	// An image-only environment with a start command asks too (the
	// image asks already); so does airlock.toml's, unchanged.
	if !read(t, `{"image": "debian:bookworm", "postStartCommand": "x"}`).AsksConfirmation() {
		t.Error("a start command is not confirmed")
	}
	// An empty command is nothing to run.
	if e := read(t, `{"image": "debian:bookworm", "postStartCommand": " "}`); len(e.Start) != 0 || !e.AsWritten() {
		t.Errorf("an empty postStartCommand: %+v %v", e.Start, e.Warnings)
	}
}

func TestStartAndAddHostsRefused(t *testing.T) {
	const dev = ".devcontainer/devcontainer.json"
	many := make([]string, MaxAddHosts+1)
	for i := range many {
		many[i] = fmt.Sprintf(`"--add-host=h%d:10.0.0.1"`, i)
	}
	tests := []struct{ body, want string }{
		{`"runArgs": ["--add-host", "evil\n1.2.3.4 x:127.0.0.1"]`, "runArgs[0]: --add-host"},
		{`"runArgs": ["--add-host=a b:1.2.3.4"]`, "runArgs[0]: --add-host"},
		{`"runArgs": ["--privileged", "--add-host", "x:1.2.3.4 github.com"]`, "runArgs[1]: --add-host"},
		{`"runArgs": ["--add-host", "x:no"]`, "not an IP address"},
		{`"runArgs": [` + strings.Join(many, ", ") + `]`, fmt.Sprintf("%d --add-host entries, more than the %d", MaxAddHosts+1, MaxAddHosts)},
		{`"postStartCommand": ["sh", "-c", "x\u0000y"]`, "postStartCommand[2]"},
		{`"postStartCommand": []`, "postStartCommand: an empty command"},
		{`"postAttachCommand": 7`, "postAttachCommand: want a string"},
		{`"postAttachCommand": {"a": {"b": "c"}}`, "postAttachCommand.a: want a string"},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{dev: `{"image": "debian:bookworm", ` + tt.body + `}`})
		env, err := Find(dir)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), dev) {
			t.Errorf("%s: Find = %+v, %v; want an error naming %s and %q", tt.body, env, err, dev, tt.want)
		}
	}
}
