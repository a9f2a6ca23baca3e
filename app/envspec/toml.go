package envspec

import (
	"fmt"
	"maps"
	"slices"

	"github.com/airlock-dev/airlock/app/config"
)

// fromTOML validates airlock.toml's [environment] table (app/config has
// decoded it, unknown keys already refused). Its paths are relative to
// the project.
func fromTOML(t *config.Environment, files projectFiles) (*Environment, error) {
	var c checker
	const k = "[environment] "
	if t.Image != "" {
		c.image(k+"image", t.Image)
	}
	env := &Environment{
		Source: tomlFile,
		Image:  t.Image,
		Apt:    slices.Clone(t.Apt),
		Env:    maps.Clone(t.Env),
		User:   t.User,
		Hosts:  slices.Clone(t.Hosts),
		Docker: t.Docker,
	}
	switch {
	case t.Dockerfile != "":
		if t.Image != "" {
			c.failf(k+"dockerfile", "set with image; an environment starts from an image or builds a Dockerfile, not both")
		}
		env.Build = c.build(k, files, ".", t.Dockerfile, t.Context, t.Args, t.Target)
	case t.Context != "" || len(t.Args) > 0 || t.Target != "":
		c.failf(k+"dockerfile", "context, args and target are for a Dockerfile build: set dockerfile too, or remove them")
	}
	c.apt(k+"apt", t.Apt)
	for i, s := range t.Setup {
		c.shell(fmt.Sprintf("%ssetup[%d]", k, i), s)
	}
	c.env(k+"env", t.Env)
	if t.User != "" {
		c.user(k+"user", t.User)
	}
	c.hosts(k+"hosts", t.Hosts)
	if err := c.err(); err != nil {
		return nil, err
	}
	for _, s := range t.Setup {
		env.Setup = append(env.Setup, Step{Origin: "setup", Shell: s})
	}
	return env, nil
}
