package envspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/tailscale/hujson"
)

// unsupported are the Dev Container keys Airlock knows and does not
// honour, each with the sentence that says so and what to do instead.
var unsupported = map[string]string{
	"build":                       "is not supported: Airlock does not build Dockerfiles; it starts from \"image\" (install what the Dockerfile adds in onCreateCommand, or in airlock.toml [environment] apt and setup)",
	"dockerFile":                  "is not supported: Airlock does not build Dockerfiles; it starts from \"image\" (install what the Dockerfile adds in onCreateCommand, or in airlock.toml [environment] apt and setup)",
	"context":                     "is not used: Airlock does not build Dockerfiles",
	"features":                    "are not installed: Airlock does not support Dev Container features yet (install what they add in onCreateCommand, or in airlock.toml [environment] apt and setup)",
	"overrideFeatureInstallOrder": "is not used: Airlock does not install Dev Container features",
	"dockerComposeFile":           "is not supported: Airlock runs one VM from \"image\", not a Docker Compose project",
	"service":                     "is not used: Airlock does not run Docker Compose services",
	"runServices":                 "is not used: Airlock does not run Docker Compose services",
	"forwardPorts":                "are not forwarded: nothing reaches into a sandbox from the network",
	"appPort":                     "is not published: nothing reaches into a sandbox from the network",
	"portsAttributes":             "is not used: Airlock forwards no ports",
	"otherPortsAttributes":        "is not used: Airlock forwards no ports",
	"mounts":                      "are not mounted: nothing of the host is mounted into a sandbox",
	"workspaceMount":              "is not used: the project is a copy in the sandbox, never a mount of the host's folder",
	"runArgs":                     "are not used: there is no `docker run`; Airlock's own limits and airlock.toml [limits] apply",
	"privileged":                  "is not used: a sandbox is a VM, not a container",
	"capAdd":                      "is not used: a sandbox is a VM, not a container",
	"securityOpt":                 "is not used: a sandbox is a VM, not a container",
	"init":                        "is not used: Airlock's guest agent is the VM's init",
	"shutdownAction":              "is not used: Airlock stops the VM when the run ends",
	"overrideCommand":             "is not used: Airlock runs the agent's command, never the image's",
	"hostRequirements":            "is not checked: Airlock's limits (config.toml and airlock.toml [limits]) size the VM",
	"initializeCommand":           "is not run: it would run on the host, and nothing from a project runs on the host",
	"updateContentCommand":        "is not run: Airlock runs onCreateCommand and postCreateCommand, once, when it builds the environment",
	"postStartCommand":            "is not run: Airlock runs onCreateCommand and postCreateCommand, once, when it builds the environment",
	"postAttachCommand":           "is not run: Airlock runs onCreateCommand and postCreateCommand, once, when it builds the environment",
	"waitFor":                     "is not used: the environment is built completely before a run starts",
	"userEnvProbe":                "is not used: Airlock sets containerEnv and remoteEnv as written",
	"updateRemoteUserUID":         "is not used: nothing of the host is mounted, so no user ID needs to match",
	"customizations":              "are ignored: editor settings and extensions have no place in a sandbox",
	"secrets":                     "are not used: secrets never enter a sandbox; Airlock's [secrets] and the egress proxy supply credentials",
}

// devVariable matches the Dev Container variables that are substituted
// on the host by other tools. Airlock does not expand them (localEnv
// would carry the host's environment into the sandbox).
var devVariable = regexp.MustCompile(`\$\{(localEnv|containerEnv|localWorkspaceFolder|containerWorkspaceFolder|localWorkspaceFolderBasename|containerWorkspaceFolderBasename|devcontainerId)(:[^}]*)?\}`)

// fromDevcontainer reads a devcontainer.json (JSON with comments and
// trailing commas).
func fromDevcontainer(data []byte) (*Environment, error) {
	std, err := hujson.Standardize(bytes.Clone(data))
	if err != nil {
		return nil, fmt.Errorf("not JSON with comments: %w", err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(std, &doc); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}

	var c checker
	env := &Environment{}
	warnf := func(format string, args ...any) { env.Warnings = append(env.Warnings, fmt.Sprintf(format, args...)) }
	str := func(key string) string {
		raw, ok := doc[key]
		if !ok {
			return ""
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			c.failf(key, "want a string")
			return ""
		}
		return s
	}
	vars := func(key, value string) {
		if m := devVariable.FindString(value); m != "" {
			warnf("%s: %q is used as written: Airlock does not expand Dev Container variables such as %s on the host.", key, value, m)
		}
	}

	// Unsupported and unknown keys first, in key order, so the warnings
	// read the same every time.
	env.Warnings = keyWarnings(doc)

	if raw, ok := doc["image"]; ok && string(raw) != "null" {
		if env.Image = str("image"); env.Image != "" || string(raw) == `""` {
			c.image("image", env.Image)
			vars("image", env.Image)
		}
	} else {
		return nil, noImageError(doc)
	}

	// containerEnv, then remoteEnv over it; null in remoteEnv unsets.
	for _, key := range []string{"containerEnv", "remoteEnv"} {
		raw, ok := doc[key]
		if !ok {
			continue
		}
		var m map[string]*string
		if err := json.Unmarshal(raw, &m); err != nil {
			c.failf(key, "want an object of strings")
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(m)) {
			v := m[name]
			if v == nil {
				delete(env.Env, name)
				continue
			}
			if env.Env == nil {
				env.Env = map[string]string{}
			}
			env.Env[name] = *v
			vars(key+"."+name, *v)
		}
		c.env(key, filterSet(m))
	}

	if u := str("remoteUser"); u != "" {
		env.User = u
		c.user("remoteUser", u)
		if cu := str("containerUser"); cu != "" && cu != u {
			warnf("\"containerUser\" %q is not used: Airlock runs everything as one user, remoteUser %q.", cu, u)
		}
	} else if u := str("containerUser"); u != "" {
		env.User = u
		c.user("containerUser", u)
	}

	for _, key := range []string{"onCreateCommand", "postCreateCommand"} {
		if raw, ok := doc[key]; ok {
			env.Setup = append(env.Setup, lifecycle(&c, key, raw)...)
		}
	}
	for _, s := range env.Setup {
		vars(s.Origin, s.Shell+strings.Join(s.Argv, " "))
	}

	if ws := str("workspaceFolder"); ws != "" {
		if m := devVariable.FindString(ws); m != "" {
			warnf("\"workspaceFolder\" %q is not used: Airlock does not expand Dev Container variables such as %s; the project is at Airlock's default folder.", ws, m)
		} else {
			env.WorkspaceFolder = ws
			c.workspace("workspaceFolder", ws)
		}
	}

	if err := c.err(); err != nil {
		return nil, err
	}
	return env, nil
}

// keyWarnings warns of the keys of doc Airlock does not support or know,
// in key order.
func keyWarnings(doc map[string]json.RawMessage) []string {
	var out []string
	for _, key := range slices.Sorted(maps.Keys(doc)) {
		switch key {
		case "image", "containerEnv", "remoteEnv", "remoteUser", "containerUser",
			"onCreateCommand", "postCreateCommand", "workspaceFolder":
		case "name", "$schema":
			// Labels for people and editors: nothing to build or run.
		default:
			if why, ok := unsupported[key]; ok {
				out = append(out, fmt.Sprintf("%q %s.", key, why))
			} else {
				out = append(out, fmt.Sprintf("%q is not a key Airlock knows; it is ignored.", key))
			}
		}
	}
	return out
}

// noImageError says why a devcontainer.json without an image cannot be
// used, and what to do instead.
func noImageError(doc map[string]json.RawMessage) error {
	why := "it has none"
	if _, ok := doc["build"]; ok {
		why = "it builds a Dockerfile (build), which Airlock does not do"
	} else if _, ok := doc["dockerFile"]; ok {
		why = "it builds a Dockerfile (dockerFile), which Airlock does not do"
	} else if _, ok := doc["dockerComposeFile"]; ok {
		why = "it uses Docker Compose (dockerComposeFile), which Airlock does not do"
	}
	return errors.New(`no "image": Airlock starts a project's environment from an OCI image, and ` + why + `. ` +
		`Set "image" to the image the Dockerfile starts FROM (for instance "image": "mcr.microsoft.com/devcontainers/go:1") ` +
		`and move what the Dockerfile installs into onCreateCommand, or describe the environment in airlock.toml's [environment] table (image, apt, setup) instead`)
}

// filterSet keeps the variables that are set (not null), for checking.
func filterSet(m map[string]*string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

// lifecycle reads a lifecycle command in its three forms: a string (run
// by /bin/sh -c), an array (a program and its arguments, no shell), or
// an object of named commands, each a string or an array. The Dev
// Container spec runs an object's commands in parallel; Airlock runs
// them one after the other, in name order, which gives the same result
// for commands that do not depend on racing each other and makes a build
// repeatable.
func lifecycle(c *checker, key string, raw json.RawMessage) []Step {
	one := func(key, name string, raw json.RawMessage) (Step, bool) {
		s := Step{Origin: key, Name: name}
		label := key
		if name != "" {
			label = key + "." + name
		}
		switch firstByte(raw) {
		case '"':
			if err := json.Unmarshal(raw, &s.Shell); err != nil {
				c.failf(label, "want a string")
				return s, false
			}
			c.shell(label, s.Shell)
		case '[':
			if err := json.Unmarshal(raw, &s.Argv); err != nil {
				c.failf(label, "want an array of strings")
				return s, false
			}
			c.argv(label, s.Argv)
			if s.Argv == nil {
				s.Argv = []string{}
			}
		default:
			if name != "" {
				c.failf(label, "want a string (a shell command) or an array (a program and its arguments)")
			} else {
				c.failf(label, "want a string (a shell command), an array (a program and its arguments) or an object of named commands")
			}
			return s, false
		}
		return s, true
	}
	if firstByte(raw) != '{' {
		if s, ok := one(key, "", raw); ok {
			return []Step{s}
		}
		return nil
	}
	var named map[string]json.RawMessage
	if err := json.Unmarshal(raw, &named); err != nil {
		c.failf(key, "want an object of named commands")
		return nil
	}
	var steps []Step
	for _, name := range slices.Sorted(maps.Keys(named)) {
		c.text(key+" name", name)
		if s, ok := one(key, name, named[name]); ok {
			steps = append(steps, s)
		}
	}
	return steps
}

func firstByte(raw json.RawMessage) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}
