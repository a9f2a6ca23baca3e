package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/internal/bytesize"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

func newImageCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build, pull and list guest images",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newImageBuildCmd(e), newImagePullCmd(e), newImagePushCmd(e), newImageLsCmd(e))
	return cmd
}

// imageInfo is one image as `image ls --json` and `image build --json` print it.
type imageInfo struct {
	Name        string    `json:"name"`
	Arch        vm.Arch   `json:"arch"`
	Dir         string    `json:"dir"`
	Kernel      string    `json:"kernel"`
	KernelBytes int64     `json:"kernel_bytes"`
	InitrdBytes int64     `json:"initrd_bytes"`
	Modules     int       `json:"modules"`
	Created     time.Time `json:"created"`
	// The root disk (full image): its apparent size and what it takes of
	// the host's disk now (it is sparse), its default user, and the
	// versions of node and the agent CLIs in it.
	RootfsBytes     int64             `json:"rootfs_bytes,omitempty"`
	RootfsAllocated int64             `json:"rootfs_allocated_bytes,omitempty"`
	User            string            `json:"user,omitempty"`
	Node            string            `json:"node,omitempty"`
	Agents          map[string]string `json:"agents,omitempty"`
	DebianPackages  int               `json:"debian_packages,omitempty"`
	// An image made from an OCI image: what was pulled (the reference as
	// asked, the manifest's digest, the platform), its read-only disk's
	// size and C library.
	OCI *ociInfo `json:"oci,omitempty"`
}

type ociInfo struct {
	Ref        string `json:"ref"`
	Name       string `json:"name"`
	Digest     string `json:"digest"`
	Platform   string `json:"platform"`
	Layers     int    `json:"layers"`
	LowerBytes int64  `json:"lower_bytes"`
	Libc       string `json:"libc"`
}

func infoOf(im *image.Image) imageInfo {
	i := imageInfo{
		Name: im.Name, Arch: im.Arch, Dir: im.Dir,
		Kernel:      im.Meta.Kernel.Package + " " + im.Meta.Kernel.Version,
		KernelBytes: im.Meta.Kernel.Size, InitrdBytes: im.Meta.Initrd.Size,
		Modules: len(im.Meta.Modules), Created: im.Meta.Created,
	}
	if o := im.Meta.OCI; o != nil && im.Meta.Lower != nil {
		i.OCI = &ociInfo{Ref: o.Ref, Name: o.Name, Digest: o.Digest, Platform: o.Platform,
			Layers: len(o.Layers) + len(o.Extra), LowerBytes: im.Meta.Lower.Size, Libc: o.Libc}
		return i
	}
	if r := im.Meta.Rootfs; r != nil {
		i.RootfsBytes, i.RootfsAllocated, i.User, i.Node = r.Size, r.Allocated, r.User, r.Node
		if fi, err := os.Stat(im.Rootfs); err == nil {
			i.RootfsAllocated = allocatedBytes(fi)
		}
		i.DebianPackages = len(r.Debian)
		i.Agents = map[string]string{}
		for _, p := range image.FullSpec(im.Arch).Agents {
			for _, q := range r.Npm {
				if q.Name == p.Name && !strings.Contains(q.Version, "-") {
					i.Agents[q.Name] = q.Version
				}
			}
		}
	}
	return i
}

// allocatedBytes is how much of the host's disk a file takes.
func allocatedBytes(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}

const imageBuildLong = `build makes a guest image from Debian packages. Two images can be built:

  minimal  the cloud kernel, busybox and the Airlock guest agent, in an
           initramfs the VM boots straight into (seconds to build).
  agents   the agent image, on any host and as any user: Debian 12
           (debian:bookworm-slim, or --base) pulled, then git, build tools,
           python3, node and npm and the agent CLIs claude, codex and gemini
           at pinned versions installed in a builder VM through the egress
           proxy (@debian, @npm), and the user "agent". The agent presets
           run on it when the full image is not built. Minutes, once.
           --npm-registry URL gets node and the CLIs from a mirror of the
           npm registry instead, the builder reaching only its host.
  full     the same kernel and initramfs, plus an 8 GiB sparse ext4 root disk
           holding Debian 12 (git, curl, build-essential, python3, ripgrep),
           Node.js 22 and npm, and the agent CLIs claude, codex and gemini at
           pinned versions; commands run as the user "agent" (uid 1000,
           home /home/agent). Every sandbox boots its own copy-on-write clone
           of the root disk. Building takes several minutes the first time.

Downloaded packages are cached under the Airlock home's cache/, so a
rebuild is quicker. Building needs apt-get (Debian or Ubuntu). For arm64
images on an amd64 host, arm64 must be a dpkg foreign architecture:
  sudo dpkg --add-architecture arm64 && sudo apt-get update
The full image also needs root, mmdebstrap, npm (from the npm registry:
node and the agent CLIs) and mkfs.ext4 (scripts/setup-debian installs
them), and builds only for the host's own architecture.

With --from, build makes image NAME from IMAGE (one made by airlock image
pull) and setup steps: Debian packages (--apt) then commands (--run, each
run by /bin/sh -c as root), in a builder VM booted from IMAGE. The steps
reach the network only through Airlock's egress proxy, and only the hosts
--allow names (registry presets such as @npm or @pypi included; --apt adds
@debian); every request is recorded in the Airlock home's
builds/NAME/audit.jsonl, the steps' output in builds/NAME/output.log. What
the steps changed is kept as a layer on top of IMAGE's. Nothing runs on
the host and nothing needs root, on macOS as on Linux. A failing step
keeps nothing.`

func newImageBuildCmd(e *env) *cobra.Command {
	var arch string
	var pf provisionFlags
	cmd := &cobra.Command{
		Use:   "build [--arch amd64|arm64] NAME | build NAME --from IMAGE [--apt PKG]... [--run CMD]... [--allow HOST]...",
		Short: "Build a guest image: from Debian packages, or from a pulled image and setup steps run in a VM",
		Long:  imageBuildLong,
		Example: `  airlock image build minimal
  airlock image build --arch arm64 minimal
  sudo airlock image build full
  airlock image build agents
  airlock image build agents --npm-registry https://npm.example.com/
  airlock image pull debian:bookworm-slim
  airlock image build go --from debian-bookworm-slim --apt golang-go,git`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pf.from != "" {
				return buildProvisioned(cmd, e, args[0], arch, pf)
			}
			if args[0] == images.AgentsImage {
				return buildAgents(cmd, e, arch, pf.base, pf.npm)
			}
			if cmd.Flags().Changed("npm-registry") || cmd.Flags().Changed("base") {
				return errors.New("--base and --npm-registry are for the agent image: airlock image build agents --npm-registry URL")
			}
			if cmd.Flags().Changed("apt") || cmd.Flags().Changed("run") || cmd.Flags().Changed("allow") {
				return errors.New("--apt, --run and --allow build on an image: name it with --from IMAGE (see airlock image ls)")
			}
			return runImageBuild(cmd.Context(), e, args[0], arch)
		},
	}
	cmd.Flags().StringVar(&arch, "arch", "", "guest architecture, amd64 or arm64 (default: the host's)")
	pf.register(cmd)
	return cmd
}

// runImageBuild builds image name (minimal or full) for arch ("" for the
// host's) from Debian packages, with progress.
func runImageBuild(ctx context.Context, e *env, name, arch string) error {
	if name != image.DefaultName && name != image.FullName {
		return fmt.Errorf("unknown image %q: the images Airlock can build are: %s, %s, %s; or build one on a pulled image with --from", name, image.DefaultName, images.AgentsImage, image.FullName)
	}
	if arch == "" {
		arch = runtime.GOARCH
	}
	h, err := e.home()
	if err != nil {
		return err
	}
	p := e.newProgress()
	defer p.Done("")
	p.Step("building airlock-guest for linux/" + arch)
	guestBin, err := e.guestFinder(h).Find(ctx, arch)
	if err != nil {
		return err
	}
	im, err := image.Build(ctx, image.BuildOptions{
		Home: h, Name: name, Arch: vm.Arch(arch), GuestBinary: guestBin,
		Progress: func(ev image.Progress) {
			// The full image's slow steps (minutes) get a line of their
			// own, on a terminal or not.
			if slowBuildStep(ev.Step) {
				if p.enabled {
					p.Step(buildMessage(ev))
				} else {
					e.note("%s", buildMessage(ev))
				}
				return
			}
			p.Update(buildMessage(ev))
		},
	})
	p.Done("")
	if err != nil {
		return err
	}
	info := infoOf(im)
	if e.json {
		return e.printJSON(info)
	}
	printBuilt(e.stdout, im, info)
	return nil
}

// printBuilt says what an image build made, for people.
func printBuilt(w io.Writer, im *image.Image, info imageInfo) {
	fmt.Fprintf(w, "built image %s (%s) in %s\n  kernel  %s, %s\n  initrd  %s, %d modules\n",
		im.Name, im.Arch, im.Dir, info.Kernel, bytesize.Format(info.KernelBytes), bytesize.Format(info.InitrdBytes), info.Modules)
	if im.Rootfs != "" {
		fmt.Fprintf(w, "  rootfs  %s (%s on disk), %d Debian packages, node %s, user %s\n",
			bytesize.Format(info.RootfsBytes), bytesize.Format(info.RootfsAllocated), info.DebianPackages, info.Node, info.User)
	}
}

// slowBuildStep reports whether a build step takes long enough to be shown
// as a line of its own: the full image's root disk steps.
func slowBuildStep(s image.Step) bool {
	switch s {
	case image.StepDebian, image.StepNode, image.StepAgents, image.StepFilesystem, image.StepHash:
		return true
	}
	return false
}

func buildMessage(ev image.Progress) string {
	msg := string(ev.Step)
	if ev.Item != "" {
		msg += " " + ev.Item
	}
	switch {
	case ev.Cached:
		msg += " (cached)"
	case ev.Total > 0 && ev.Step == image.StepModules:
		msg += fmt.Sprintf(" %d/%d", ev.Done, ev.Total)
	case ev.Total > 0:
		msg += fmt.Sprintf(" %s/%s", bytesize.Format(ev.Done), bytesize.Format(ev.Total))
	}
	return msg
}

func newImageLsCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List guest images, built or pulled",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := e.home()
			if err != nil {
				return err
			}
			ims, err := image.ListAll(home.ImageRoots(h))
			if err != nil {
				return err
			}
			infos := make([]imageInfo, 0, len(ims))
			for _, im := range ims {
				infos = append(infos, infoOf(im))
			}
			if e.json {
				return e.printJSON(infos)
			}
			if len(infos) == 0 {
				fmt.Fprintf(e.stdout, "no images yet; build one with: %s\n", image.BuildCommand(image.DefaultName, vm.Arch(runtime.GOARCH)))
				return nil
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tARCH\tFROM\tSIZE\tBUILT")
			for _, i := range infos {
				from := "debian packages, " + i.Kernel
				size := bytesize.Format(i.KernelBytes + i.InitrdBytes)
				switch {
				case i.OCI != nil:
					from = i.OCI.Ref + " " + shortDigest(i.OCI.Digest)
					size = fmt.Sprintf("%s (disk %s)", bytesize.Format(i.KernelBytes+i.InitrdBytes+i.OCI.LowerBytes), bytesize.Format(i.OCI.LowerBytes))
				case i.RootfsBytes > 0:
					size = fmt.Sprintf("%s (root disk %s, %s on disk)", bytesize.Format(i.KernelBytes+i.InitrdBytes+i.RootfsAllocated), bytesize.Format(i.RootfsBytes), bytesize.Format(i.RootfsAllocated))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", i.Name, i.Arch, from, size, i.Created.Local().Format("2006-01-02 15:04"))
			}
			return tw.Flush()
		},
	}
}

// shortDigest is a digest as people read it: sha256:0123456789ab.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}
