package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/internal/bytesize"
	"github.com/airlock-dev/airlock/internal/lockio"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

func newEnvCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Build, list and remove projects' environments",
		Long: `A project describes the environment its sandboxes run in, in airlock.toml's
[environment] table (image, apt, setup, env, user, hosts) or in
.devcontainer/devcontainer.json (image, containerEnv, remoteEnv, remoteUser,
onCreateCommand, postCreateCommand, workspaceFolder); the first found wins,
and without either a project uses the agent image. Keys Airlock does not
support are named in a warning.

The image is pulled, and the packages and setup commands are installed in a
builder VM, through the egress proxy, once: the result is an image every
later sandbox of the project starts from (warm, after the first). Setup that
reaches the network needs your confirmation of the exact environment
(airlock trust DIR). airlock run builds what is missing on its own; env
build builds ahead, or again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newEnvBuildCmd(e), newEnvLsCmd(e), newEnvRmCmd(e))
	return cmd
}

// envInfo is an environment image as env ls --json and env build --json
// print it.
type envInfo struct {
	Image  string `json:"image"`
	Arch   string `json:"arch"`
	Label  string `json:"label,omitempty"`
	From   string `json:"from,omitempty"`
	Key    string `json:"key,omitempty"`
	Layers int    `json:"layers"`
	Bytes  int64  `json:"disk_bytes"`
	Built  string `json:"built"`
}

func envInfoOf(im *image.Image) envInfo {
	i := envInfo{Image: im.Name, Arch: string(im.Arch), Built: im.Meta.Created.Local().Format("2006-01-02 15:04")}
	if o := im.Meta.OCI; o != nil {
		i.Label, i.From, i.Key, i.Layers = o.Label, o.Ref, o.Key, len(o.Layers)+len(o.Extra)
	}
	if im.Meta.Lower != nil {
		i.Bytes = im.Meta.Lower.Size
	}
	return i
}

func newEnvBuildCmd(e *env) *cobra.Command {
	var arch string
	var rebuild, trust, agents, docker bool
	var allow []string
	cmd := &cobra.Command{
		Use:   "build [DIR]",
		Short: "Build the environment of the project in DIR (default: the current directory)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			return runEnvBuild(cmd.Context(), e, images.EnvironmentRequest{Project: dir, Arch: arch, Rebuild: rebuild, TrustProject: trust, WithAgents: agents, Docker: docker, Allow: allow})
		},
	}
	cmd.Flags().StringVar(&arch, "arch", "", "guest architecture, amd64 or arm64 (default: the host's)")
	cmd.Flags().BoolVar(&rebuild, "rebuild", false, "pull the base image again and build even when the environment is built")
	cmd.Flags().BoolVar(&trust, "trust-project", false, "confirm the environment's setup now (as airlock trust DIR does)")
	cmd.Flags().BoolVar(&docker, "docker", false, "build Docker inside the VM into the environment, as airlock run --docker does (the engine and Compose v2; a project without an environment gets one on the agent image)")
	cmd.Flags().StringArrayVar(&allow, "allow", nil, "a host the build may reach too, HOST[:PORT] or a registry preset (@npm), as for airlock run (a feature's downloads, a Dockerfile's RUN steps); repeatable")
	cmd.Flags().BoolVar(&agents, "with-agents", false, "also make the environment's image with the agent CLIs on top (what agent presets run on; airlock run makes it when needed)")
	return cmd
}

// runEnvBuild builds the environment req's project describes, unless
// it is built, and says which image it is.
func runEnvBuild(ctx context.Context, e *env, req images.EnvironmentRequest) error {
	lines := lockio.NewWriter(e.stderr)
	src, err := e.openImages(lines)
	if err != nil {
		return err
	}
	p := e.newProgress()
	defer p.Done("")
	req.Progress = func(s string) { p.Step(s) }
	if !e.json {
		req.Output = lines
	}
	env, err := src.Environment(ctx, req)
	p.Done("")
	if err != nil {
		return err
	}
	if env == nil {
		abs, _ := filepath.Abs(req.Project)
		return fmt.Errorf("%s describes no environment (no [environment] in airlock.toml, no .devcontainer/devcontainer.json or .devcontainer.json): its sandboxes use the agent image", abs)
	}
	im, err := image.Find(home.ImageRoots(src.Home), env.Image, vmArch(req.Arch))
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(struct {
			envInfo
			AgentsImage string `json:"agents_image,omitempty"`
		}{envInfoOf(im), env.AgentsImage})
	}
	verb := "is built"
	if env.Built {
		verb = "built"
	}
	fmt.Fprintf(e.stdout, "environment of %s %s: image %s (%s)\n", env.Source, verb, env.Image, bytesize.Format(im.Meta.Lower.Size))
	if env.AgentsImage != "" {
		fmt.Fprintf(e.stdout, "  with the agent CLIs: image %s\n", env.AgentsImage)
	}
	return nil
}

// envImages are the images environments made: their bases (envbase-…)
// and the built ones (env-…).
func envImages(h string) ([]*image.Image, error) {
	all, err := image.List(h)
	if err != nil {
		return nil, err
	}
	var out []*image.Image
	for _, im := range all {
		if strings.HasPrefix(im.Name, "env-") || strings.HasPrefix(im.Name, "envbase-") {
			out = append(out, im)
		}
	}
	return out, nil
}

func newEnvLsCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the environments built and the bases pulled for them",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := e.home()
			if err != nil {
				return err
			}
			ims, err := envImages(h)
			if err != nil {
				return err
			}
			infos := make([]envInfo, 0, len(ims))
			for _, im := range ims {
				infos = append(infos, envInfoOf(im))
			}
			if e.json {
				return e.printJSON(infos)
			}
			if len(infos) == 0 {
				fmt.Fprintln(e.stdout, "no environments yet: airlock run builds a project's environment, or airlock env build DIR")
				return nil
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "IMAGE\tARCH\tFOR\tDISK\tLAYERS\tBUILT")
			for _, i := range infos {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", i.Image, i.Arch, i.Label, bytesize.Format(i.Bytes), i.Layers, i.Built)
			}
			return tw.Flush()
		},
	}
}

func newEnvRmCmd(e *env) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "rm IMAGE... | --all",
		Short: "Remove environment images (airlock run builds them again when needed)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return fmt.Errorf("name the environment images to remove (airlock env ls), or give --all")
			}
			h, err := e.home()
			if err != nil {
				return err
			}
			ims, err := envImages(h)
			if err != nil {
				return err
			}
			want := map[string]bool{}
			for _, a := range args {
				want[a] = true
			}
			var removed []string
			for _, im := range ims {
				if !all && !want[im.Name] {
					continue
				}
				if err := os.RemoveAll(im.Dir); err != nil {
					return err
				}
				delete(want, im.Name)
				removed = append(removed, im.Name+" ("+string(im.Arch)+")")
			}
			for n := range want {
				return fmt.Errorf("%s is not an environment image (see airlock env ls)", n)
			}
			if e.json {
				return e.printJSON(map[string]any{"removed": removed})
			}
			for _, r := range removed {
				fmt.Fprintf(e.stdout, "removed %s\n", r)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "remove every environment image")
	return cmd
}

// vmArch is a --arch flag's architecture, the host's when empty.
func vmArch(a string) vm.Arch {
	if a == "" {
		return vm.Arch(runtime.GOARCH)
	}
	return vm.Arch(a)
}
