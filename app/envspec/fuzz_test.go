package envspec

import (
	"strings"
	"testing"
)

// FuzzDevcontainer: whatever a project's devcontainer.json holds, reading
// it never panics, and what it accepts is valid: an image, steps that
// are a shell command or an argv (never both, never empty), variables
// with valid names, no NUL byte anywhere.
func FuzzDevcontainer(f *testing.F) {
	for _, seed := range []string{
		devImage,
		`{"image": "debian", "onCreateCommand": "make", "postCreateCommand": ["a", "b"]}`,
		`{"image": "debian", "postCreateCommand": {"a": "x", "b": ["y"]}, /* c */ "remoteEnv": {"A": null,},}`,
		`{"image": "debian", "containerEnv": {"A": "${localEnv:HOME}"}, "remoteUser": "dev", "workspaceFolder": "/w"}`,
		`{"build": {"dockerfile": "Dockerfile"}, "features": {}}`,
		`// only a comment`,
		`{"image": "a\u0000"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := fromDevcontainer(data)
		if err != nil {
			return
		}
		var c checker
		c.image("image", env.Image)
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
			if strings.IndexByte(s.Name, 0) >= 0 {
				t.Errorf("step name %q holds a NUL byte", s.Name)
			}
		}
		if err := c.err(); err != nil {
			t.Errorf("accepted %q, but: %v", data, err)
		}
	})
}
