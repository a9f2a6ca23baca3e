package plan

import (
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// AgentsBase is the image the agent image starts from: Debian 12, as a
// registry serves it.
const AgentsBase = "docker.io/library/debian:bookworm-slim"

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
