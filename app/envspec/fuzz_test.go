package envspec

import (
	"strings"
	"testing"
	"testing/fstest"
)

// fuzzFiles is the project a fuzzed devcontainer.json is read in: a
// Dockerfile, and the fuzzed Compose file at .devcontainer/compose.yml.
func fuzzFiles(compose []byte) projectFiles {
	return projectFiles{dir: "/project", base: "project", fsys: fstest.MapFS{
		".devcontainer/Dockerfile":   {Data: []byte("FROM debian\n")},
		"Dockerfile":                 {Data: []byte("FROM debian\n")},
		".devcontainer/compose.yml":  {Data: compose},
		".devcontainer/common.env":   {Data: []byte("A=1\n")},
		".devcontainer/data/keep.md": {Data: []byte("x")},
	}}
}

// FuzzDevcontainer: whatever a project's devcontainer.json (and the
// Compose file it names) holds, reading it never panics, and what it
// accepts is valid: an image or a build inside the project, steps that
// are a shell command or an argv (never both, never empty), variables
// with valid names, paths that stay in the project, no NUL byte
// anywhere.
func FuzzDevcontainer(f *testing.F) {
	const compose = "services:\n  app:\n    build:\n      context: ..\n      dockerfile: .devcontainer/Dockerfile\n" +
		"    volumes: ['../..:/workspaces:cached', '/var/run/docker.sock:/var/run/docker.sock']\n    env_file: [common.env]\n" +
		"  db:\n    image: postgres:${PG:-16}\n    ports: ['5432:5432', '9000-9010:9000-9010']\n    volumes: ['./data:/d', '/etc:/etc', 'pg:/var/lib/postgresql']\n" +
		"    healthcheck: {test: [CMD, pg_isready], interval: 5s, retries: 3}\n    environment: [A=1, B]\n" +
		"  cache:\n    image: redis\n    depends_on: {db: {condition: service_healthy}}\nvolumes: {pg: {}}\n"
	for _, seed := range []struct{ dev, compose string }{
		{devImage, ""},
		{`{"image": "debian", "onCreateCommand": "make", "postCreateCommand": ["a", "b"]}`, ""},
		{`{"image": "debian", "postCreateCommand": {"a": "x", "b": ["y"]}, /* c */ "remoteEnv": {"A": null,},}`, ""},
		{`{"image": "debian", "containerEnv": {"A": "${localEnv:HOME}"}, "remoteUser": "dev", "workspaceFolder": "/w/${localWorkspaceFolderBasename}"}`, ""},
		{`{"build": {"dockerfile": "Dockerfile", "context": "..", "args": {"V": "1"}, "target": "dev"}, "features": {"ghcr.io/devcontainers/features/node:1": {"version": "20", "x": true}}}`, ""},
		{`{"dockerFile": "../Dockerfile", "runArgs": ["--privileged", "-v", "/var/run/docker.sock:/var/run/docker.sock"], "mounts": ["source=a,target=/a,type=volume"]}`, ""},
		{`{"dockerComposeFile": ["compose.yml"], "service": "app", "runServices": ["db"], "workspaceFolder": "/workspaces/${localWorkspaceFolderBasename}"}`, compose},
		{`{"dockerComposeFile": "compose.yml", "service": "app"}`, "services:\n  app:\n    image: debian\n    build: ../..\n"},
		{`{"build": {"dockerfile": "../../etc/passwd"}}`, ""},
		{`// only a comment`, ""},
		{`{"image": "a\u0000"}`, ""},
	} {
		f.Add([]byte(seed.dev), []byte(seed.compose))
	}
	f.Fuzz(func(t *testing.T, data, compose []byte) {
		env, err := fromDevcontainer(fuzzFiles(compose), ".devcontainer/devcontainer.json", data)
		if err != nil {
			return
		}
		var c checker
		if env.Build == nil {
			c.image("image", env.Image)
		} else {
			inside(t, env.Build.Dockerfile, env.Build.Context)
		}
		c.env("env", env.Env)
		if env.User != "" {
			c.user("user", env.User)
		}
		if env.WorkspaceFolder != "" {
			c.workspace("workspaceFolder", env.WorkspaceFolder)
		}
		for _, s := range env.Setup {
			switch {
			case s.Argv != nil && s.Shell != "":
				t.Errorf("step %+v is both a shell command and an argv", s)
			case s.Argv != nil:
				c.argv("argv", s.Argv)
			default:
				c.shell("shell", s.Shell)
			}
			c.text("step name", s.Name)
		}
		for _, f := range env.Features {
			c.text("feature", f.ID+f.Name+f.Version)
			for k, v := range f.Options {
				c.text("feature option", k+v)
			}
		}
		for _, a := range env.RunArgs {
			c.text("runArgs", a.Arg)
		}
		if cs := env.Compose; cs != nil {
			inside(t, cs.Files...)
			for _, v := range cs.DevVolumes {
				if v.Type == "bind" {
					inside(t, v.Source)
				}
			}
			for _, s := range cs.Services {
				if s.Name == cs.Service {
					t.Errorf("the dev service %q is among the services to start", s.Name)
				}
				if s.Build != nil {
					inside(t, s.Build.Dockerfile, s.Build.Context)
				} else {
					c.image("service image", s.Image)
				}
				c.env("service env", s.Environment)
				for _, v := range s.Volumes {
					if v.Type == "bind" {
						inside(t, v.Source)
					}
				}
			}
		}
		if err := c.err(); err != nil {
			t.Errorf("accepted %q, but: %v", data, err)
		}
	})
}

// inside fails unless every path is clean, relative and in the project.
func inside(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if q, ok := inProject(".", p); !ok || q != p || strings.IndexByte(p, 0) >= 0 {
			t.Errorf("path %q is not a clean path inside the project", p)
		}
	}
}
