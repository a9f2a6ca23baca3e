package envspec

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
)

// DefaultWorkspace is where the project is in a sandbox when the
// description names no workspaceFolder.
const DefaultWorkspace = "/workspace"

var (
	// devVariable matches a Dev Container variable: ${name} or
	// ${name:argument}.
	devVariable = regexp.MustCompile(`\$\{(localEnv|env|containerEnv|localWorkspaceFolder|containerWorkspaceFolder|localWorkspaceFolderBasename|containerWorkspaceFolderBasename|devcontainerId)(:[^}]*)?\}`)
	// hostVariable matches the variables that read the host's
	// environment, which Airlock never expands.
	hostVariable = regexp.MustCompile(`\$\{(localEnv|env):[^}]*\}`)
)

// varKeys are the keys whose variables are worth a warning when one is
// kept as written: the keys Airlock honours. A variable in a key that is
// itself ignored (customizations, mounts) needs no second warning.
var varKeys = map[string]bool{
	"image": true, "build": true, "dockerFile": true, "context": true, "dockerComposeFile": true,
	"containerEnv": true, "remoteEnv": true, "remoteUser": true, "containerUser": true,
	"onCreateCommand": true, "updateContentCommand": true, "postCreateCommand": true,
	"features": true,
}

// expandVariables expands the Dev Container variables in every string
// value of the document (keys are kept as written) and returns it as
// raw JSON per key. What the variables stand for in a sandbox:
//
//   - ${localWorkspaceFolderBasename}: the project folder's name on the
//     host (its name only, never its path);
//   - ${containerWorkspaceFolder}: where the project is in the sandbox:
//     workspaceFolder (its own variables expanded), else /workspace;
//   - ${containerWorkspaceFolderBasename}: that folder's name;
//   - ${localWorkspaceFolder}: the same as ${containerWorkspaceFolder}.
//     The host's paths never enter a sandbox; what the project is on the
//     host, the copy is in the sandbox, so a bind of it (say, to Docker
//     inside the VM) reaches the project;
//   - ${devcontainerId}: 52 base32 characters of a SHA-256 of the
//     project's path and the file's, stable for the project;
//   - ${localEnv:NAME} and ${env:NAME}: kept as written, with a warning:
//     the host's environment never enters a sandbox;
//   - ${containerEnv:NAME}: kept as written; in remoteEnv the runtime
//     expands it against the image's variables (ExpandContainerEnv),
//     elsewhere it is a warning.
func expandVariables(d *dc, tree map[string]any, files projectFiles, name string) map[string]json.RawMessage {
	ws := DefaultWorkspace
	if s, ok := tree["workspaceFolder"].(string); ok && s != "" {
		local := map[string]string{"localWorkspaceFolderBasename": files.base}
		ws = devVariable.ReplaceAllStringFunc(s, func(m string) string {
			if v, ok := local[strings.TrimSuffix(strings.TrimPrefix(m, "${"), "}")]; ok {
				return v
			}
			return m
		})
		tree["workspaceFolder"] = ws
	}
	sum := sha256.Sum256([]byte(files.dir + "\x00" + name))
	x := &expander{d: d, vars: map[string]string{
		"localWorkspaceFolderBasename":     files.base,
		"localWorkspaceFolder":             ws,
		"containerWorkspaceFolder":         ws,
		"containerWorkspaceFolderBasename": path.Base(ws),
		"devcontainerId":                   strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))[:52],
	}}
	doc := make(map[string]json.RawMessage, len(tree))
	for _, key := range slices.Sorted(maps.Keys(tree)) {
		v := tree[key]
		if key != "customizations" {
			v = x.walk(key, key, v)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			panic(err) // decoded JSON: cannot fail
		}
		doc[key] = raw
	}
	return doc
}

type expander struct {
	d    *dc
	vars map[string]string
	seen map[string]bool
}

func (x *expander) walk(top, key string, v any) any {
	switch t := v.(type) {
	case string:
		return x.str(top, key, t)
	case []any:
		for i := range t {
			t[i] = x.walk(top, key, t[i])
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			t[k] = x.walk(top, key+"."+k, t[k])
		}
	}
	return v
}

func (x *expander) str(top, key, s string) string {
	return devVariable.ReplaceAllStringFunc(s, func(m string) string {
		sub := devVariable.FindStringSubmatch(m)
		if v, ok := x.vars[sub[1]]; ok && sub[2] == "" {
			return v
		}
		if !varKeys[top] || x.seen[key+m] {
			return m
		}
		if x.seen == nil {
			x.seen = map[string]bool{}
		}
		x.seen[key+m] = true
		switch sub[1] {
		case "localEnv", "env":
			x.d.warn(key, false, "%s: %s is kept as written: Airlock never expands the host's environment into a sandbox.", key, m)
		case "containerEnv":
			if top != "remoteEnv" {
				x.d.warn(key, false, "%s: %s is kept as written: Airlock expands ${containerEnv:…} only in remoteEnv.", key, m)
			}
		default:
			x.d.warn(key, false, "%s: %s is kept as written: the variable takes no argument.", key, m)
		}
		return m
	})
}

// containerEnvVariable matches ${containerEnv:NAME} and
// ${containerEnv:NAME:default}.
var containerEnvVariable = regexp.MustCompile(`\$\{containerEnv:([A-Za-z_][A-Za-z0-9_]*)(?::([^}]*))?\}`)

// ExpandContainerEnv expands ${containerEnv:NAME} (and
// ${containerEnv:NAME:default}) in a remoteEnv value against the image's
// variables, for the runtime: an unset variable gives its default, else
// the empty string, as Dev Container tools do.
func ExpandContainerEnv(value string, imageEnv map[string]string) string {
	return containerEnvVariable.ReplaceAllStringFunc(value, func(m string) string {
		sub := containerEnvVariable.FindStringSubmatch(m)
		if v, ok := imageEnv[sub[1]]; ok {
			return v
		}
		return sub[2]
	})
}
