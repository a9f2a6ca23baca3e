package envspec

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeTree writes files (slash paths relative to dir) into dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const devImage = `{"image": "mcr.microsoft.com/devcontainers/go:1"}`

func TestFind(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  *Environment
	}{
		{name: "nothing", want: nil},
		{name: "airlock.toml without [environment]", files: map[string]string{"airlock.toml": "verify = \"make\"\n"}, want: nil},
		{
			name: "airlock.toml",
			files: map[string]string{"airlock.toml": `
verify = "go test ./..."
[environment]
image = "golang:1.24-bookworm"
apt = ["make", "libssl-dev=3.0.15-1~deb12u1", "g++"]
setup = ["go install golang.org/x/tools/gopls@latest", "make deps"]
user = "dev"
hosts = ["proxy.golang.org", "*.golang.org:443"]
[environment.env]
GOFLAGS = "-mod=mod"
CGO_ENABLED = "0"
`},
			want: &Environment{
				Source: "airlock.toml",
				Image:  "golang:1.24-bookworm",
				Apt:    []string{"make", "libssl-dev=3.0.15-1~deb12u1", "g++"},
				Setup: []Step{
					{Origin: "setup", Shell: "go install golang.org/x/tools/gopls@latest"},
					{Origin: "setup", Shell: "make deps"},
				},
				Env:   map[string]string{"GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"},
				User:  "dev",
				Hosts: []string{"proxy.golang.org", "*.golang.org:443"},
			},
		},
		{
			name:  "airlock.toml with an empty [environment] is the agent image, and still wins",
			files: map[string]string{"airlock.toml": "[environment]\n", ".devcontainer.json": devImage},
			want:  &Environment{Source: "airlock.toml"},
		},
		{
			name:  ".devcontainer/devcontainer.json",
			files: map[string]string{".devcontainer/devcontainer.json": devImage},
			want:  &Environment{Source: ".devcontainer/devcontainer.json", Image: "mcr.microsoft.com/devcontainers/go:1"},
		},
		{
			name:  ".devcontainer.json",
			files: map[string]string{".devcontainer.json": devImage},
			want:  &Environment{Source: ".devcontainer.json", Image: "mcr.microsoft.com/devcontainers/go:1"},
		},
		{
			name: "airlock.toml wins over devcontainer.json",
			files: map[string]string{
				"airlock.toml":                    "[environment]\nimage = \"debian:bookworm\"\n",
				".devcontainer/devcontainer.json": devImage,
				".devcontainer.json":              devImage,
			},
			want: &Environment{Source: "airlock.toml", Image: "debian:bookworm"},
		},
		{
			name: "airlock.toml without [environment] falls through to devcontainer.json",
			files: map[string]string{
				"airlock.toml":                    "exclude = [\"*.log\"]\n",
				".devcontainer/devcontainer.json": devImage,
			},
			want: &Environment{Source: ".devcontainer/devcontainer.json", Image: "mcr.microsoft.com/devcontainers/go:1"},
		},
		{
			name: ".devcontainer/ wins over .devcontainer.json",
			files: map[string]string{
				".devcontainer/devcontainer.json": devImage,
				".devcontainer.json":              `{"image": "debian:bookworm"}`,
			},
			want: &Environment{Source: ".devcontainer/devcontainer.json", Image: "mcr.microsoft.com/devcontainers/go:1"},
		},
		{
			name: "comments and trailing commas",
			files: map[string]string{".devcontainer/devcontainer.json": `// The project's environment.
{
	/* the base image,
	   pinned */
	"name": "Go", // a label
	"image": "golang:1.24", /* trailing comment */
	"containerEnv": {
		"A": "1", // a trailing comma next
	},
	"remoteUser": "vscode",
	"workspaceFolder": "/workspaces/project",
}
`},
			want: &Environment{
				Source: ".devcontainer/devcontainer.json", Image: "golang:1.24",
				Env: map[string]string{"A": "1"}, User: "vscode", WorkspaceFolder: "/workspaces/project",
			},
		},
		{
			name: "every command form, onCreate before postCreate, named commands in name order",
			files: map[string]string{".devcontainer.json": `{
	"image": "debian:bookworm",
	"onCreateCommand": "apt-get update && apt-get install -y make",
	"postCreateCommand": {
		"z-shell": "make deps",
		"a-argv": ["go", "mod", "download"],
	},
}`},
			want: &Environment{
				Source: ".devcontainer.json", Image: "debian:bookworm",
				Setup: []Step{
					{Origin: "onCreateCommand", Shell: "apt-get update && apt-get install -y make"},
					{Origin: "postCreateCommand", Name: "a-argv", Argv: []string{"go", "mod", "download"}},
					{Origin: "postCreateCommand", Name: "z-shell", Shell: "make deps"},
				},
			},
		},
		{
			name: "array form",
			files: map[string]string{".devcontainer.json": `{"image": "debian:bookworm",
				"onCreateCommand": ["npm", "ci", "--ignore-scripts"], "postCreateCommand": "npm run build"}`},
			want: &Environment{
				Source: ".devcontainer.json", Image: "debian:bookworm",
				Setup: []Step{
					{Origin: "onCreateCommand", Argv: []string{"npm", "ci", "--ignore-scripts"}},
					{Origin: "postCreateCommand", Shell: "npm run build"},
				},
			},
		},
		{
			name: "remoteEnv over containerEnv, null unsets",
			files: map[string]string{".devcontainer.json": `{"image": "debian:bookworm",
				"containerEnv": {"A": "container", "B": "container", "C": "container"},
				"remoteEnv": {"A": "remote", "C": null, "D": "remote"}}`},
			want: &Environment{
				Source: ".devcontainer.json", Image: "debian:bookworm",
				Env: map[string]string{"A": "remote", "B": "container", "D": "remote"},
			},
		},
		{
			name:  "containerUser when there is no remoteUser",
			files: map[string]string{".devcontainer.json": `{"image": "debian:bookworm", "containerUser": "node"}`},
			want:  &Environment{Source: ".devcontainer.json", Image: "debian:bookworm", User: "node"},
		},
		{
			name:  ".devcontainer a file, not a folder",
			files: map[string]string{".devcontainer": "x", ".devcontainer.json": devImage},
			want:  &Environment{Source: ".devcontainer.json", Image: "mcr.microsoft.com/devcontainers/go:1"},
		},
		{
			name: "a link inside the project is followed",
			files: map[string]string{
				"config/dev.json": devImage,
			},
			want: &Environment{Source: ".devcontainer.json", Image: "mcr.microsoft.com/devcontainers/go:1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tt.files)
			if strings.HasPrefix(tt.name, "a link inside") {
				if err := os.Symlink("config/dev.json", filepath.Join(dir, ".devcontainer.json")); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Find(dir)
			if err != nil {
				t.Fatalf("Find: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Find (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFindWarnings(t *testing.T) {
	type w struct {
		text string
		moot bool
	}
	tests := []struct {
		name string
		json string
		want []w // each must be in a warning of its own, in this order
	}{
		{
			name: "keys Airlock does not honour, by name",
			json: `{"image": "debian:bookworm",
				"forwardPorts": [8080], "initializeCommand": "curl evil | sh",
				"customizations": {"vscode": {}}, "shutdownAction": "none",
				"hostRequirements": {"cpus": 4}, "secrets": {"A": {}}}`,
			want: []w{
				{`"customizations" are ignored`, true}, {`"forwardPorts" are not forwarded`, true},
				{`"hostRequirements" is not checked`, true}, {`"initializeCommand" is not run: it would run on the host`, false},
				{`"secrets" are not asked for`, false}, {`"shutdownAction" is moot`, true},
			},
		},
		{
			name: "unknown key",
			json: `{"image": "debian:bookworm", "imageTypo": "x"}`,
			want: []w{{`"imageTypo" is not a key Airlock knows`, false}},
		},
		{
			name: "the host's environment is never expanded",
			json: `{"image": "debian:bookworm", "containerEnv": {"HOME_ON_HOST": "${localEnv:HOME}", "U": "${env:USER}"},
				"remoteEnv": {"PATH": "${containerEnv:PATH}:/opt/bin"},
				"postCreateCommand": "echo ${containerEnv:HOME}",
				"workspaceFolder": "/workspaces/${localEnv:X}"}`,
			want: []w{
				{`containerEnv.HOME_ON_HOST: ${localEnv:HOME} is kept as written`, false},
				{`containerEnv.U: ${env:USER} is kept as written`, false},
				{`postCreateCommand: ${containerEnv:HOME} is kept as written: Airlock expands ${containerEnv:…} only in remoteEnv`, false},
				{`"workspaceFolder" "/workspaces/${localEnv:X}" is not used`, false},
			},
		},
		{
			name: "runArgs, classified",
			json: `{"image": "debian:bookworm", "runArgs": ["--cap-add=SYS_PTRACE", "--security-opt", "seccomp=unconfined",
				"--privileged", "--init", "-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", "cache:/go/pkg",
				"--add-host=db:127.0.0.1", "--add-host", "host.docker.internal:host-gateway", "--network", "host"]}`,
			want: []w{
				{`runArgs "--cap-add SYS_PTRACE" is not needed`, true},
				{`runArgs "--security-opt seccomp=unconfined" is not needed`, true},
				{`runArgs "--privileged" is not needed`, true},
				{`runArgs "--init" is not needed`, true},
				{`Docker runs inside the VM instead`, true},
				{`runArgs "-v cache:/go/pkg" is a named volume`, true},
				{`runArgs "--add-host host.docker.internal:host-gateway": host.docker.internal is the VM itself (127.0.0.1)`, true},
				{`runArgs "--network host" is ignored`, false},
			},
		},
		{
			name: "mounts, classified",
			json: `{"image": "debian:bookworm", "mounts": ["source=hist,target=/h,type=volume",
				"source=/var/run/docker.sock,target=/var/run/docker-host.sock,type=bind",
				{"source": "${localEnv:HOME}/.ssh", "target": "/root/.ssh", "type": "bind"}]}`,
			want: []w{{`is a volume`, true}, {`Docker runs inside the VM instead`, true}, {`is not mounted: nothing of the host`, false}},
		},
		{
			name: "features",
			json: `{"image": "debian:bookworm", "features": {
				"ghcr.io/devcontainers/features/node:1": {"version": "20"},
				"ghcr.io/devcontainers/features/docker-outside-of-docker:1": {},
				"ghcr.io/devcontainers/features/sshd:1": {},
				"ghcr.io/example/features/node:1": {},
				"./local": {},
				"https://example.com/f.tgz": {}}}`,
			want: []w{
				{`feature "./local" is not installed`, false},
				{`feature "ghcr.io/devcontainers/features/docker-outside-of-docker:1" becomes Docker inside the VM`, true},
				{`feature "https://example.com/f.tgz" is not installed`, false},
			},
		},
		{
			name: "containerUser beside remoteUser",
			json: `{"image": "debian:bookworm", "remoteUser": "dev", "containerUser": "root"}`,
			want: []w{{`"containerUser" "root" is not used`, false}},
		},
		{
			name: "an empty command is nothing to run",
			json: `{"image": "debian:bookworm", "postCreateCommand": "", "onCreateCommand": {"a": " "}}`,
			want: []w{{`"onCreateCommand.a" is empty`, true}, {`"postCreateCommand" is empty`, true}},
		},
		{name: "labels are not warned about", json: `{"image": "debian:bookworm", "name": "x", "$schema": "y"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{".devcontainer/devcontainer.json": tt.json})
			env, err := Find(dir)
			if err != nil {
				t.Fatalf("Find: %v", err)
			}
			var all []string
			for _, w := range env.Warnings {
				all = append(all, fmt.Sprintf("%v %s", w.Moot, w.Text))
			}
			if len(env.Warnings) != len(tt.want) {
				t.Fatalf("Warnings:\n%s\nwant %d", strings.Join(all, "\n"), len(tt.want))
			}
			for i, want := range tt.want {
				got := env.Warnings[i]
				if !strings.HasPrefix(got.Text, ".devcontainer/devcontainer.json: ") || !strings.Contains(got.Text, want.text) || !strings.HasSuffix(got.Text, ".") {
					t.Errorf("warning %d = %q, want the file, %q, and a full stop", i, got.Text, want.text)
				}
				if got.Moot != want.moot {
					t.Errorf("warning %d (%q): moot %v, want %v", i, got.Text, got.Moot, want.moot)
				}
			}
			if ok := env.AsWritten(); ok != !slices.ContainsFunc(tt.want, func(w w) bool { return !w.moot }) {
				t.Errorf("AsWritten() = %v with warnings\n%s", ok, strings.Join(all, "\n"))
			}
		})
	}
}

func TestFindErrors(t *testing.T) {
	const toml, dev = "airlock.toml", ".devcontainer/devcontainer.json"
	env := func(body string) map[string]string { return map[string]string{toml: "[environment]\n" + body} }
	devc := func(body string) map[string]string {
		return map[string]string{dev: `{"image": "debian:bookworm", ` + body + `}`}
	}
	tests := []struct {
		name  string
		files map[string]string
		want  []string // every one in the error
	}{
		{name: "toml unknown key", files: env("imgae = \"x\"\n"), want: []string{toml, "environment.imgae", "image, dockerfile, context, args, target, docker, apt, setup, env, user, hosts"}},
		{name: "toml bad syntax", files: env("apt = [\n"), want: []string{toml}},
		{name: "toml apt upper case", files: env(`apt = ["Make"]`), want: []string{toml, "[environment] apt[0]", `"Make" is not a Debian package name`}},
		{name: "toml apt one character", files: env(`apt = ["a"]`), want: []string{"apt[0]", "not a Debian package name"}},
		{name: "toml apt leading dash", files: env(`apt = ["-oAPT::x=1"]`), want: []string{"apt[0]", "not a Debian package name"}},
		{name: "toml apt shell", files: env(`apt = ["make; rm -rf /"]`), want: []string{"apt[0]", "not a Debian package name"}},
		{name: "toml apt architecture", files: env(`apt = ["make:amd64"]`), want: []string{"apt[0]", "not a Debian package name"}},
		{name: "toml apt bad version", files: env(`apt = ["make", "make=latest"]`), want: []string{"apt[1]", "not a Debian package name"}},
		{name: "toml apt empty", files: env(`apt = [""]`), want: []string{"apt[0]"}},
		{name: "toml env key digit", files: env("[environment.env]\n1X = \"y\"\n"), want: []string{toml, "[environment] env.1X", "not a variable name"}},
		{name: "toml env key dash", files: env("[environment.env]\n\"A-B\" = \"y\"\n"), want: []string{"env.A-B", "not a variable name"}},
		{name: "toml env key equals", files: env("[environment.env]\n\"A=B\" = \"y\"\n"), want: []string{"env.A=B", "not a variable name"}},
		{name: "toml env value NUL", files: env("[environment.env]\nA = \"x\\u0000y\"\n"), want: []string{"env.A", "NUL"}},
		{name: "toml setup NUL", files: env(`setup = ["make\u0000 x"]`), want: []string{toml, "[environment] setup[0]", "NUL"}},
		{name: "toml setup empty", files: env(`setup = ["make", "  "]`), want: []string{"setup[1]", "empty command"}},
		{name: "toml user space", files: env(`user = "bad user"`), want: []string{toml, "[environment] user", "not a POSIX user name"}},
		{name: "toml user dash", files: env(`user = "-x"`), want: []string{"user", "not a POSIX user name"}},
		{name: "toml user long", files: env(`user = "` + strings.Repeat("a", 33) + `"`), want: []string{"user", "not a POSIX user name"}},
		{name: "toml user NUL", files: env(`user = "a\u0000"`), want: []string{"user", "NUL"}},
		{name: "toml image space", files: env(`image = "debian bookworm"`), want: []string{toml, "[environment] image", "white space"}},
		{name: "toml image tab", files: env(`image = "debian\tx"`), want: []string{"image", "white space"}},
		{name: "toml image dash", files: env(`image = "--help"`), want: []string{"image", "starts with '-'"}},
		{name: "toml image NUL", files: env(`image = "debian\u0000"`), want: []string{"image", "NUL"}},
		{name: "toml hosts", files: env(`hosts = ["ok.example.com", "*", "a.com:0"]`), want: []string{toml, "[environment] hosts[1]", "[environment] hosts[2]"}},
		{
			name:  "toml every problem at once",
			files: env("image = \"a b\"\napt = [\"X\"]\nuser = \"a b\"\n[environment.env]\n1 = \"\"\n"),
			want:  []string{"[environment] image", "[environment] apt[0]", "[environment] user", "[environment] env.1"},
		},
		{name: "toml NUL byte in file", files: map[string]string{toml: "# \x00\n[environment]\n"}, want: []string{toml, "NUL byte"}},
		{name: "toml too large", files: map[string]string{toml: "[environment]\n#" + strings.Repeat("x", 1<<20) + "\n"}, want: []string{toml, "larger than"}},
		{name: "toml bad elsewhere in the file", files: map[string]string{toml: "[limits]\ncpu = 1\n[environment]\n"}, want: []string{toml, "limits.cpu"}},

		{name: "dev not JSON", files: map[string]string{dev: `{"image": }`}, want: []string{dev, "not JSON"}},
		{name: "dev not an object", files: map[string]string{dev: `["image"]`}, want: []string{dev, "not a JSON object"}},
		{name: "dev too large", files: map[string]string{dev: `{"image": "debian", "x": "` + strings.Repeat("x", 1<<20) + `"}`}, want: []string{dev, "larger than"}},
		{name: "dev NUL byte in file", files: map[string]string{dev: "{\"image\": \"debian\"}\x00"}, want: []string{dev, "NUL byte"}},
		{
			name:  "dev build.dockerfile that is not there",
			files: map[string]string{dev: `{"build": {"dockerfile": "Dockerfile"}}`},
			want:  []string{dev, "build.dockerfile", `"Dockerfile" is not a file of the project`},
		},
		{name: "dev no image at all", files: map[string]string{dev: `{"remoteUser": "dev"}`}, want: []string{dev, `no "image", "build" or "dockerComposeFile"`, "airlock.toml's [environment]"}},
		{name: "dev compose file that is not there", files: map[string]string{dev: `{"dockerComposeFile": "c.yml", "service": "a"}`}, want: []string{dev, "dockerComposeFile[0]", ".devcontainer/c.yml cannot be read"}},
		{name: "dev image empty", files: map[string]string{dev: `{"image": ""}`}, want: []string{dev, "image: empty"}},
		{name: "dev image not a string", files: map[string]string{dev: `{"image": 7}`}, want: []string{dev, "image: want a string"}},
		{name: "dev image space", files: map[string]string{dev: `{"image": "debian bookworm"}`}, want: []string{dev, "image", "white space"}},
		{name: "dev image NUL escape", files: map[string]string{dev: `{"image": "debian\u0000"}`}, want: []string{dev, "image", "NUL"}},
		{name: "dev containerEnv key", files: devc(`"containerEnv": {"A B": "x"}`), want: []string{dev, "containerEnv.A B", "not a variable name"}},
		{name: "dev remoteEnv key", files: devc(`"remoteEnv": {"9": "x"}`), want: []string{dev, "remoteEnv.9", "not a variable name"}},
		{name: "dev remoteEnv value NUL", files: devc(`"remoteEnv": {"A": "\u0000"}`), want: []string{dev, "remoteEnv.A", "NUL"}},
		{name: "dev containerEnv not strings", files: devc(`"containerEnv": {"A": 1}`), want: []string{dev, "containerEnv", "want an object of strings"}},
		{name: "dev remoteUser", files: devc(`"remoteUser": "root; id"`), want: []string{dev, "remoteUser", "not a POSIX user name"}},
		{name: "dev containerUser", files: devc(`"containerUser": "a:b"`), want: []string{dev, "containerUser", "not a POSIX user name"}},
		{name: "dev command a number", files: devc(`"onCreateCommand": 7`), want: []string{dev, "onCreateCommand", "want a string"}},
		{name: "dev command empty array", files: devc(`"postCreateCommand": []`), want: []string{dev, "postCreateCommand", "empty command"}},
		{name: "dev command array of numbers", files: devc(`"postCreateCommand": [1, 2]`), want: []string{dev, "postCreateCommand", "array of strings"}},
		{name: "dev command empty program", files: devc(`"postCreateCommand": ["", "x"]`), want: []string{dev, "postCreateCommand", "program"}},
		{name: "dev command NUL", files: devc(`"postCreateCommand": ["make", "a\u0000"]`), want: []string{dev, "postCreateCommand[1]", "NUL"}},
		{name: "dev named command bad", files: devc(`"postCreateCommand": {"a": "make", "b": {"c": "d"}}`), want: []string{dev, "postCreateCommand.b", "want a string"}},
		{name: "dev workspaceFolder relative", files: devc(`"workspaceFolder": "src"`), want: []string{dev, "workspaceFolder", "absolute path"}},
		{name: "dev workspaceFolder dots", files: devc(`"workspaceFolder": "/w/../etc"`), want: []string{dev, "workspaceFolder", "clean absolute path"}},
		{name: "dev workspaceFolder root", files: devc(`"workspaceFolder": "/"`), want: []string{dev, "workspaceFolder", "root directory"}},
		{
			name:  "dev every problem at once",
			files: devc(`"remoteUser": "a b", "containerEnv": {"1": ""}, "onCreateCommand": 1, "workspaceFolder": "x"`),
			want:  []string{"remoteUser", "containerEnv.1", "onCreateCommand", "workspaceFolder"},
		},
		{
			name:  "a bad .devcontainer/ file is not passed over for .devcontainer.json",
			files: map[string]string{dev: `{}`, ".devcontainer.json": devImage},
			want:  []string{dev, `no "image", "build" or "dockerComposeFile"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tt.files)
			got, err := Find(dir)
			if err == nil {
				t.Fatalf("Find = %+v, want an error", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// TestFindLinks: the project is untrusted, so its description must not
// lead Airlock to read a file elsewhere on the host.
func TestFindLinks(t *testing.T) {
	const refused = "Airlock reads a project's environment file only inside the project and does not follow a link out of it"
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{
		"devcontainer.json": devImage,
		"airlock.toml":      "[environment]\nimage = \"debian:bookworm\"\n",
	})
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{
			name: "devcontainer.json a link out of the project",
			setup: func(t *testing.T, dir string) {
				must(t, os.Mkdir(filepath.Join(dir, ".devcontainer"), 0o755))
				must(t, os.Symlink(filepath.Join(outside, "devcontainer.json"), filepath.Join(dir, ".devcontainer", "devcontainer.json")))
			},
			want: ".devcontainer/devcontainer.json: " + refused,
		},
		{
			name: "a relative link out of the project",
			setup: func(t *testing.T, dir string) {
				rel, err := filepath.Rel(dir, filepath.Join(outside, "devcontainer.json"))
				must(t, err)
				must(t, os.Symlink(rel, filepath.Join(dir, ".devcontainer.json")))
			},
			want: ".devcontainer.json: " + refused,
		},
		{
			name: ".devcontainer a link out of the project",
			setup: func(t *testing.T, dir string) {
				must(t, os.Symlink(outside, filepath.Join(dir, ".devcontainer")))
			},
			want: ".devcontainer/devcontainer.json: " + refused,
		},
		{
			name: "airlock.toml a link out of the project",
			setup: func(t *testing.T, dir string) {
				must(t, os.Symlink(filepath.Join(outside, "airlock.toml"), filepath.Join(dir, "airlock.toml")))
			},
			want: "airlock.toml: " + refused,
		},
		{
			name: "a dangling link",
			setup: func(t *testing.T, dir string) {
				must(t, os.Symlink("nowhere.json", filepath.Join(dir, ".devcontainer.json")))
			},
			want: ".devcontainer.json is a link to a file that does not exist",
		},
		{
			name: "a fifo, which would block a reader",
			setup: func(t *testing.T, dir string) {
				must(t, syscall.Mkfifo(filepath.Join(dir, ".devcontainer.json"), 0o644))
			},
			want: "not a regular file",
		},
		{
			name: "a directory",
			setup: func(t *testing.T, dir string) {
				must(t, os.Mkdir(filepath.Join(dir, ".devcontainer.json"), 0o755))
			},
			want: "not a regular file",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			got, err := Find(dir)
			if err == nil {
				t.Fatalf("Find = %+v, want an error", got)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q does not name the file and %q", err, tt.want)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestNeedsNetwork(t *testing.T) {
	tests := []struct {
		env  Environment
		want bool
	}{
		{env: Environment{Image: "debian:bookworm", Env: map[string]string{"A": "b"}, User: "dev"}, want: false},
		{env: Environment{Apt: []string{"make"}}, want: true},
		{env: Environment{Setup: []Step{{Shell: "true"}}}, want: true},
	}
	for _, tt := range tests {
		if got := tt.env.NeedsNetwork(); got != tt.want {
			t.Errorf("%+v.NeedsNetwork() = %v, want %v", tt.env, got, tt.want)
		}
	}
}

func TestKey(t *testing.T) {
	base := func() Environment {
		return Environment{
			Source: "airlock.toml",
			Image:  "golang:1.24",
			Apt:    []string{"make", "git"},
			Setup:  []Step{{Origin: "setup", Shell: "make deps"}, {Origin: "onCreateCommand", Argv: []string{"go", "version"}}},
			Env:    map[string]string{"A": "1", "B": "2", "C": "3"},
			User:   "dev",
		}
	}
	b := base()
	// The key is the same on every machine and in every version of
	// Airlock that builds environments alike: a change here invalidates
	// every user's cached environments, so it must be deliberate.
	const golden = "f5288630dc2ede1d148f1cdec1d670ef85be66b6c47e05e96b2131f3a9394ed0"
	if got := b.Key(); got != golden {
		t.Errorf("Key() = %s, want %s (the encoding changed: bump keyVersion if that is meant)", got, golden)
	}

	same := map[string]func(e *Environment){
		"source":         func(e *Environment) { e.Source = ".devcontainer.json" },
		"hosts":          func(e *Environment) { e.Hosts = []string{"proxy.golang.org"} },
		"warnings":       func(e *Environment) { e.Warnings = []Warning{{Text: "x"}} },
		"run args":       func(e *Environment) { e.RunArgs = []RunArg{{Arg: "--init", Kind: ArgNotNeeded}} },
		"workspace":      func(e *Environment) { e.WorkspaceFolder = "/w" },
		"step names":     func(e *Environment) { e.Setup[0].Name, e.Setup[1].Origin = "n", "postCreateCommand" },
		"env map copied": func(e *Environment) { e.Env = map[string]string{"C": "3", "B": "2", "A": "1"} },
	}
	for name, change := range same {
		e := base()
		change(&e)
		if e.Key() != b.Key() {
			t.Errorf("%s changed the key; it does not change what is built", name)
		}
	}

	different := map[string]func(e *Environment){
		"image":                  func(e *Environment) { e.Image = "golang:1.25" },
		"no image":               func(e *Environment) { e.Image = "" },
		"apt order":              func(e *Environment) { e.Apt = []string{"git", "make"} },
		"apt added":              func(e *Environment) { e.Apt = append(e.Apt, "curl") },
		"apt joined":             func(e *Environment) { e.Apt = []string{"makegit"} },
		"apt moved into image":   func(e *Environment) { e.Image, e.Apt = "golang:1.24make", []string{"git"} },
		"setup order":            func(e *Environment) { e.Setup[0], e.Setup[1] = e.Setup[1], e.Setup[0] },
		"setup shell":            func(e *Environment) { e.Setup[0].Shell = "make deps2" },
		"shell vs argv":          func(e *Environment) { e.Setup[1] = Step{Shell: "go version"} },
		"argv split differently": func(e *Environment) { e.Setup[1].Argv = []string{"go version"} },
		"setup removed":          func(e *Environment) { e.Setup = e.Setup[:1] },
		"env value":              func(e *Environment) { e.Env["A"] = "2" },
		"env name":               func(e *Environment) { e.Env = map[string]string{"A": "1", "B": "2", "D": "3"} },
		"env removed":            func(e *Environment) { delete(e.Env, "C") },
		"env shifted":            func(e *Environment) { e.Env = map[string]string{"A": "1B", "": "2", "C": "3"} },
		"user":                   func(e *Environment) { e.User = "root" },
		"user into env":          func(e *Environment) { e.User, e.Env["C"] = "", "3dev" },
		"docker":                 func(e *Environment) { e.Docker = true },
		"build":                  func(e *Environment) { e.Image, e.Build = "", &Build{Dockerfile: "Dockerfile", Context: "."} },
		"build target": func(e *Environment) {
			e.Image, e.Build = "", &Build{Dockerfile: "Dockerfile", Context: ".", Target: "dev"}
		},
		"build args": func(e *Environment) {
			e.Image, e.Build = "", &Build{Dockerfile: "Dockerfile", Context: ".", Args: map[string]string{"A": "1"}}
		},
		"feature": func(e *Environment) {
			e.Features = []Feature{{ID: "ghcr.io/devcontainers/features/node:1", Name: "node", Version: "1"}}
		},
		"feature option": func(e *Environment) {
			e.Features = []Feature{{ID: "ghcr.io/devcontainers/features/node:1", Name: "node", Version: "1", Options: map[string]string{"version": "20"}}}
		},
		"compose": func(e *Environment) {
			e.Compose = &Compose{Files: []string{"c.yml"}, Service: "app", Services: []Service{{Name: "db", Image: "postgres:16"}}}
		},
		"compose service port": func(e *Environment) {
			e.Compose = &Compose{Files: []string{"c.yml"}, Service: "app", Services: []Service{{Name: "db", Image: "postgres:16", Ports: []Port{{Target: 5432}}}}}
		},
	}
	seen := map[string]string{b.Key(): "base"}
	for name, change := range different {
		e := base()
		change(&e)
		k := e.Key()
		if other, ok := seen[k]; ok {
			t.Errorf("%s gives the same key as %s", name, other)
		}
		seen[k] = name
	}
}
