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

// dockerFeatures turn Docker inside the VM on instead of being
// installed: docker-from-docker is docker-outside-of-docker's former
// name.
var dockerFeatures = map[string]bool{"docker-in-docker": true, "docker-outside-of-docker": true, "docker-from-docker": true}

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
	d.airlockHosts()
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
		f.Ref = ociRef(id, f.Name, f.Version, official)
		f.Supported = f.Ref != ""
		switch {
		case !f.Supported:
			d.warn(key, false, "feature %q is not installed: Airlock installs features published to an OCI registry (\"ghcr.io/OWNER/REPO/NAME:VERSION\"), not a folder of the project or a tarball's URL; install what it adds in onCreateCommand instead.", id)
		case official && (f.Name == "docker-outside-of-docker" || f.Name == "docker-from-docker"):
			d.env.Docker = true
			d.warn(key, true, "feature %q becomes Docker inside the VM: the host's Docker is never shared with a sandbox.", id)
		case official && f.Name == "docker-in-docker":
			d.env.Docker = true
		}
		d.env.Features = append(d.env.Features, f)
	}
}

// ociRef is the OCI reference a feature is fetched from: the ID itself
// when it names a registry, the Dev Container project's own for a bare
// name (as older files write them); empty when it is not an OCI
// reference (a folder of the project, "./local-feature", or a tarball's
// URL).
func ociRef(id, name, version string, official bool) string {
	switch {
	case strings.Contains(id, "://") || strings.HasPrefix(id, ".") || strings.HasPrefix(id, "/") || name == "":
		return ""
	case official && !strings.HasPrefix(id, officialFeatures):
		ref := officialFeatures + name
		if version == "" {
			return ref + ":latest"
		}
		return ref + ":" + version
	case !strings.Contains(id, "/"):
		return ""
	}
	return id
}

// InstalledByScript says the feature is installed by running its own
// install.sh in the builder VM; the Docker features give Docker inside
// the VM instead, and one not published to a registry is not installed.
func (f Feature) InstalledByScript() bool {
	return f.Supported && !(strings.HasPrefix(f.Ref, officialFeatures) && dockerFeatures[f.Name])
}

// airlockHosts reads customizations.airlock.hosts: the hosts a
// devcontainer.json project's features and setup may reach, beyond
// @debian and what Airlock knows its official features need. They are
// confirmed with the rest of the environment (airlock trust).
func (d *dc) airlockHosts() {
	raw, ok := d.doc["customizations"]
	if !ok {
		return
	}
	var c struct {
		Airlock *struct {
			Hosts []string `json:"hosts"`
		} `json:"airlock"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Airlock == nil {
		return // editors' settings: moot, and warned of as such
	}
	d.c.hosts("customizations.airlock.hosts", c.Airlock.Hosts)
	d.env.Hosts = append(d.env.Hosts, c.Airlock.Hosts...)
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
