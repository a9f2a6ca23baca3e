package envspec

import (
	"fmt"
	"maps"
	"slices"

	"github.com/airlock-dev/airlock/app/config"
)

// fromTOML validates airlock.toml's [environment] table (app/config has
// decoded it, unknown keys already refused).
func fromTOML(t *config.Environment) (*Environment, error) {
	var c checker
	const k = "[environment] "
	if t.Image != "" {
		c.image(k+"image", t.Image)
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
	env := &Environment{
		Source: tomlFile,
		Image:  t.Image,
		Apt:    slices.Clone(t.Apt),
		Env:    maps.Clone(t.Env),
		User:   t.User,
		Hosts:  slices.Clone(t.Hosts),
	}
	for _, s := range t.Setup {
		env.Setup = append(env.Setup, Step{Origin: "setup", Shell: s})
	}
	return env, nil
}
