package images

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/envspec"
	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
	"github.com/airlock-dev/airlock/vm/oci"
)

// AgentsImage is the image a project without an environment of its own,
// or an environment without an image, starts from.
const AgentsImage = "agents"

// Environment is a project's environment made an image: the image its runs
// boot and what every command gets.
type Environment struct {
	*envspec.Environment
	// Image is the guest image built for it (or the base itself, when
	// there is nothing to install).
	Image string
	// Built says the image was built now (not found in the store).
	Built bool
	// AgentsImage is Image with the agent layer on top (node and the
	// agent CLIs, AgentLayer), for agent presets: made when asked for
	// (EnvironmentRequest.WithAgents) and the environment names an image
	// of its own; empty otherwise.
	AgentsImage string
}

// EnvironmentRequest asks for a project's environment image.
type EnvironmentRequest struct {
	Project, Arch string
	// Rebuild pulls the base again and builds even when an image of the
	// same inputs exists.
	Rebuild bool
	// TrustProject confirms the environment's network use now.
	TrustProject bool
	// Progress receives each step of a build.
	Progress func(string)
	// Output receives the setup steps' output.
	Output io.Writer
	// WithAgents also makes the environment's image with the agent CLIs
	// (Environment.AgentsImage), for agent presets.
	WithAgents bool
	// Docker adds Docker inside the VM to the environment (airlock run
	// --docker): the user's own choice, so it needs no confirmation of
	// its own; a project without an environment gets one on the agent
	// image.
	Docker bool
	// Allow are hosts the build may reach too (airlock run --allow, env
	// build --allow: a feature's downloads, a Dockerfile's RUN steps):
	// the user's own, so they need no confirmation and are not part of
	// the cache key.
	Allow []string
}

// DockerPackages are the Debian packages of Docker inside the VM: the
// engine (dockerd, containerd, runc, tini come with it), the iptables it
// writes its rules with, and curl, which fetches Compose (ComposeDeb).
var DockerPackages = []string{"docker.io", "iptables", "curl"}

// ComposeDeb is Compose v2 for Docker inside the VM: Debian 13's
// docker-compose package (Debian 12's is Compose v1, in Python), a static
// Go binary that needs only glibc 2.34, so it installs on Debian 12 and
// Ubuntu 22.04 and later. It is fetched from Debian's mirror (@debian)
// and installed only when its SHA-256 is the one pinned here.
type ComposeDeb struct {
	Version, Path, SHA256 string
}

// composeDebs are the pinned packages, by architecture.
var composeDebs = map[vm.Arch]ComposeDeb{
	vm.AMD64: {Version: "2.26.1", Path: "pool/main/d/docker-compose/docker-compose_2.26.1-4_amd64.deb",
		SHA256: "47681197cb2b1ab88206b42a1a92fc75f50d9530a6322d03494a473eed0408ea"},
	vm.ARM64: {Version: "2.26.1", Path: "pool/main/d/docker-compose/docker-compose_2.26.1-4_arm64.deb",
		SHA256: "bbafaa666f3e7fa00ad36f2a8bab889f1c791ca8743d674e7267a3d07203869c"},
}

// Compose returns the pinned Compose package for arch.
func Compose(arch vm.Arch) (ComposeDeb, bool) {
	c, ok := composeDebs[arch]
	return c, ok
}

// composeStep installs Compose v2 (ComposeDeb) as Docker's CLI plugin
// (docker compose) and as docker-compose.
func composeStep(arch vm.Arch) (SetupStep, error) {
	c, ok := Compose(arch)
	if !ok {
		return SetupStep{}, fmt.Errorf("no Compose package is pinned for %s", arch)
	}
	deb := "/tmp/airlock-compose.deb"
	sh := strings.Join([]string{
		"set -e",
		"curl -fsSL -o " + deb + " http://deb.debian.org/debian/" + c.Path,
		"echo '" + c.SHA256 + "  " + deb + "' | sha256sum -c --quiet -",
		"dpkg -i " + deb,
		"rm -f " + deb,
		"docker compose version",
	}, "\n")
	return SetupStep{Name: "Docker Compose " + c.Version, Shell: sh}, nil
}

// dockerStep puts user (when not root) in the docker group, so that the
// command reaches the daemon without sudo: the VM is the boundary. The
// user is the environment's (checked by envspec) or the image's own
// configuration's, a pulled image's word: an account name, or a uid
// (with a group after a colon), else an error.
func dockerStep(user string) (SetupStep, error) {
	sh := "set -e\ngetent group docker >/dev/null || groupadd --system docker"
	uid, _, _ := strings.Cut(user, ":")
	switch {
	case user == "" || user == "root" || uid == "0":
	case accountName.MatchString(user):
		sh += "\nusermod -aG docker " + user
	case numeric.MatchString(uid):
		sh += "\nu=$(getent passwd " + uid + " | cut -d: -f1)\nif [ -n \"$u\" ]; then usermod -aG docker \"$u\"; fi"
	default:
		return SetupStep{}, fmt.Errorf("the image's user %q is neither an account name nor a uid, so it cannot be put in the docker group", user)
	}
	return SetupStep{Name: "Docker inside the VM", Shell: sh}, nil
}

var (
	accountName = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
	numeric     = regexp.MustCompile(`^[0-9]{1,10}$`)
)

// UntrustedEnvironmentError is an environment whose setup would reach
// the network and that the user has not confirmed.
type UntrustedEnvironmentError struct {
	Project string
	Env     *envspec.Environment
}

func (e *UntrustedEnvironmentError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s describes an environment Airlock would fetch and build for it:\n", e.Env.Source)
	if e.Env.Image != "" {
		fmt.Fprintf(&b, "  image: %s (pulled from its registry, and every run boots it)\n", safetext.Line(e.Env.Image))
	}
	if d := e.Env.Build; d != nil {
		b.WriteString("  ")
		writeBuild(&b, d, "")
		fmt.Fprintf(&b, "    the build may reach: %s\n", strings.Join(DockerfileAllow(e.Env), ", "))
	}
	if len(e.Env.Apt) > 0 {
		fmt.Fprintf(&b, "  Debian packages: %s (from @debian)\n", strings.Join(e.Env.Apt, " "))
	}
	for _, s := range e.Env.Setup {
		fmt.Fprintf(&b, "  %s: %s\n", s.Origin, stepText(s))
	}
	writeFeatures(&b, e.Env)
	for _, s := range e.Env.Start {
		fmt.Fprintf(&b, "  %s: %s (in every sandbox, before its command)\n", startLabel(s), stepText(s))
	}
	for _, h := range e.Env.AddHosts {
		fmt.Fprintf(&b, "  /etc/hosts in every sandbox: %s\n", h.Line())
	}
	if e.Env.Docker {
		fmt.Fprintf(&b, "  Docker inside the VM: %s and Compose v2 (from @debian), a root daemon in the VM\n", strings.Join(DockerPackages, " "))
	}
	composePrompt(&b, e.Env.Compose)
	if len(e.Env.Hosts) > 0 {
		fmt.Fprintf(&b, "  hosts: %s\n", strings.Join(e.Env.Hosts, ", "))
	}
	b.WriteString("A project's files are untrusted input, so Airlock fetches and builds nothing for them until\n")
	b.WriteString("you confirm this exact environment. Nothing was fetched or run. To confirm it:\n")
	fmt.Fprintf(&b, "  airlock trust %s\n", e.Project)
	b.WriteString("Changing the environment needs a new confirmation.")
	return b.String()
}

// writeBuild is a Dockerfile build as the trust prompt names it: the
// Dockerfile and its SHA-256, the context and stage, when it is built
// (when set), each image its FROMs start from, and the registries a
// project's files never open.
func writeBuild(b *strings.Builder, d *envspec.Build, when string) {
	fmt.Fprintf(b, "Dockerfile: %s, built from the context %s", safetext.Line(d.Label()), safetext.Line(d.Context))
	if d.Target != "" {
		fmt.Fprintf(b, ", stage %s", safetext.Line(d.Target))
	}
	b.WriteString(", by Docker in a builder VM")
	if when != "" {
		b.WriteString(", " + when)
	}
	fmt.Fprintf(b, "\n    Dockerfile SHA-256: %s\n", d.Sum)
	for _, f := range d.From {
		fmt.Fprintf(b, "    FROM %s (line %d, pulled by the builder)\n", safetext.Line(f.Ref), f.Line)
	}
	for _, r := range ServiceRegistries(fromRefs(d)) {
		if r.Allow == "" {
			fmt.Fprintf(b, "    registry %s: never allowed by a project's files (%s), so its pull fails\n", safetext.Line(r.Host), r.Why)
		}
	}
}

// startLabel is a start command's key, with its name.
func startLabel(s envspec.Step) string {
	if s.Name == "" {
		return s.Origin
	}
	return s.Origin + "." + s.Name
}

// stepText is a setup step as people read it (safetext: the project's
// files are untrusted).
func stepText(s envspec.Step) string {
	return SetupStep{Shell: s.Shell, Argv: s.Argv}.String()
}

// TrustKey is the trust store's entry for a project's environment: the
// project's path with #environment, confirmed at the environment's Key.
func TrustKey(project string) string { return project + "#environment" }

// Environment finds the project's environment and returns the image its
// runs boot, pulling the base and building (in a VM) what is missing.
// A project without one gives nil.
func (src *Source) Environment(ctx context.Context, req EnvironmentRequest) (*Environment, error) {
	project, err := ProjectDir(req.Project)
	if err != nil {
		return nil, err
	}
	spec, err := envspec.Find(project)
	if err != nil {
		return nil, err
	}
	// What the project's files ask for is confirmed by the user; what the
	// user asked for on the command line (--docker) is not asked again.
	trusted := spec
	switch {
	case spec == nil && !req.Docker:
		return nil, nil
	case spec == nil:
		spec = &envspec.Environment{Source: "--docker", Docker: true}
		trusted = nil
	case req.Docker && !spec.Docker:
		c := *spec
		c.Docker = true
		spec = &c
	}
	for _, w := range spec.Warnings {
		src.note("%s", w) // each names its file
	}
	// Confirmed before anything is fetched for it: the image is pulled,
	// and its layers written, only for an environment the user trusts.
	if trusted != nil && trusted.AsksConfirmation() {
		if err := src.trustEnvironment(project, trusted, req.TrustProject); err != nil {
			return nil, err
		}
	}
	arch := vm.Arch(src.arch(req.Arch))
	progress := func(s string) {
		if req.Progress != nil {
			req.Progress(s)
		}
	}
	base := AgentsImage
	if spec.Build != nil && spec.Image == "" {
		if base, err = src.dockerfileImage(ctx, project, spec, arch, req, progress); err != nil {
			return nil, err
		}
	} else if spec.Image != "" {
		base = envBaseName(spec.Image)
		if _, err := image.Find(src.imageRoots(), base, arch); err != nil || req.Rebuild {
			if _, err := src.Pull(ctx, PullRequest{Ref: spec.Image, Name: base, Arch: string(arch), Progress: progress}); err != nil {
				return nil, fmt.Errorf("environment %s: %w", spec.Source, err)
			}
		}
	}
	baseImg, err := image.Find(src.imageRoots(), base, arch)
	if err != nil {
		if base == AgentsImage {
			return nil, fmt.Errorf("environment %s names no image, so it builds on the agent image, which is not here: build it with `airlock image build agents`: %w", spec.Source, err)
		}
		return nil, err
	}
	if spec.Docker && baseImg.Meta.OCI != nil && baseImg.Meta.OCI.Libc != "glibc" {
		return nil, fmt.Errorf("environment %s wants Docker inside the VM, which Airlock installs from Debian's docker.io: its image %s (%s) has %s; base it on a Debian- or Ubuntu-based image", spec.Source, base, baseImg.Meta.OCI.Ref, orNone(baseImg.Meta.OCI.Libc))
	}
	env := &Environment{Environment: spec, Image: base}
	// What is installed on the base (the Dockerfile's image is built
	// already).
	rest := *spec
	rest.Build = nil
	if rest.NeedsNetwork() {
		if err := src.buildEnvironment(ctx, project, spec, baseImg, env, req, progress); err != nil {
			return nil, err
		}
	}
	if req.WithAgents && (spec.Image != "" || spec.Build != nil) {
		if env.AgentsImage, err = src.withAgentLayer(ctx, env.Image, string(arch), progress); err != nil {
			return nil, fmt.Errorf("environment %s: %w", spec.Source, err)
		}
	}
	return env, nil
}

// buildEnvironment builds what the environment installs on its base, once
// (env-<key>), after the user's confirmation (Environment asks for it
// first).
func (src *Source) buildEnvironment(ctx context.Context, project string, spec *envspec.Environment, baseImg *image.Image, env *Environment, req EnvironmentRequest, progress func(string)) error {
	arch, base := baseImg.Arch, baseImg.Name
	feats, err := src.environmentFeatures(ctx, spec, req.Rebuild, progress)
	if err != nil {
		return err
	}
	fp, err := planFeatures(feats, spec, baseImg, cmp.Or(spec.User, baseImg.User()))
	if err != nil {
		return fmt.Errorf("environment %s: %w", spec.Source, err)
	}
	env.Environment = withFeatureEnv(spec, fp.Env)
	builds, err := src.readServiceBuilds(ctx, project, spec)
	if err != nil {
		return err
	}
	key := serviceBuildsKey(featureKey(environmentKey(spec, baseImg), fp.Digests), builds)
	name := "env-" + key[:12]
	if im, err := image.Load(src.Home, name, arch); err == nil && im.Meta.OCI != nil && im.Meta.OCI.Key == key && !req.Rebuild {
		env.Image = name
		return nil
	}
	br := BuildRequest{Name: name, Base: base, Arch: string(arch), Key: key, Label: project + " " + spec.Source, Apt: spec.Apt, Env: spec.Env,
		Allow: slices.Concat(spec.Hosts, fp.Hosts, req.Allow), Source: "environment " + spec.Source, Steps: fp.Steps}
	for i, s := range spec.Setup {
		n := s.Origin
		if s.Name != "" {
			n += " " + s.Name
		}
		if n == "" {
			n = fmt.Sprintf("setup %d", i+1)
		}
		br.Steps = append(br.Steps, SetupStep{Name: n, Shell: s.Shell, Argv: s.Argv})
	}
	if spec.Docker {
		for _, p := range DockerPackages {
			if !slices.Contains(br.Apt, p) {
				br.Apt = append(br.Apt, p)
			}
		}
		step, err := dockerStep(cmp.Or(spec.User, baseImg.User()))
		if err != nil {
			return fmt.Errorf("environment %s: %w", spec.Source, err)
		}
		compose, err := composeStep(arch)
		if err != nil {
			return fmt.Errorf("environment %s: %w", spec.Source, err)
		}
		br.Steps = append(br.Steps, compose, step)
	}
	if imgs := ServiceImages(spec.Compose); len(imgs) > 0 || len(builds) > 0 {
		br.Allow = append(slices.Clone(br.Allow), composeAllow(spec.Compose)...)
		br.Credentials = registryCredentials(serviceFroms(spec.Compose), authn.DefaultKeychain)
		// First (after apt): a registry refused fails the build before
		// the rest is fetched.
		br.Steps = append([]SetupStep{composeImagesStep(imgs, builds)}, br.Steps...)
	}
	prov, err := src.Build(br)
	if err != nil {
		return err
	}
	prov.Progress, prov.Output = progress, req.Output
	progress(fmt.Sprintf("building the environment of %s (%s), once: later runs start from it", spec.Source, name))
	if _, err := prov.Run(ctx); err != nil {
		return fmt.Errorf("environment %s: %w", spec.Source, err)
	}
	env.Image, env.Built = name, true
	return nil
}

// withAgentLayer is image name with the agent layer on top
// (<name>-agents, made once per agent layer): the agent CLIs on a project's
// own image, without running anything. The image must have glibc.
func (src *Source) withAgentLayer(ctx context.Context, name, arch string, progress func(string)) (string, error) {
	im, err := image.Find(src.imageRoots(), name, vm.Arch(arch))
	if err != nil {
		return "", err
	}
	if im.Meta.OCI == nil {
		return "", fmt.Errorf("image %s is not made from an OCI image", name)
	}
	if im.Meta.OCI.Libc != "glibc" {
		return "", fmt.Errorf("the agent CLIs need glibc, and image %s (%s) has %s (a musl image, such as Alpine, cannot run them): base the environment on a Debian- or Ubuntu-based image", name, im.Meta.OCI.Ref, orNone(im.Meta.OCI.Libc))
	}
	if err := src.EnsureAgents(ctx, arch, progress); err != nil {
		return "", err
	}
	agents, err := image.Find(src.imageRoots(), AgentsImage, vm.Arch(arch))
	if err != nil {
		return "", err
	}
	layer, err := AgentLayer(agents)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "airlock agents on\x00%s\x00%s\x00%s", im.Meta.OCI.Key, im.Meta.OCI.Digest, layer)
	for _, e := range im.Meta.OCI.Extra {
		fmt.Fprintf(h, "\x00%s", e)
	}
	key := hex.EncodeToString(h.Sum(nil))
	out := name + "-agents"
	if len(out) > 64 {
		out = "env-" + key[:12] + "-agents"
	}
	if have, err := image.Load(src.Home, out, vm.Arch(arch)); err == nil && have.Meta.OCI != nil && have.Meta.OCI.Key == key {
		return out, nil
	}
	boot, err := image.Find(src.imageRoots(), image.DefaultName, vm.Arch(arch))
	if err != nil {
		return "", err
	}
	progress("adding the agent CLIs to " + name + " (" + out + ")")
	_, err = image.FromOCI(ctx, src.Home, image.OCIOptions{Name: out, Boot: boot, Store: oci.Store{Dir: home.Layout{Root: src.Home}.OCI()},
		Image: &im.Meta.OCI.Image, Extra: append(slices.Clone(im.Meta.OCI.Extra), layer), Key: key, User: im.User(),
		Label: im.Meta.OCI.Label + ", with the agent CLIs"})
	return out, err
}

func orNone(s string) string {
	if s == "" {
		return "no C library"
	}
	return s
}

// trustEnvironment makes sure the user confirmed this environment's
// setup (or confirms it now).
func (src *Source) trustEnvironment(project string, spec *envspec.Environment, confirm bool) error {
	trust := config.Trust{Path: home.Layout{Root: src.Home}.TrustFile()}
	ok, err := trust.Trusted(TrustKey(project), spec.ConfirmKey())
	if err != nil || ok {
		return err
	}
	if !confirm {
		return &UntrustedEnvironmentError{Project: project, Env: spec}
	}
	if err := trust.Confirm(TrustKey(project), spec.ConfirmKey()); err != nil {
		return err
	}
	src.note("confirmed the environment of %s (%s)", project, spec.Source)
	return nil
}

// envBaseName is the guest image a pulled environment base is kept as.
func envBaseName(ref string) string {
	sum := sha256.Sum256([]byte(strings.TrimSpace(ref)))
	return "envbase-" + hex.EncodeToString(sum[:])[:12]
}

// environmentKey identifies a built environment: the description and
// the base it was built on (its digest and layers).
func environmentKey(spec *envspec.Environment, base *image.Image) string {
	h := sha256.New()
	// A base made from an OCI image is its digest; one Airlock built
	// from Debian's packages (minimal, full: no OCI record) is its build.
	from := fmt.Sprintf("%s %s %s", base.Meta.Name, base.Meta.Created.UTC().Format(time.RFC3339Nano), base.Meta.Guest.SHA256)
	if base.Meta.OCI != nil {
		from = base.Meta.OCI.Digest
	}
	fmt.Fprintf(h, "airlock environment 1\x00%s\x00%s\x00", spec.Key(), from)
	if spec.Docker {
		// What Docker inside the VM installs is Airlock's choice: a
		// new pin builds the environment again.
		c, _ := Compose(base.Arch)
		fmt.Fprintf(h, "docker\x00%q\x00%s\x00", DockerPackages, c.SHA256)
	}
	if base.Meta.OCI != nil {
		for _, e := range base.Meta.OCI.Extra {
			fmt.Fprintf(h, "%s\x00", e)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
