package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/internal/bytesize"
	"github.com/airlock-dev/airlock/internal/lockio"
)

// provisionFlags are image build's flags for an image made of a pulled
// image and setup steps.
type provisionFlags struct {
	base  string
	npm   string
	from  string
	apt   []string
	run   []string
	allow []string
}

func (f *provisionFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.base, "base", images.AgentsBase, "the agent image's Debian base, an OCI image reference (image build agents)")
	fl.StringVar(&f.npm, "npm-registry", "", "a mirror of the npm registry to get node and the agent CLIs from, its host the only one the builder may reach (image build agents; default "+images.NpmRegistry+")")
	fl.StringVar(&f.from, "from", "", "build on this image (made by airlock image pull), with the setup steps below")
	fl.StringSliceVar(&f.apt, "apt", nil, "Debian packages to install first (repeatable, or comma-separated)")
	fl.StringArrayVar(&f.run, "run", nil, "a setup command, run by /bin/sh -c as root after the packages (repeatable, in order)")
	fl.StringArrayVar(&f.allow, "allow", nil, "a host the setup steps may reach: HOST, HOST:PORT, or a registry preset ("+egress.RegistryNames()+")")
}

// buildAgents pulls the agent image's Debian base and builds the agent
// image on it, in two stages (packages and user; node and the agent CLIs).
func buildAgents(cmd *cobra.Command, e *env, arch, base, registry string) error {
	var npm images.NpmSource
	if registry != "" {
		var err error
		if npm, err = images.NpmMirror(registry); err != nil {
			return err
		}
	}
	lines := lockio.NewWriter(e.stderr)
	src, err := e.openImages(lines)
	if err != nil {
		return err
	}
	p := e.newProgress()
	defer p.Done("")
	var output io.Writer
	if !e.json {
		output = lines
	}
	im, dir, err := src.BuildAgents(cmd.Context(), base, arch, npm, func(s string) { p.Step(s) }, output)
	p.Done("")
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(infoOf(im))
	}
	fmt.Fprintf(e.stdout, "built the agent image %s (%s) on %s: %s, user %s\n  record  %s\n", im.Name, im.Arch, base,
		bytesize.Format(im.Meta.Lower.Size), im.User(), dir)
	return nil
}

// buildProvisioned makes image name from a pulled image and setup steps.
func buildProvisioned(cmd *cobra.Command, e *env, name, arch string, f provisionFlags) error {
	lines := lockio.NewWriter(e.stderr)
	src, err := e.openImages(lines)
	if err != nil {
		return err
	}
	req := images.BuildRequest{Name: name, Base: f.from, Arch: arch, Apt: f.apt, Allow: f.allow, Source: "image build"}
	for i, r := range f.run {
		req.Steps = append(req.Steps, images.SetupStep{Name: fmt.Sprintf("run %d", i+1), Shell: r})
	}
	prov, err := src.Build(req)
	if err != nil {
		return err
	}
	p := e.newProgress()
	defer p.Done("")
	prov.Progress = func(s string) { p.Step(s) }
	if !e.json {
		prov.Output = lines
	}
	im, err := prov.Run(cmd.Context())
	p.Done("")
	if err != nil {
		return err
	}
	info := infoOf(im)
	if e.json {
		return e.printJSON(info)
	}
	fmt.Fprintf(e.stdout, "built image %s (%s) from %s with %d setup steps\n  disk    %s, %d layers\n  record  %s\nrun with: airlock run --image %s -- CMD\n",
		im.Name, im.Arch, f.from, len(prov.Steps), bytesize.Format(im.Meta.Lower.Size), info.OCI.Layers, prov.Dir, im.Name)
	return nil
}
