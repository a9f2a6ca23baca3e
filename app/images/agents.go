package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// AgentsBase is the image the agent image starts from: Debian 12, as a
// registry serves it.
const AgentsBase = "docker.io/library/debian:bookworm-slim"

// AgentsRepo is where releases publish the agent image
// (.github/workflows/images.yml), one tag per content and architecture.
const AgentsRepo = "ghcr.io/airlock-dev/airlock-agents"

// AgentPrefix is where the agent layer keeps node, npm and the agent
// CLIs; links in /usr/local/bin put them on every PATH.
const AgentPrefix = "/opt/airlock"

// toolsImage is the agent image's first stage: the Debian base with the
// packages and the agent user.
const toolsImage = AgentsImage + "-tools"

// AgentsRef is the published agent image for arch with this Airlock's
// pins: repo (AgentsRepo when empty), tagged with a hash of everything
// the image is made of and the architecture, so a release with other
// pins pulls another image.
func AgentsRef(repo string, arch vm.Arch) string {
	if repo == "" {
		repo = AgentsRepo
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", AgentsBase)
	for _, req := range []BuildRequest{ToolsRequest(AgentsBase, arch), AgentsRequest(toolsImage, arch, NpmSource{})} {
		fmt.Fprintf(h, "%q\x00", req.Apt)
		for _, s := range req.Steps {
			fmt.Fprintf(h, "%s\x00", s.Shell)
		}
	}
	return fmt.Sprintf("%s:%s-%s", repo, hex.EncodeToString(h.Sum(nil))[:12], arch)
}

// ToolsRequest is the agent image's first stage on a Debian base (pulled
// as image base): the full image's Debian packages (image.FullSpec) and
// the agent user owning /workspace.
func ToolsRequest(base string, arch vm.Arch) BuildRequest {
	spec := image.FullSpec(arch)
	user := fmt.Sprintf("set -e\nuseradd --create-home --uid %d --user-group --shell /bin/bash %s\nmkdir -p /workspace\nchown %d:%d /workspace",
		spec.UID, spec.User, spec.UID, spec.UID)
	return BuildRequest{
		Name: toolsImage, Base: base, Arch: string(arch), Apt: spec.Packages,
		Steps:  []SetupStep{{Name: "user " + spec.User, Shell: user}},
		Source: "agent image", User: spec.User, Label: "the agent image's Debian packages and user",
	}
}

// npmCache is npm's cache while the agent image's second stage installs.
const npmCache = "/var/cache/airlock-npm"

// NpmRegistry is the npm registry the agent image's second stage
// installs from unless told otherwise.
const NpmRegistry = "https://registry.npmjs.org"

// NpmSource is where the agent image's second stage gets node, npm and
// the agent CLIs: the zero value is npm's own registry (@npm); NpmMirror
// makes one for a mirror of it.
type NpmSource struct {
	// URL is the registry's base URL, without a trailing slash.
	URL string
	// Allow is the egress rule that lets the builder reach it.
	Allow string
}

// NpmMirror checks raw, the URL of a mirror of the npm registry (a
// company's Verdaccio, Artifactory or Nexus), and returns where the
// builder gets the packages from and the egress rule (HOST:PORT) that
// lets it reach the mirror and nothing else. The URL goes into a setup
// step's shell script and the build's record, so it is refused unless it
// is a plain http(s) URL: no credentials (the record would keep them), no
// query or fragment, nothing a shell would read as anything but the URL.
func NpmMirror(raw string) (NpmSource, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return NpmSource{}, fmt.Errorf("npm registry %q: %w", raw, err)
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return NpmSource{}, fmt.Errorf("npm registry %q: give an http:// or https:// URL", raw)
	case u.Hostname() == "":
		return NpmSource{}, fmt.Errorf("npm registry %q: the URL names no host", raw)
	case u.User != nil:
		return NpmSource{}, fmt.Errorf("npm registry %q: the URL carries credentials, which the build's record would keep; give the mirror's URL without them", raw)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "":
		return NpmSource{}, fmt.Errorf("npm registry %q: give the registry's base URL, without a query or fragment", raw)
	}
	base := strings.TrimRight(u.String(), "/")
	for _, c := range base {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(":/.-_~%", c)) {
			return NpmSource{}, fmt.Errorf("npm registry %q: the URL has a %q, which the build's shell step would not read as part of a URL; percent-encode it", raw, c)
		}
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return NpmSource{URL: base, Allow: net.JoinHostPort(u.Hostname(), port)}, nil
}

// AgentsRequest is the agent image's second stage, on the first (image
// tools): node and npm from the npm registry (or the mirror npm names)
// and the agent CLIs at their pinned versions, all under AgentPrefix,
// with links in /usr/local/bin. What it adds is the image's top layer,
// the agent layer: self-contained, so it also goes on top of any glibc
// image (a project's environment).
func AgentsRequest(tools string, arch vm.Arch, npm NpmSource) BuildRequest {
	spec := image.FullSpec(arch)
	registry, allow, registryFlag := NpmRegistry, "@npm", ""
	if npm.URL != "" {
		registry, allow, registryFlag = npm.URL, npm.Allow, " --registry "+npm.URL
	}
	tarball := func(p image.NpmPackage) string {
		last := p.Name[strings.LastIndex(p.Name, "/")+1:]
		return fmt.Sprintf("%s/%s/-/%s-%s.tgz", registry, p.Name, last, p.Version)
	}
	p := AgentPrefix
	node := strings.Join([]string{
		"set -e", "cd /tmp", "rm -rf airlock-node && mkdir airlock-node && cd airlock-node",
		"curl -fsSL -o node.tgz " + tarball(spec.Node),
		"curl -fsSL -o npm.tgz " + tarball(spec.NPM),
		"mkdir node && tar -xzf node.tgz -C node",
		"mkdir -p " + p,
		// bin/node, and include/node: native addons are built against
		// these headers.
		"for d in bin include share lib; do if [ -d node/package/$d ]; then cp -a node/package/$d " + p + "/; fi; done",
		"mkdir -p " + p + "/lib/node_modules/npm",
		"tar -xzf npm.tgz -C " + p + "/lib/node_modules/npm --strip-components=1",
		"ln -sf ../lib/node_modules/npm/bin/npm-cli.js " + p + "/bin/npm",
		"ln -sf ../lib/node_modules/npm/bin/npx-cli.js " + p + "/bin/npx",
		"cd /tmp && rm -rf airlock-node", "node --version", "npm --version",
	}, "\n")
	var agents, bins []string
	for _, a := range spec.Agents {
		agents = append(agents, a.String())
	}
	bins = []string{"node", "npm", "npx", "claude", "codex", "gemini"}
	// npm's cache is a directory of its own, deleted after: npm cache
	// clean would start node once more (seconds under emulation) to
	// delete the same files.
	install := strings.Join([]string{
		"set -e",
		"npm install --global --prefix " + p + " --cache " + npmCache + registryFlag + " --no-fund --no-audit --no-update-notifier --loglevel=error " + strings.Join(agents, " "),
		"mkdir -p /usr/local/bin",
		"for b in " + strings.Join(bins, " ") + "; do ln -sf " + p + "/bin/$b /usr/local/bin/$b; done",
		"rm -rf " + npmCache + " /root/.npm /root/.cache /tmp/*",
	}, "\n")
	return BuildRequest{
		Name: AgentsImage, Base: tools, Arch: string(arch),
		Steps: []SetupStep{
			{Name: "node " + spec.Node.Version + ", npm " + spec.NPM.Version, Shell: node},
			{Name: "agent CLIs", Shell: install},
		},
		Env: map[string]string{
			"PATH":               p + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"npm_config_nodedir": p,
			// No npm asks the registry whether a newer npm exists.
			"npm_config_update_notifier": "false",
		},
		Allow:  []string{allow},
		Source: "agent image",
		Label:  "the agent image (" + strings.Join(agents, ", ") + ")",
	}
}

// BuildAgents builds the agent image here: base (an OCI reference) pulled,
// then its two stages in builder VMs, node and the agent CLIs from npm
// (the zero value: npm's own registry). It returns
// the image and where the last stage's record is.
func (src *Source) BuildAgents(ctx context.Context, base, archName string, npm NpmSource, progress func(string), output io.Writer) (*image.Image, string, error) {
	arch := vm.Arch(src.arch(archName))
	baseName := AgentsImage + "-base"
	if _, err := src.Pull(ctx, PullRequest{Ref: base, Name: baseName, Arch: string(arch), Progress: progress}); err != nil {
		return nil, "", err
	}
	var im *image.Image
	var dir string
	for _, req := range []BuildRequest{ToolsRequest(baseName, arch), AgentsRequest(toolsImage, arch, npm)} {
		prov, err := src.Build(req)
		if err != nil {
			return nil, "", err
		}
		prov.Progress, prov.Output = progress, output
		if im, err = prov.Run(ctx); err != nil {
			return nil, "", fmt.Errorf("build the agent image: %w", err)
		}
		dir = prov.Dir
	}
	return im, dir, nil
}

// AgentLayer is the agent image's top layer (the digest of a blob in the
// content store): node and the agent CLIs under AgentPrefix.
func AgentLayer(im *image.Image) (string, error) {
	o := im.Meta.OCI
	switch {
	case o == nil:
		return "", fmt.Errorf("image %s is not made from an OCI image, so it has no agent layer", im.Name)
	case len(o.Extra) > 0:
		return o.Extra[len(o.Extra)-1], nil
	case len(o.Layers) > 0:
		return o.Layers[len(o.Layers)-1].Digest, nil
	}
	return "", fmt.Errorf("image %s has no layers", im.Name)
}

// EnsureAgents makes sure the agent image is here for arch: it pulls the
// published one (AgentsRef), and when that fails builds it here
// (BuildAgents on AgentsBase, minutes), saying why.
func (src *Source) EnsureAgents(ctx context.Context, archName string, progress func(string)) error {
	arch := vm.Arch(src.arch(archName))
	src.agentsMu.Lock() // fan-out: the other attempts find it here
	defer src.agentsMu.Unlock()
	if src.check(AgentsImage, string(arch)) == nil {
		return nil
	}
	if err := src.check(image.DefaultName, string(arch)); err != nil {
		return fmt.Errorf("the agent image boots with the minimal image's kernel, and that is missing too: %w", err)
	}
	ref := AgentsRef(src.AgentsRepo, arch)
	progress("the agent CLIs need the agent image: pulling " + ref)
	_, perr := src.Pull(ctx, PullRequest{Ref: ref, Name: AgentsImage, Arch: string(arch), Progress: progress})
	if perr == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	progress("could not pull the agent image (" + oneLine(perr.Error()) + "); building it here instead, once (minutes)")
	if _, _, err := src.BuildAgents(ctx, AgentsBase, string(arch), NpmSource{}, progress, src.BuildOutput); err != nil {
		return fmt.Errorf("the agent image: the published one did not pull (%v), and building it failed: %w", perr, err)
	}
	return nil
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
