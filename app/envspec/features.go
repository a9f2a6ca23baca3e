package envspec

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// officialFeatures is where the Dev Container project publishes its
// features.
const officialFeatures = "ghcr.io/devcontainers/features/"

// supportedFeatures are the features Airlock installs; the Docker ones
// turn Docker inside the VM on. docker-from-docker is
// docker-outside-of-docker's former name.
var supportedFeatures = map[string]bool{
	"docker-in-docker": true, "docker-outside-of-docker": true, "docker-from-docker": true,
	"node": true, "python": true, "go": true, "common-utils": true, "git": true, "github-cli": true,
}

// maxFeatureID bounds a feature reference.
const maxFeatureID = 512

// featureRef splits a feature reference into its short name and version
// ("ghcr.io/devcontainers/features/node:1" → "node", "1"), and says
// whether it is one of the Dev Container project's own (a bare name, as
// older files write them, counts as one).
func featureRef(id string) (name, version string, official bool) {
	ref := id
	if i := strings.Index(ref, "@"); i >= 0 {
		ref, version = ref[:i], ref[i+1:]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref, version = ref[:i], ref[i+1:]
	}
	switch {
	case strings.HasPrefix(ref, officialFeatures):
		name = strings.TrimPrefix(ref, officialFeatures)
		official = name != "" && !strings.Contains(name, "/")
	case !strings.ContainsAny(ref, "/.:"):
		name, official = ref, ref != ""
	default:
		name = ref[strings.LastIndex(ref, "/")+1:]
	}
	return name, version, official
}

// features reads the features object: each ID with its options (an
// object; a string is the version option, as older files write it).
func (d *dc) features() {
	raw, ok := d.doc["features"]
	if !ok || string(raw) == "null" {
		return
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		d.c.failf("features", "want an object of feature references and their options")
		return
	}
	for _, id := range slices.Sorted(maps.Keys(m)) {
		key := "features." + id
		if !d.c.text(key, id) {
			continue
		}
		if len(id) > maxFeatureID || strings.TrimSpace(id) == "" {
			d.c.failf(key, "not a feature reference")
			continue
		}
		f := Feature{ID: id}
		var official bool
		f.Name, f.Version, official = featureRef(id)
		f.Options = d.featureOptions(key, m[id])
		f.Supported = official && supportedFeatures[f.Name]
		switch {
		case !f.Supported:
			d.warn(key, false, "feature %q is not installed: Airlock installs %s; install what it adds in onCreateCommand instead.", id, supportedList())
		case f.Name == "docker-outside-of-docker" || f.Name == "docker-from-docker":
			d.env.Docker = true
			d.warn(key, true, "feature %q becomes Docker inside the VM: the host's Docker is never shared with a sandbox.", id)
		case f.Name == "docker-in-docker":
			d.env.Docker = true
		}
		d.env.Features = append(d.env.Features, f)
	}
}

func supportedList() string {
	return "docker-in-docker, docker-outside-of-docker (as Docker inside the VM), node, python, go, common-utils, git and github-cli"
}

// featureOptions reads a feature's options: an object of strings,
// booleans and numbers (kept as their JSON text), or a string (the
// version option).
func (d *dc) featureOptions(key string, raw json.RawMessage) map[string]string {
	switch firstByte(raw) {
	case '"':
		var v string
		if json.Unmarshal(raw, &v) != nil || !d.c.text(key, v) {
			return nil
		}
		return map[string]string{"version": v}
	case '{':
	case 't', 'f', 'n':
		return nil // true, false, null: no options
	default:
		d.c.failf(key, "want an object of options")
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		d.c.failf(key, "want an object of options")
		return nil
	}
	out := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		k := fmt.Sprintf("%s.%s", key, name)
		v := m[name]
		// Options are strings and booleans by the spec; some features
		// take more (an array of packages): kept as their JSON text.
		if firstByte(v) != '"' || json.Unmarshal(v, new(string)) != nil {
			out[name] = string(v)
		} else {
			var s string
			_ = json.Unmarshal(v, &s)
			out[name] = s
		}
		d.c.text(k+" name", name)
		d.c.text(k, out[name])
	}
	return out
}
