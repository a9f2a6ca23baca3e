package plan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// AgentsBase is the image the agent image starts from: Debian 12, as a
// registry serves it.
const AgentsBase = "docker.io/library/debian:bookworm-slim"

// AgentsRepo is where releases publish the agent image
// (.github/workflows/images.yml), one tag per content and architecture.
const AgentsRepo = "ghcr.io/airlock-dev/airlock-agents"

// AgentsRef is the published agent image for arch with this Airlock's
// pins: repo (AgentsRepo when empty), tagged with a hash of everything
// the image is made of and the architecture, so a release with other
// pins pulls another image.
func AgentsRef(repo string, arch vm.Arch) string {
	if repo == "" {
		repo = AgentsRepo
	}
	req := AgentsRequest(AgentsBase, arch)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%q\x00", AgentsBase, req.Apt)
	for _, s := range req.Steps {
		fmt.Fprintf(h, "%s\x00", s.Shell)
	}
	return fmt.Sprintf("%s:%s-%s", repo, hex.EncodeToString(h.Sum(nil))[:12], arch)
}

// AgentsRequest is the agent image as provisioning steps on a Debian base
// (already pulled as image base): the same content as the full image
// (image.FullSpec: Debian packages, node and npm from the npm registry,
// the agent CLIs at their pinned versions, the agent user owning
// /workspace), built in a VM through the egress proxy, on any host.
func AgentsRequest(base string, arch vm.Arch) BuildRequest {
	spec := image.FullSpec(arch)
	tarball := func(p image.NpmPackage) string {
		last := p.Name[strings.LastIndex(p.Name, "/")+1:]
		return fmt.Sprintf("https://registry.npmjs.org/%s/-/%s-%s.tgz", p.Name, last, p.Version)
	}
	node := strings.Join([]string{
		"set -e", "cd /tmp", "rm -rf airlock-node && mkdir airlock-node && cd airlock-node",
		"curl -fsSL -o node.tgz " + tarball(spec.Node),
		"curl -fsSL -o npm.tgz " + tarball(spec.NPM),
		"mkdir node && tar -xzf node.tgz -C node",
		// bin/node, and include/node: native addons are built against
		// these headers.
		"for d in bin include share lib; do if [ -d node/package/$d ]; then cp -a node/package/$d /usr/local/; fi; done",
		"mkdir -p /usr/local/lib/node_modules/npm && tar -xzf npm.tgz -C /usr/local/lib/node_modules/npm --strip-components=1",
		"ln -sf ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm",
		"ln -sf ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx",
		"cd /tmp && rm -rf airlock-node", "node --version", "npm --version",
	}, "\n")
	var agents []string
	for _, a := range spec.Agents {
		agents = append(agents, a.String())
	}
	install := "set -e\nnpm install --global --no-fund --no-audit --no-update-notifier --loglevel=error " + strings.Join(agents, " ") +
		"\nnpm cache clean --force\nrm -rf /root/.npm /tmp/*"
	user := fmt.Sprintf("set -e\nuseradd --create-home --uid %d --user-group --shell /bin/bash %s\nmkdir -p /workspace\nchown %d:%d /workspace",
		spec.UID, spec.User, spec.UID, spec.UID)
	return BuildRequest{
		Name: AgentsImage, Base: base, Arch: string(arch), Apt: spec.Packages,
		Steps: []pipeline.SetupStep{
			{Name: "node " + spec.Node.Version + ", npm " + spec.NPM.Version, Shell: node},
			{Name: "agent CLIs", Shell: install},
			{Name: "user " + spec.User, Shell: user},
		},
		Env:    map[string]string{"npm_config_nodedir": "/usr/local"},
		Allow:  []string{"@npm"},
		Source: "agent image",
		User:   spec.User, Label: "the agent image (" + strings.Join(agents, ", ") + ")",
	}
}

// EnsureAgents makes sure the agent image is here for arch: it pulls the
// published one (AgentsRef), and when that fails builds it here
// (AgentsRequest on AgentsBase, minutes), saying why.
func (pl *Planner) EnsureAgents(ctx context.Context, archName string, progress func(string)) error {
	arch := vm.Arch(pl.arch(archName))
	pl.agentsMu.Lock() // fan-out: the other attempts find it here
	defer pl.agentsMu.Unlock()
	if pl.CheckImage(AgentsImage, string(arch)) == nil {
		return nil
	}
	if err := pl.CheckImage(image.DefaultName, string(arch)); err != nil {
		return fmt.Errorf("the agent image boots with the minimal image's kernel, and that is missing too: %w", err)
	}
	ref := AgentsRef(pl.AgentsRepo, arch)
	progress("the agent CLIs need the agent image: pulling " + ref)
	perr := pl.Pull(ctx, ref, AgentsImage, string(arch), progress)
	if perr == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	progress("could not pull the agent image (" + oneLine(perr.Error()) + "); building it here instead, once (minutes)")
	base := AgentsImage + "-base"
	if err := pl.Pull(ctx, AgentsBase, base, string(arch), progress); err != nil {
		return fmt.Errorf("the agent image: the published one did not pull (%v), and its Debian base did not either: %w", perr, err)
	}
	prov, err := pl.Build(AgentsRequest(base, arch))
	if err != nil {
		return err
	}
	prov.Progress, prov.Output = progress, pl.BuildOutput
	if _, err := prov.Run(ctx); err != nil {
		return fmt.Errorf("build the agent image: %w", err)
	}
	return nil
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
