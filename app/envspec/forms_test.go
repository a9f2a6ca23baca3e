package envspec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// composeProject is a project with a Compose dev container: the dev
// service built from the project, Postgres and Redis beside it.
var composeProject = map[string]string{
	".devcontainer/devcontainer.json": `{
		// comments and trailing commas, as people write them
		"name": "app",
		"dockerComposeFile": ["compose.yaml"],
		"service": "app",
		"workspaceFolder": "/workspaces/${localWorkspaceFolderBasename}",
		"containerEnv": {"PGHOST": "db",},
		"features": {"ghcr.io/devcontainers/features/github-cli:1": {}},
		"postCreateCommand": "cd ${containerWorkspaceFolder} && make",
		"shutdownAction": "stopCompose",
		"forwardPorts": [3000, "db:5432"],
	}`,
	".devcontainer/compose.yaml": `version: "3.8"
x-env: &env
  POSTGRES_PASSWORD: postgres
services:
  app:
    build:
      context: ..
      dockerfile: .devcontainer/Dockerfile
      args: {RUBY: "3.3"}
    volumes:
      - ../..:/workspaces:cached
      - ../tmp:/scratch
      - bundle:/bundle
      - /var/run/docker.sock:/var/run/docker.sock
    command: sleep infinity
    env_file: [app.env]
    environment:
      <<: *env
      FROM_HOST:
    depends_on: [db]
  db:
    image: postgres:${PG_VERSION:-16}
    environment: *env
    ports: ["127.0.0.1:5432:5432"]
    volumes: [pg:/var/lib/postgresql/data, /etc/secrets:/s, ./init:/docker-entrypoint-initdb.d:ro]
    healthcheck:
      test: [CMD-SHELL, pg_isready -U postgres]
      interval: 5s
      retries: 5
  redis:
    image: redis:7
    env_file: [.env]
    depends_on:
      db: {condition: service_healthy}
  tools:
    image: busybox:${TOOLS_TAG}
volumes: {pg: {}, bundle: {}}
`,
	".devcontainer/Dockerfile": "FROM ruby:3.3\n",
	".devcontainer/app.env":    "RAILS_ENV=development\n# a comment\nPGUSER=postgres\n",
	".devcontainer/.env":       "SECRET=do-not-read\nPG_VERSION=99\n",
	".devcontainer/init/x.sql": "select 1;\n",
	"tmp/keep":                 "",
}

func TestCompose(t *testing.T) {
	t.Setenv("PG_VERSION", "from-the-host") // never read
	t.Setenv("FROM_HOST", "from-the-host")
	dir := filepath.Join(t.TempDir(), "shop")
	writeTree(t, dir, composeProject)
	env, err := Find(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := &Environment{
		Source: ".devcontainer/devcontainer.json",
		Build: &Build{Dockerfile: ".devcontainer/Dockerfile", Context: ".", Args: map[string]string{"RUBY": "3.3"},
			Sum: sum([]byte("FROM ruby:3.3\n")), From: []From{{Ref: "ruby:3.3", Line: 1}}},
		Docker:   true,
		Features: []Feature{{ID: "ghcr.io/devcontainers/features/github-cli:1", Name: "github-cli", Version: "1", Options: map[string]string{}, Ref: "ghcr.io/devcontainers/features/github-cli:1", Supported: true}},
		Compose: &Compose{
			Files: []string{".devcontainer/compose.yaml"}, Service: "app",
			RunServices: []string{"db", "redis", "tools"},
			DevVolumes:  []Volume{{Type: "bind", Source: "tmp", Target: "/scratch"}, {Type: "volume", Source: "bundle", Target: "/bundle"}},
			Services: []Service{
				{
					Name: "db", Image: "postgres:16",
					Environment: map[string]string{"POSTGRES_PASSWORD": "postgres"},
					Ports:       []Port{{Target: 5432, Published: "5432", HostIP: "127.0.0.1", Protocol: "tcp"}},
					Healthcheck: &Healthcheck{Test: []string{"CMD-SHELL", "pg_isready -U postgres"}, Interval: 5 * time.Second, Retries: 5},
					Volumes: []Volume{
						{Type: "volume", Source: "pg", Target: "/var/lib/postgresql/data"},
						{Type: "bind", Source: ".devcontainer/init", Target: "/docker-entrypoint-initdb.d", ReadOnly: true},
					},
				},
				{Name: "redis", Image: "redis:7", DependsOn: []Dependency{{Service: "db", Condition: "service_healthy"}}},
				{Name: "tools", Image: "busybox:"},
			},
		},
		Env: map[string]string{
			"POSTGRES_PASSWORD": "postgres", "RAILS_ENV": "development", "PGUSER": "postgres", "PGHOST": "db",
		},
		Setup:           []Step{{Origin: "postCreateCommand", Shell: "cd /workspaces/shop && make"}},
		WorkspaceFolder: "/workspaces/shop",
	}
	if diff := cmp.Diff(want, env, cmpopts.IgnoreFields(Environment{}, "Warnings")); diff != "" {
		t.Errorf("Find (-want +got):\n%s", diff)
	}
	for _, w := range []struct {
		text string
		moot bool
	}{
		{`"forwardPorts" are not forwarded`, true},
		{`"shutdownAction" is moot: the sandbox's services stop with its VM`, true},
		{"${TOOLS_TAG} is empty: Airlock interpolates Compose files without the host's environment or the project's .env", false},
		{`the bind of .. on /workspaces is not needed`, true},
		{`Docker runs inside the VM instead`, true},
		{`FROM_HOST takes its value from the host's environment, which never enters a sandbox`, false},
		{`/etc/secrets is outside the project and is not mounted`, false},
		{`.devcontainer/.env is not read: .env files are secrets`, false},
	} {
		found := false
		for _, got := range env.Warnings {
			if strings.Contains(got.Text, w.text) {
				found = true
				if got.Moot != w.moot {
					t.Errorf("warning %q: moot %v, want %v", got.Text, got.Moot, w.moot)
				}
			}
		}
		if !found {
			t.Errorf("no warning says %q", w.text)
		}
	}
	for _, got := range env.Warnings {
		if strings.Contains(got.Text, "from-the-host") || strings.Contains(got.Text, "do-not-read") {
			t.Errorf("a warning carries the host's environment or the .env: %q", got.Text)
		}
	}
	if env.AsWritten() {
		t.Error("AsWritten() = true with warnings that are not moot")
	}
}

func TestDockerfile(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  *Build
	}{
		{
			name: "build, relative to the devcontainer.json's folder",
			files: map[string]string{
				".devcontainer/devcontainer.json": `{"build": {"dockerfile": "../Dockerfile", "context": "..", "args": {"V": "1"}, "target": "dev"}}`,
				"Dockerfile":                      "FROM debian\n",
			},
			want: &Build{Dockerfile: "Dockerfile", Context: ".", Args: map[string]string{"V": "1"}, Target: "dev",
				Sum: sum([]byte("FROM debian\n")), From: []From{{Ref: "debian", Line: 1}}},
		},
		{
			name: "the older dockerFile",
			files: map[string]string{
				".devcontainer/devcontainer.json": `{"dockerFile": "Dockerfile"}`,
				".devcontainer/Dockerfile":        "FROM debian\n",
			},
			want: &Build{Dockerfile: ".devcontainer/Dockerfile", Context: ".devcontainer",
				Sum: sum([]byte("FROM debian\n")), From: []From{{Ref: "debian", Line: 1}}},
		},
		{
			name: "airlock.toml",
			files: map[string]string{
				"airlock.toml":      "[environment]\ndockerfile = \"ci/dev.Dockerfile\"\ncontext = \"ci\"\ntarget = \"dev\"\ndocker = true\n[environment.args]\nGO = \"1.24\"\n",
				"ci/dev.Dockerfile": "FROM golang\n",
			},
			want: &Build{Dockerfile: "ci/dev.Dockerfile", Context: "ci", Args: map[string]string{"GO": "1.24"}, Target: "dev",
				Sum: sum([]byte("FROM golang\n")), From: []From{{Ref: "golang", Line: 1}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tt.files)
			env, err := Find(dir)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, env.Build); diff != "" {
				t.Errorf("Build (-want +got):\n%s", diff)
			}
			if env.Image != "" || !env.NeedsNetwork() {
				t.Errorf("Image %q, NeedsNetwork %v; want none and true", env.Image, env.NeedsNetwork())
			}
		})
	}
}

func TestFormErrors(t *testing.T) {
	const dev = ".devcontainer/devcontainer.json"
	compose := func(devc, yaml string) map[string]string {
		return map[string]string{dev: devc, ".devcontainer/c.yml": yaml, ".devcontainer/Dockerfile": "FROM x\n"}
	}
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{name: "context leaves the project", files: map[string]string{dev: `{"build": {"dockerfile": "Dockerfile", "context": "../.."}}`, ".devcontainer/Dockerfile": ""},
			want: []string{"build.context", `"../.." leaves the project`}},
		{name: "dockerfile leaves the project", files: map[string]string{dev: `{"build": {"dockerfile": "../../x/Dockerfile"}}`},
			want: []string{"build.dockerfile", "leaves the project"}},
		{name: "dockerfile absolute", files: map[string]string{dev: `{"build": {"dockerfile": "/etc/passwd"}}`},
			want: []string{"build.dockerfile", "leaves the project"}},
		{name: "build without dockerfile", files: map[string]string{dev: `{"build": {"context": ".."}}`}, want: []string{"build.dockerfile", "missing"}},
		{name: "compose file leaves the project", files: map[string]string{dev: `{"dockerComposeFile": "../../c.yml", "service": "a"}`},
			want: []string{"dockerComposeFile[0]", "leaves the project"}},
		{name: "compose without service", files: compose(`{"dockerComposeFile": "c.yml"}`, "services: {a: {image: x}}\n"), want: []string{"service", "missing"}},
		{name: "compose unknown service", files: compose(`{"dockerComposeFile": "c.yml", "service": "b"}`, "services: {a: {image: x}}\n"),
			want: []string{"service", `"b" is not a service`, "it has a"}},
		{name: "compose unknown run service", files: compose(`{"dockerComposeFile": "c.yml", "service": "a", "runServices": ["zz"]}`, "services: {a: {image: x}}\n"),
			want: []string{"runServices[0]", `"zz" is not a service`}},
		{name: "compose not YAML", files: compose(`{"dockerComposeFile": "c.yml", "service": "a"}`, "services: [\n"), want: []string{"dockerComposeFile[0]", "not YAML"}},
		{name: "compose schema", files: compose(`{"dockerComposeFile": "c.yml", "service": "a"}`, "services: {a: {image: x, ports: {a: b}}}\n"), want: []string{"dockerComposeFile", "ports"}},
		{name: "compose port ranges", files: compose(`{"dockerComposeFile": "c.yml", "service": "a"}`, "services: {a: {image: x, ports: ['1-65535:1-65535']}}\n"),
			want: []string{"publish 65535 ports", "at most 1024"}},
		{name: "compose required variable", files: compose(`{"dockerComposeFile": "c.yml", "service": "a"}`, "services: {a: {image: \"x:${TAG:?set TAG}\"}}\n"),
			want: []string{"dockerComposeFile", "TAG"}},
		{name: "compose build leaves the project", files: compose(`{"dockerComposeFile": "c.yml", "service": "a"}`, "services: {a: {build: ../..}}\n"),
			want: []string{"compose services.a.build.context", "leaves the project"}},
		{name: "compose service build leaves the project", files: compose(`{"dockerComposeFile": "c.yml", "service": "a"}`,
			"services: {a: {image: x}, web: {build: {context: ../.., dockerfile: Dockerfile}}}\n"),
			want: []string{"compose services.web.build.context", `leaves the project; Airlock builds only from inside the project`}},
		{name: "compose service dockerfile leaves the project", files: compose(`{"dockerComposeFile": "c.yml", "service": "a"}`,
			"services: {a: {image: x}, web: {build: {context: ., dockerfile: ../../Dockerfile}}}\n"),
			want: []string{"compose services.web.build.dockerfile", "leaves the project"}},
		{name: "compose dockerfile_inline too large", files: compose(`{"dockerComposeFile": "c.yml", "service": "a"}`,
			"services: {a: {image: x}, web: {build: {context: ., dockerfile_inline: \"FROM x\\n"+strings.Repeat("RUN true\\n", 30_000)+"\"}}}\n"),
			want: []string{"compose services.web.build.dockerfile_inline", "at most 262144"}},
		{name: "compose too many files", files: compose(`{"dockerComposeFile": ["c.yml","c.yml","c.yml","c.yml","c.yml","c.yml","c.yml","c.yml","c.yml"], "service": "a"}`, ""),
			want: []string{"dockerComposeFile", "between 1 and 8"}},
		{name: "toml image and dockerfile", files: map[string]string{"airlock.toml": "[environment]\nimage = \"x\"\ndockerfile = \"Dockerfile\"\n", "Dockerfile": ""},
			want: []string{"[environment] dockerfile", "not both"}},
		{name: "toml target without dockerfile", files: map[string]string{"airlock.toml": "[environment]\ntarget = \"dev\"\n"}, want: []string{"[environment] dockerfile", "set dockerfile too"}},
		{name: "toml dockerfile leaves the project", files: map[string]string{"airlock.toml": "[environment]\ndockerfile = \"../Dockerfile\"\n"},
			want: []string{"[environment] dockerfile", "leaves the project"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tt.files)
			_, err := Find(dir)
			if err == nil {
				t.Fatalf("Find: no error, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestComposeLinks: a Compose file, Dockerfile or env_file reached
// through a link that leaves the project is never read.
func TestComposeLinks(t *testing.T) {
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"c.yml": "services: {a: {image: x}}\n", "Dockerfile": "FROM x\n", "app.env": "SECRET=outside\n"})
	for _, tt := range []struct {
		name, link, target, devc, want string
	}{
		{"compose file", ".devcontainer/c.yml", "c.yml", `{"dockerComposeFile": "c.yml", "service": "a"}`, "cannot be read inside the project"},
		{"Dockerfile", ".devcontainer/Dockerfile", "Dockerfile", `{"build": {"dockerfile": "Dockerfile"}}`, "is not a file of the project"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{".devcontainer/devcontainer.json": tt.devc})
			if err := os.Symlink(filepath.Join(outside, tt.target), filepath.Join(dir, tt.link)); err != nil {
				t.Fatal(err)
			}
			if _, err := Find(dir); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Find: %v, want %q", err, tt.want)
			}
		})
	}
	t.Run("env_file", func(t *testing.T) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{
			".devcontainer/devcontainer.json": `{"dockerComposeFile": "c.yml", "service": "a"}`,
			".devcontainer/c.yml":             "services: {a: {image: x, env_file: [app.env]}}\n",
		})
		if err := os.Symlink(filepath.Join(outside, "app.env"), filepath.Join(dir, ".devcontainer/app.env")); err != nil {
			t.Fatal(err)
		}
		env, err := Find(dir)
		if err != nil {
			t.Fatal(err)
		}
		if env.Env["SECRET"] != "" || !strings.Contains(env.Warnings[0].Text, "cannot be read inside the project") {
			t.Errorf("Env %v, warnings %v: want nothing read, and the file named", env.Env, env.Warnings)
		}
	})
}

func TestVariables(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proj")
	writeTree(t, dir, map[string]string{".devcontainer/devcontainer.json": `{"image": "debian",
		"containerEnv": {"ID": "${devcontainerId}", "WS": "${localWorkspaceFolder}", "BASE": "${containerWorkspaceFolderBasename}", "SHELL_VAR": "${HOME}"}}`})
	env, err := Find(dir)
	if err != nil {
		t.Fatal(err)
	}
	id := env.Env["ID"]
	if len(id) != 52 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyz234567") != "" {
		t.Errorf("devcontainerId = %q, want 52 base32 characters", id)
	}
	if again, _ := Find(dir); again.Env["ID"] != id {
		t.Errorf("devcontainerId changed: %q, then %q", id, again.Env["ID"])
	}
	want := map[string]string{"ID": id, "WS": DefaultWorkspace, "BASE": "workspace", "SHELL_VAR": "${HOME}"}
	if diff := cmp.Diff(want, env.Env); diff != "" {
		t.Errorf("Env (-want +got):\n%s", diff)
	}
	if len(env.Warnings) != 0 {
		t.Errorf("Warnings: %v", env.Warnings)
	}
}

func TestFeatures(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{".devcontainer/devcontainer.json": `{"image": "debian", "features": {
		"ghcr.io/devcontainers/features/docker-in-docker:2": {"moby": false, "version": "latest"},
		"ghcr.io/devcontainers/features/node:1": "20",
		"ghcr.io/devcontainers/features/python@sha256:abc": {"version": 3.12},
		"ghcr.io/devcontainers-extra/features/apt-packages:1": {"packages": ["a", "b"]},
		"./local-feature": {},
		"node": {}},
		"customizations": {"airlock": {"hosts": ["nodejs.org", "example.com:8443"]}}}`})
	env, err := Find(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Feature{
		{ID: "./local-feature", Name: "local-feature", Options: map[string]string{}},
		{ID: "ghcr.io/devcontainers-extra/features/apt-packages:1", Name: "apt-packages", Version: "1", Options: map[string]string{"packages": `["a","b"]`},
			Ref: "ghcr.io/devcontainers-extra/features/apt-packages:1", Supported: true},
		{ID: "ghcr.io/devcontainers/features/docker-in-docker:2", Name: "docker-in-docker", Version: "2", Options: map[string]string{"moby": "false", "version": "latest"},
			Ref: "ghcr.io/devcontainers/features/docker-in-docker:2", Supported: true},
		{ID: "ghcr.io/devcontainers/features/node:1", Name: "node", Version: "1", Options: map[string]string{"version": "20"}, Ref: "ghcr.io/devcontainers/features/node:1", Supported: true},
		{ID: "ghcr.io/devcontainers/features/python@sha256:abc", Name: "python", Version: "sha256:abc", Options: map[string]string{"version": "3.12"},
			Ref: "ghcr.io/devcontainers/features/python@sha256:abc", Supported: true},
		{ID: "node", Name: "node", Options: map[string]string{}, Ref: "ghcr.io/devcontainers/features/node:latest", Supported: true},
	}
	if diff := cmp.Diff(want, env.Features); diff != "" {
		t.Errorf("Features (-want +got):\n%s", diff)
	}
	if !env.Docker {
		t.Error("docker-in-docker did not turn Docker on")
	}
	// Every feature published to a registry is installed; the local one
	// is not.
	var lacking []Warning
	for _, w := range env.Warnings {
		if !w.Moot {
			lacking = append(lacking, w)
		}
	}
	if len(lacking) != 1 || !strings.Contains(lacking[0].Text, "./local-feature") {
		t.Errorf("%d warnings, want one for the feature not installed: %v", len(lacking), lacking)
	}
	for _, f := range env.Features {
		if got, want := f.InstalledByScript(), f.Supported && f.Name != "docker-in-docker"; got != want {
			t.Errorf("%s: InstalledByScript() = %v, want %v", f.ID, got, want)
		}
	}
	if diff := cmp.Diff([]string{"nodejs.org", "example.com:8443"}, env.Hosts); diff != "" {
		t.Errorf("Hosts, from customizations.airlock.hosts (-want +got):\n%s", diff)
	}
	writeTree(t, dir, map[string]string{".devcontainer/devcontainer.json": `{"image": "debian", "customizations": {"airlock": {"hosts": ["not a host!"]}}}`})
	if _, err := Find(dir); err == nil || !strings.Contains(err.Error(), "customizations.airlock.hosts[0]") {
		t.Errorf("a bad host in customizations.airlock.hosts: %v", err)
	}
}

func TestExpandContainerEnv(t *testing.T) {
	image := map[string]string{"PATH": "/usr/bin:/bin", "EMPTY": ""}
	for in, want := range map[string]string{
		"/opt/bin:${containerEnv:PATH}":  "/opt/bin:/usr/bin:/bin",
		"${containerEnv:NOPE}x":          "x",
		"${containerEnv:NOPE:fallback}":  "fallback",
		"${containerEnv:EMPTY:fallback}": "",
		"${localEnv:PATH}":               "${localEnv:PATH}",
	} {
		if got := ExpandContainerEnv(in, image); got != want {
			t.Errorf("ExpandContainerEnv(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestComposeDockerfileInline: a service whose Compose file holds its
// Dockerfile (dockerfile_inline) is built from that text, keyed and
// confirmed by its SHA-256 and FROM images as a Dockerfile file is, and
// named for people by where it is.
func TestComposeDockerfileInline(t *testing.T) {
	dir := t.TempDir()
	inline := "FROM busybox:1.36\nRUN echo built > /built\n"
	writeTree(t, dir, map[string]string{
		".devcontainer/devcontainer.json": `{"dockerComposeFile": "c.yml", "service": "a"}`,
		".devcontainer/c.yml":             "services:\n  a: {image: debian:12}\n  web:\n    build:\n      context: .\n      dockerfile_inline: |\n        FROM busybox:1.36\n        RUN echo built > /built\n",
	})
	env, err := Find(dir)
	if err != nil {
		t.Fatal(err)
	}
	var web *Service
	for i := range env.Compose.Services {
		if env.Compose.Services[i].Name == "web" {
			web = &env.Compose.Services[i]
		}
	}
	if web == nil || web.Build == nil {
		t.Fatalf("no build for web: %+v", env.Compose.Services)
	}
	want := &Build{Context: ".devcontainer", Inline: inline, InlineIn: "compose services.web.build.dockerfile_inline",
		Sum: sum([]byte(inline)), From: []From{{Ref: "busybox:1.36", Line: 1}}}
	if diff := cmp.Diff(want, web.Build); diff != "" {
		t.Errorf("build (-want +got):\n%s", diff)
	}
	if web.Build.Label() != "compose services.web.build.dockerfile_inline" {
		t.Errorf("label %q", web.Build.Label())
	}
	for _, w := range env.Warnings {
		if strings.Contains(w.Text, "dockerfile_inline") {
			t.Errorf("a warning about it: %q", w.Text)
		}
	}
}
