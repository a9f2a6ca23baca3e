package envspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/tailscale/hujson"
)

// keyUse is what Airlock makes of a devcontainer.json key it does not
// honour: a sentence, and whether a sandbox misses it (see Warning.Moot).
type keyUse struct {
	why  string
	moot bool
}

const (
	vmHasIt  = "is not needed: a sandbox is a VM, which has what a container asks for this"
	noPorts  = "are not forwarded: nothing reaches into a sandbox from outside"
	noEditor = "are ignored: editor settings and extensions have no place in a sandbox"
)

// otherKeys are the Dev Container keys Airlock knows and does not honour
// as asked, each with the sentence that says what happens instead.
var otherKeys = map[string]keyUse{
	"forwardPorts":                {noPorts, true},
	"appPort":                     {"is not published: nothing reaches into a sandbox from outside", true},
	"portsAttributes":             {"is not used: Airlock forwards no ports", true},
	"otherPortsAttributes":        {"is not used: Airlock forwards no ports", true},
	"workspaceMount":              {"is not used: the project is a copy in the sandbox, at workspaceFolder, never a mount of the host's folder", true},
	"privileged":                  {vmHasIt, true},
	"capAdd":                      {vmHasIt, true},
	"securityOpt":                 {vmHasIt, true},
	"init":                        {"is not needed: Airlock's guest agent is the VM's init", true},
	"shutdownAction":              {"is moot: the sandbox's services stop with its VM", true},
	"overrideCommand":             {"is not used: Airlock runs the agent's command, never the image's", true},
	"hostRequirements":            {"is not checked: Airlock's limits (config.toml and airlock.toml [limits]) size the VM", true},
	"waitFor":                     {"is not used: the environment is built completely before a run starts", true},
	"userEnvProbe":                {"is not used: Airlock sets containerEnv and remoteEnv as written", true},
	"updateRemoteUserUID":         {"is not used: nothing of the host is mounted, so no user ID needs to match", true},
	"customizations":              {noEditor, true},
	"settings":                    {noEditor, true},
	"extensions":                  {noEditor, true},
	"overrideFeatureInstallOrder": {"is not used: Airlock installs the features it supports in its own order", true},
	"initializeCommand":           {"is not run: it would run on the host, and nothing from a project runs on the host", false},
	"secrets":                     {"are not asked for: secrets never enter a sandbox; Airlock's [secrets] and the egress proxy supply credentials", false},
}

// honoured are the keys Airlock does something with (the rest of this
// file); name and $schema are labels for people and editors.
var honoured = map[string]bool{
	"image": true, "build": true, "dockerFile": true, "context": true,
	"dockerComposeFile": true, "service": true, "runServices": true,
	"containerEnv": true, "remoteEnv": true, "remoteUser": true, "containerUser": true,
	"onCreateCommand": true, "updateContentCommand": true, "postCreateCommand": true,
	"postStartCommand": true, "postAttachCommand": true,
	"workspaceFolder": true, "features": true, "runArgs": true, "mounts": true,
	"name": true, "$schema": true,
}

// lifecycleKeys are the setup commands Airlock runs, in the Dev Container
// order.
var lifecycleKeys = []string{"onCreateCommand", "updateContentCommand", "postCreateCommand"}

// startKeys are the commands Airlock runs in every sandbox before the
// command, in the Dev Container order.
var startKeys = []string{"postStartCommand", "postAttachCommand"}

// dc is one devcontainer.json being read.
type dc struct {
	c     checker
	env   *Environment
	doc   map[string]json.RawMessage
	files projectFiles
	// dir is the devcontainer.json's folder, relative to the project: its
	// paths are relative to it.
	dir string
}

func (d *dc) warn(key string, moot bool, format string, args ...any) {
	d.env.Warnings = append(d.env.Warnings, Warning{Key: key, Moot: moot, Text: fmt.Sprintf(format, args...)})
}

func (d *dc) has(key string) bool {
	raw, ok := d.doc[key]
	return ok && string(raw) != "null"
}

func (d *dc) str(key string) string {
	raw, ok := d.doc[key]
	if !ok || string(raw) == "null" {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		d.c.failf(key, "want a string")
		return ""
	}
	return s
}

// fromDevcontainer reads a devcontainer.json (JSON with comments and
// trailing commas) that the project holds at name.
func fromDevcontainer(files projectFiles, name string, data []byte) (*Environment, error) {
	std, err := hujson.Standardize(bytes.Clone(data))
	if err != nil {
		return nil, fmt.Errorf("not JSON with comments: %w", err)
	}
	var tree map[string]any
	dec := json.NewDecoder(bytes.NewReader(std))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil || tree == nil {
		return nil, fmt.Errorf("not a JSON object: %w", orNull(err))
	}
	d := &dc{env: &Environment{}, files: files, dir: path.Dir(name)}
	d.doc = expandVariables(d, tree, files, name)

	// Keys Airlock does not honour first, in key order, so the warnings
	// read the same every time.
	d.keyWarnings()

	switch {
	case d.has("dockerComposeFile"):
		d.composeForm()
	case d.has("build") || d.has("dockerFile"):
		d.buildForm()
	case d.has("image"):
		d.env.Image = d.str("image")
		d.c.image("image", d.env.Image)
	default:
		return nil, errors.New(`no "image", "build" or "dockerComposeFile": a devcontainer.json names the image its environment starts from, ` +
			`the Dockerfile it is built from, or the Compose file of its services; set one, or describe the environment in airlock.toml's [environment] table (image, apt, setup) instead`)
	}
	d.variables()
	d.user()
	for _, key := range lifecycleKeys {
		if raw, ok := d.doc[key]; ok {
			d.env.Setup = append(d.env.Setup, d.lifecycle(key, raw)...)
		}
	}
	for _, key := range startKeys {
		if raw, ok := d.doc[key]; ok {
			d.env.Start = append(d.env.Start, d.lifecycle(key, raw)...)
		}
	}
	if ws := d.str("workspaceFolder"); ws != "" {
		if hostVariable.MatchString(ws) {
			d.warn("workspaceFolder", false, "\"workspaceFolder\" %q is not used: the host's environment never enters a sandbox; the project is at Airlock's default folder.", ws)
		} else {
			d.env.WorkspaceFolder = ws
			d.c.workspace("workspaceFolder", ws)
		}
	}
	d.features()
	d.runArgs()
	d.mounts()
	if err := d.c.err(); err != nil {
		return nil, err
	}
	return d.env, nil
}

func orNull(err error) error {
	if err == nil {
		return errors.New("null")
	}
	return err
}

// keyWarnings warns of the keys Airlock does not honour or know, in key
// order.
func (d *dc) keyWarnings() {
	for _, key := range slices.Sorted(maps.Keys(d.doc)) {
		if honoured[key] {
			continue
		}
		if u, ok := otherKeys[key]; ok {
			d.warn(key, u.moot, "%q %s.", key, u.why)
		} else {
			d.warn(key, false, "%q is not a key Airlock knows; it is ignored.", key)
		}
	}
}

// variables reads containerEnv, then remoteEnv over it (null in
// remoteEnv unsets), over what the Compose dev service sets.
func (d *dc) variables() {
	for _, key := range []string{"containerEnv", "remoteEnv"} {
		raw, ok := d.doc[key]
		if !ok {
			continue
		}
		var m map[string]*string
		if err := json.Unmarshal(raw, &m); err != nil {
			d.c.failf(key, "want an object of strings")
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(m)) {
			v := m[name]
			if v == nil {
				delete(d.env.Env, name)
				continue
			}
			if d.env.Env == nil {
				d.env.Env = map[string]string{}
			}
			d.env.Env[name] = *v
		}
		d.c.env(key, filterSet(m))
	}
}

// user reads remoteUser, else containerUser (else the Compose dev
// service's user, already set).
func (d *dc) user() {
	if u := d.str("remoteUser"); u != "" {
		d.env.User = u
		d.c.user("remoteUser", u)
		if cu := d.str("containerUser"); cu != "" && cu != u {
			d.warn("containerUser", false, "\"containerUser\" %q is not used: Airlock runs everything as one user, remoteUser %q.", cu, u)
		}
	} else if u := d.str("containerUser"); u != "" {
		d.env.User = u
		d.c.user("containerUser", u)
	}
}

// buildForm reads the Dockerfile form: build.dockerfile, build.context,
// build.args and build.target (or the older dockerFile and context),
// all relative to the devcontainer.json's folder.
func (d *dc) buildForm() {
	var b struct {
		Dockerfile string            `json:"dockerfile"`
		Context    string            `json:"context"`
		Args       map[string]string `json:"args"`
		Target     string            `json:"target"`
	}
	key := "build."
	if d.has("build") {
		var rest map[string]json.RawMessage
		if err := json.Unmarshal(d.doc["build"], &rest); err != nil {
			d.c.failf("build", "want an object (dockerfile, context, args, target)")
			return
		}
		if err := json.Unmarshal(d.doc["build"], &b); err != nil {
			d.c.failf("build", "want dockerfile, context and target strings and args an object of strings: %v", err)
			return
		}
		for _, k := range slices.Sorted(maps.Keys(rest)) {
			switch k {
			case "dockerfile", "context", "args", "target":
			case "cacheFrom":
				d.warn("build.cacheFrom", true, "\"build.cacheFrom\" is not used: Airlock caches the build itself.")
			default:
				d.warn("build."+k, false, "\"build.%s\" is not used: Airlock builds with dockerfile, context, args and target only.", k)
			}
		}
		if b.Dockerfile == "" {
			d.c.failf("build.dockerfile", "missing; want the Dockerfile's path, relative to the devcontainer.json's folder")
			return
		}
	} else {
		key = ""
		b.Dockerfile, b.Context = d.str("dockerFile"), d.str("context")
		if b.Dockerfile == "" {
			d.c.failf("dockerFile", "want the Dockerfile's path, relative to the devcontainer.json's folder")
			return
		}
	}
	if d.has("image") {
		d.warn("image", true, "\"image\" is not used: the image is built from the Dockerfile.")
	}
	if b.Context == "" {
		b.Context = "."
	}
	d.env.Build = d.c.build(key, d.files, d.dir, b.Dockerfile, b.Context, b.Args, b.Target)
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
// repeatable. An empty string is nothing to run.
func (d *dc) lifecycle(key string, raw json.RawMessage) []Step {
	c := &d.c
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
			if c.text(label, s.Shell) && strings.TrimSpace(s.Shell) == "" {
				d.warn(label, true, "%q is empty: nothing to run.", label)
				return s, false
			}
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
