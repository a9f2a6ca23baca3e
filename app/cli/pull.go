package cli

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/internal/bytesize"
	"github.com/airlock-dev/airlock/internal/lockio"
	"github.com/airlock-dev/airlock/vm/image"
	"github.com/airlock-dev/airlock/vm/oci"
)

func newImagePullCmd(e *env) *cobra.Command {
	var arch, name string
	var insecure bool
	cmd := &cobra.Command{
		Use:   "pull [--arch amd64|arm64] [--name NAME] REFERENCE",
		Short: "Pull an OCI image and make it a guest image",
		Long: `pull fetches an OCI (or Docker) image for the guest's platform
(linux/arm64 on Apple silicon, linux/amd64 on Intel) and makes it a guest
image: its layers become a read-only disk that every sandbox of the image
shares, under an overlay whose upper layer is the sandbox's own. Nothing
is installed on the host and nothing needs root: the disk is written in
Go, the same on macOS and Linux.

REFERENCE is what docker pull takes: debian:bookworm-slim,
ghcr.io/team/img:tag, registry.example.com/team/img@sha256:…
Credentials come from docker's config (~/.docker/config.json) and its
credential helpers: sign in with docker login. Layers are kept once under
the Airlock home's oci/ and shared between images; a second pull of an
image fetches only what changed. The kernel and guest agent come from the
minimal image, which must be there (it ships with the app).

The image is named after the repository and tag unless --name says
otherwise; run with it: airlock run --image NAME -- CMD.`,
		Example: `  airlock image pull debian:bookworm-slim
  airlock image pull --name py python:3.12-slim
  airlock run --image py -- python3 --version`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runImagePull(cmd.Context(), e, images.PullRequest{Ref: args[0], Name: name, Arch: arch, Insecure: insecure})
		},
	}
	cmd.Flags().StringVar(&arch, "arch", "", "guest architecture, amd64 or arm64 (default: the host's)")
	cmd.Flags().StringVar(&name, "name", "", "the guest image's name (default: from the repository and tag)")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "allow a registry served over plain HTTP (a local one)")
	return cmd
}

// runImagePull pulls req's image and makes it a guest image, named after
// its repository and tag unless req names it, for the host's
// architecture unless req says.
func runImagePull(ctx context.Context, e *env, req images.PullRequest) error {
	req.Arch = cmp.Or(req.Arch, runtime.GOARCH)
	req.Name = cmp.Or(req.Name, imageNameOf(req.Ref))
	src, err := e.openImages(lockio.NewWriter(e.stderr))
	if err != nil {
		return err
	}
	p := e.newProgress()
	defer p.Done("")
	req.Progress = func(s string) { p.Update(s) }
	im, err := src.Pull(ctx, req)
	p.Done("")
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(infoOf(im))
	}
	o := im.Meta.OCI
	fmt.Fprintf(e.stdout, "pulled %s as image %s (%s)\n  digest  %s\n  disk    %s, %d layers\n",
		o.Name, im.Name, o.Platform, o.Digest, bytesize.Format(im.Meta.Lower.Size), len(o.Layers))
	fmt.Fprintf(e.stdout, "run with: airlock run --image %s -- CMD\n", im.Name)
	return nil
}

// imageNameOf makes a guest image name of a reference: its repository's
// last element and its tag (debian:bookworm-slim → debian-bookworm-slim).
func imageNameOf(ref string) string {
	ref = strings.ToLower(strings.TrimSpace(ref))
	if i := strings.Index(ref, "@"); i >= 0 {
		d := ref[i+1:]
		ref = ref[:i]
		if j := strings.Index(d, ":"); j >= 0 && len(d) > j+12 {
			ref += "-" + d[j+1:j+13]
		}
	}
	if i := strings.LastIndex(ref, "/"); i >= 0 {
		ref = ref[i+1:]
	}
	var b strings.Builder
	for _, r := range strings.ReplaceAll(ref, ":", "-") {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		}
	}
	n := strings.TrimLeft(b.String(), ".-")
	if len(n) > 64 {
		n = n[:64]
	}
	if n == "" {
		n = "image"
	}
	return n
}

func newImagePushCmd(e *env) *cobra.Command {
	var arch string
	var insecure bool
	cmd := &cobra.Command{
		Use:   "push [--arch amd64|arm64] NAME [REFERENCE]",
		Short: "Push an image made from an OCI image (pulled or built with --from, or the agent image) to a registry",
		Long: `push publishes image NAME, its layers and the layers its setup steps added,
as an OCI image: another machine pulls it instead of building it. Without
REFERENCE, the agent image goes where Airlock pulls it from on first use
(` + images.AgentsRepo + `, or $AIRLOCK_AGENTS_REPO), tagged with a hash of its
pins and the architecture. Credentials come from docker's config.`,
		Example: `  airlock image push agents
  airlock image push go registry.example.com/team/go-env:1`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := vmArch(arch)
			h, err := e.home()
			if err != nil {
				return err
			}
			im, err := image.Find(home.ImageRoots(h), args[0], a)
			if err != nil {
				return err
			}
			if im.Meta.OCI == nil {
				return fmt.Errorf("image %s is not made from an OCI image (airlock image pull, image build --from, image build agents): nothing to push", args[0])
			}
			ref := ""
			switch {
			case len(args) == 2:
				ref = args[1]
			case args[0] == images.AgentsImage:
				ref = images.AgentsRef(os.Getenv("AIRLOCK_AGENTS_REPO"), a)
			default:
				return fmt.Errorf("name where to push %s: airlock image push %s REGISTRY/REPOSITORY:TAG", args[0], args[0])
			}
			p := e.newProgress()
			p.Step("pushing " + im.Name + " to " + ref)
			store := oci.Store{Dir: home.Layout{Root: h}.OCI()}
			digest, err := store.Push(cmd.Context(), &im.Meta.OCI.Image, im.Meta.OCI.Extra, ref,
				oci.PushOptions{Arch: a, User: im.User(), Insecure: insecure})
			p.Done("")
			if err != nil {
				return err
			}
			if e.json {
				return e.printJSON(map[string]string{"image": im.Name, "ref": ref, "digest": digest})
			}
			fmt.Fprintf(e.stdout, "pushed %s as %s@%s\n", im.Name, ref, digest)
			return nil
		},
	}
	cmd.Flags().StringVar(&arch, "arch", "", "guest architecture, amd64 or arm64 (default: the host's)")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "allow a registry served over plain HTTP (a local one)")
	return cmd
}
