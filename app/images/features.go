package images

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/app/envspec"
	"github.com/airlock-dev/airlock/app/feature"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/vm/image"
)

// featureInstall is the step that installs one feature in the builder
// VM: its checked files arrive as a tar on standard input, and its
// install.sh runs as root from their folder with the options and users
// as variables (set by the step's environment, never written into this
// text).
const featureInstall = `set -e
d=$(mktemp -d /tmp/airlock-feature.XXXXXX)
tar -x -o -C "$d" -f -
_REMOTE_USER_HOME=$(getent passwd "$_REMOTE_USER" | cut -d: -f6 || true)
if [ -z "$_REMOTE_USER_HOME" ]; then _REMOTE_USER_HOME=/root; fi
_CONTAINER_USER_HOME=$_REMOTE_USER_HOME
export _REMOTE_USER_HOME _CONTAINER_USER_HOME
cd "$d"
chmod +x install.sh
./install.sh
cd /
rm -rf "$d"`

// featureCacheFile is where a feature fetched for an environment is
// kept, by its reference: later runs use it without reaching the
// registry (airlock env build --rebuild fetches it again).
func (src *Source) featureCacheFile(ref string) string {
	sum := sha256.Sum256([]byte(ref))
	return filepath.Join(src.Home, "features", hex.EncodeToString(sum[:])[:24]+".json")
}

// cachedFeature is a fetched feature as kept: the checked files as the
// tar the builder gets.
type cachedFeature struct {
	Ref, Digest string
	Tar         []byte
}

// environmentFeatures fetches each feature the environment installs by
// its install.sh (or takes the one fetched before), checked by
// feature.Fetch, in the order they install. Call it only for a
// confirmed environment: it reaches the features' registries.
func (src *Source) environmentFeatures(ctx context.Context, spec *envspec.Environment, rebuild bool, progress func(string)) ([]*feature.Artifact, error) {
	var arts []*feature.Artifact
	for _, f := range spec.Features {
		if !f.InstalledByScript() {
			continue
		}
		a, err := src.fetchFeature(ctx, f.Ref, rebuild, progress)
		if err != nil {
			return nil, fmt.Errorf("environment %s: %w", spec.Source, err)
		}
		arts = append(arts, a)
	}
	refs := make([]string, len(arts))
	metas := make([]*feature.Metadata, len(arts))
	for i, a := range arts {
		refs[i], metas[i] = a.Ref, &a.Meta
	}
	order, err := feature.Order(refs, metas)
	if err != nil {
		return nil, fmt.Errorf("environment %s: %w", spec.Source, err)
	}
	out := make([]*feature.Artifact, len(order))
	for i, j := range order {
		out[i] = arts[j]
	}
	return out, nil
}

func (src *Source) fetchFeature(ctx context.Context, ref string, rebuild bool, progress func(string)) (*feature.Artifact, error) {
	path := src.featureCacheFile(ref)
	if data, err := os.ReadFile(path); err == nil && !rebuild {
		var c cachedFeature
		if json.Unmarshal(data, &c) == nil && c.Ref == ref {
			// Checked again: the file is in the home, but the check is
			// cheap and the tar is what the builder gets.
			if files, meta, err := feature.Read(c.Tar); err == nil {
				return &feature.Artifact{Ref: ref, Digest: c.Digest, Meta: *meta, Files: files}, nil
			}
		}
	}
	progress("fetching the feature " + safetext.Line(ref))
	a, err := feature.Fetch(ctx, ref, feature.FetchOptions{})
	if err != nil {
		return nil, err
	}
	t, err := feature.Tar(a.Files)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(cachedFeature{Ref: ref, Digest: a.Digest, Tar: t})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return nil, err
	}
	return a, os.Rename(tmp, path)
}

// featurePlan is what the features add to an environment's build: a
// step each, the hosts their installs may reach, their containerEnv
// (for the image's runs, under the environment's own variables), and
// their digests (for the cache key).
type featurePlan struct {
	Steps   []SetupStep
	Hosts   []string
	Env     map[string]string
	Digests []string
}

// planFeatures makes the install steps of arts (in order) on base, whose
// commands run as user.
func planFeatures(arts []*feature.Artifact, spec *envspec.Environment, base *image.Image, user string) (featurePlan, error) {
	p := featurePlan{Env: map[string]string{}}
	if len(arts) == 0 {
		return p, nil
	}
	p.Hosts = []string{"@debian"}
	imageEnv := map[string]string{}
	if base.Meta.OCI != nil {
		imageEnv = stepEnv(base.Meta.OCI.Config.Env, nil, nil)
	}
	user = cmp.Or(user, "root")
	for _, a := range arts {
		env, err := feature.InstallEnv(&a.Meta, optionsOf(spec, a.Ref))
		if err != nil {
			return p, fmt.Errorf("feature %s: %w", a.Ref, err)
		}
		// Earlier features' containerEnv is in the image when a later
		// one installs.
		maps.Copy(env, p.Env)
		env["_REMOTE_USER"], env["_CONTAINER_USER"] = user, user
		t, err := feature.Tar(a.Files)
		if err != nil {
			return p, err
		}
		p.Steps = append(p.Steps, SetupStep{Name: "feature " + a.Ref, Shell: featureInstall, Stdin: t, Env: env})
		for _, k := range slices.Sorted(maps.Keys(a.Meta.ContainerEnv)) {
			p.Env[k] = expandVars(a.Meta.ContainerEnv[k], p.Env, imageEnv)
		}
		if h, ok := feature.Hosts(a.Ref); ok {
			p.Hosts = append(p.Hosts, h...)
		}
		p.Digests = append(p.Digests, a.Ref+"@"+a.Digest)
	}
	return p, nil
}

// optionsOf is the options devcontainer.json gives the feature fetched
// by ref.
func optionsOf(spec *envspec.Environment, ref string) map[string]string {
	for _, f := range spec.Features {
		if f.Ref == ref {
			return f.Options
		}
	}
	return nil
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandVars replaces ${NAME} in a containerEnv value by the value set
// so far (earlier features'), else the image's, else nothing: as a
// Dockerfile's ENV would.
func expandVars(v string, set, image map[string]string) string {
	return varRef.ReplaceAllStringFunc(v, func(m string) string {
		k := m[2 : len(m)-1]
		if s, ok := set[k]; ok {
			return s
		}
		return image[k]
	})
}

// featureKey adds the features' digests to an environment's key: a
// feature republished under the same tag builds the environment again.
func featureKey(key string, digests []string) string {
	if len(digests) == 0 {
		return key
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00features\x00%q", key, digests)
	return hex.EncodeToString(h.Sum(nil))
}

// withFeatureEnv is spec with the features' containerEnv under its own
// variables (the description's containerEnv and remoteEnv win, as they
// are set when the container starts), for the environment's runs.
func withFeatureEnv(spec *envspec.Environment, env map[string]string) *envspec.Environment {
	if len(env) == 0 {
		return spec
	}
	c := *spec
	c.Env = maps.Clone(env)
	maps.Copy(c.Env, spec.Env)
	return &c
}

// writeFeatures names, in the trust prompt, each feature the environment
// installs and the hosts its install may reach.
func writeFeatures(b *strings.Builder, env *envspec.Environment) {
	for _, f := range env.Features {
		if !f.InstalledByScript() {
			continue
		}
		hosts := "@debian"
		if h, ok := feature.Hosts(f.Ref); ok {
			if len(h) > 0 {
				hosts += ", " + strings.Join(h, ", ")
			}
		} else {
			hosts += " and the hosts below"
		}
		fmt.Fprintf(b, "  feature: %s (its install.sh run as root in the builder VM; it may reach %s)\n", safetext.Line(f.Ref), hosts)
	}
}
