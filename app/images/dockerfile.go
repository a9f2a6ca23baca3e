package images

import (
	"archive/tar"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/envspec"
	"github.com/airlock-dev/airlock/guest"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/internal/headtail"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/transfer"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
	"github.com/airlock-dev/airlock/vm/oci"
)

// Limits of a Dockerfile build's context: what is sent into the builder.
const (
	maxContextFiles = 200_000
	maxContextBytes = 4 << 30
	// maxSaved is the most a builder's `docker save` may send back.
	maxSaved = maxLayer
)

// Where the builder keeps a build: the context, and the Dockerfile apart
// from it (a Dockerfile outside its context is built as Docker does).
const (
	buildDir        = "/var/lib/airlock-build"
	buildContext    = buildDir + "/context"
	buildDockerfile = buildDir + "/Dockerfile"
	buildTag        = "airlock-dockerfile:build"
)

// DockerfileBuilderBase is the image the Dockerfile builder is made
// from when Source.DockerBuilderBase names none: the agent image, which
// every host has, with Docker's packages installed on it once.
const DockerfileBuilderBase = AgentsImage

// dockerfileImage builds the environment's Dockerfile (spec.Build) in a
// builder VM with Docker and returns the image made of it, dfile-<key>,
// built once per Dockerfile, context, arguments, target and builder: a
// later run of the same finds it. The context (a folder of the project,
// without .git and without the files Airlock treats as secrets) is sent
// into the builder as a tar; Docker there builds it with BuildKit, its
// pulls and the build's own requests going through the egress proxy,
// which allows the registries of the Dockerfile's FROM images
// (read-only), @debian and the environment's hosts; the result comes back
// as `docker save`'s archive, read as hostile input (readDockerSave).
// Nothing of the build runs on the host.
func (src *Source) dockerfileImage(ctx context.Context, project string, spec *envspec.Environment, arch vm.Arch, req EnvironmentRequest, progress func(string)) (string, error) {
	b := spec.Build
	progress("reading the build context " + b.Context)
	in, err := src.readBuildInput(ctx, project, spec.Source, b)
	if err != nil {
		return "", fmt.Errorf("environment %s: %w", spec.Source, err)
	}
	ctxDir, m, dockerfile := in.dir, in.m, in.dockerfile
	builder, err := src.dockerBuilder(ctx, arch, req, progress)
	if err != nil {
		return "", fmt.Errorf("environment %s: the Dockerfile builder: %w", spec.Source, err)
	}
	key := dockerfileKey(b, m, builder)
	imName := "dfile-" + key[:12]
	if im, err := image.Load(src.Home, imName, arch); err == nil && im.Meta.OCI != nil && im.Meta.OCI.Key == key && !req.Rebuild {
		return imName, nil
	}
	prov, err := src.Build(BuildRequest{Name: imName, Base: builder.Name, Arch: string(arch), Key: key,
		Label: project + " " + spec.Source + " (" + b.Label() + ")", Allow: append(DockerfileAllow(spec), req.Allow...), Source: "environment " + spec.Source,
		Credentials: registryCredentials(fromRefs(b), authn.DefaultKeychain)})
	if err != nil {
		return "", err
	}
	prov.Progress, prov.Output = progress, req.Output
	progress(fmt.Sprintf("building %s in a builder VM (%s), once: later runs start from it", b.Label(), imName))
	bl, err := prov.boot(ctx)
	if err != nil {
		return "", fmt.Errorf("environment %s: %w", spec.Source, err)
	}
	defer bl.close()
	saved, err := bl.dockerBuild(ctx, ctxDir, m, dockerfile, b)
	if err != nil {
		return "", fmt.Errorf("environment %s: %w", spec.Source, err)
	}
	bl.shutdown(ctx)
	layers := make([]string, len(saved.Layers))
	for i, l := range saved.Layers {
		layers[i] = l.String()
	}
	base := &oci.Image{Ref: "Dockerfile " + b.Label(), Name: project + "/" + b.Label(), Digest: saved.ID.String(),
		Platform: saved.Platform, Config: saved.Config}
	if _, err := bl.write(ctx, base, layers, saved.Config.User); err != nil {
		return "", fmt.Errorf("environment %s: %w", spec.Source, err)
	}
	return imName, nil
}

// buildInput is what a Dockerfile build sends into its builder: the
// context as a sandbox's copy reads it, and the Dockerfile.
type buildInput struct {
	dir        string // the context on the host
	m          *manifest.Manifest
	dockerfile []byte
}

// readBuildInput reads b's context as a sandbox's copy is read (no
// .gitignore, no .git, the files Airlock treats as secrets left out
// and named in a note; a link that leaves the context is not followed),
// within the limits of what is sent into a builder, and its Dockerfile,
// which must still be what envspec read (b.Sum).
func (src *Source) readBuildInput(ctx context.Context, project, source string, b *envspec.Build) (*buildInput, error) {
	dir := filepath.Join(project, filepath.FromSlash(b.Context))
	m, rep, err := manifest.Walk(ctx, dir, manifest.WalkOptions{NoGitignore: true})
	if err != nil {
		return nil, fmt.Errorf("the build context %s: %w", b.Context, err)
	}
	if err := contextFits(m); err != nil {
		return nil, fmt.Errorf("the build context %s %w", b.Context, err)
	}
	if secrets := manifest.SecretPaths(rep.Excluded); len(secrets) > 0 {
		src.note("environment %s: the build context %s leaves out %d %s Airlock treats as secrets (%s): they never enter a VM", source, b.Context,
			len(secrets), plural(len(secrets), "file", "files"), strings.Join(firstN(secrets, 3), ", "))
	}
	dockerfile := []byte(b.Inline) // a Compose file's dockerfile_inline, read with it
	if b.Inline == "" {
		if dockerfile, err = readProjectFile(project, b.Dockerfile, b.Sum); err != nil {
			return nil, err
		}
	}
	return &buildInput{dir: dir, m: m, dockerfile: dockerfile}, nil
}

// DockerfileAllow is what a Dockerfile build may reach: the registries of
// its FROM images, read-only (ServiceRegistries: @docker, @ghcr and @mcr
// by their presets, another registry by its name; never one named by an
// address or a name that is not public), Debian's mirror (most
// Dockerfiles install packages), and the environment's own hosts (and
// the run's --allow, which the build is given beside these).
func DockerfileAllow(spec *envspec.Environment) []string {
	allow := []string{"@debian"}
	add := func(s string) {
		if !slices.Contains(allow, s) {
			allow = append(allow, s)
		}
	}
	if spec.Build != nil {
		for _, r := range ServiceRegistries(fromRefs(spec.Build)) {
			if r.Allow != "" {
				add(r.Allow)
			}
		}
	}
	for _, h := range spec.Hosts {
		add(h)
	}
	return allow
}

// dockerBuilder is the image Dockerfiles are built in: its base
// (Source.DockerBuilderBase, else the agent image) with Docker's packages,
// made once per base.
func (src *Source) dockerBuilder(ctx context.Context, arch vm.Arch, req EnvironmentRequest, progress func(string)) (*image.Image, error) {
	base := cmp.Or(src.DockerBuilderBase, DockerfileBuilderBase)
	if base == AgentsImage {
		if err := src.EnsureAgents(ctx, string(arch), progress); err != nil {
			return nil, err
		}
	}
	baseImg, err := image.Find(src.imageRoots(), base, arch)
	if err != nil {
		return nil, err
	}
	if baseImg.Meta.OCI == nil {
		return nil, fmt.Errorf("image %s is not made from an OCI image", base)
	}
	h := sha256.New()
	fmt.Fprintf(h, "airlock dockerfile builder 1\x00%s\x00%s\x00%q", baseImg.Meta.OCI.Key, baseImg.Meta.OCI.Digest, DockerPackages)
	for _, e := range baseImg.Meta.OCI.Extra {
		fmt.Fprintf(h, "\x00%s", e)
	}
	key := hex.EncodeToString(h.Sum(nil))
	imName := "dockerbuilder-" + key[:12]
	if im, err := image.Load(src.Home, imName, arch); err == nil && im.Meta.OCI != nil && im.Meta.OCI.Key == key {
		return im, nil
	}
	prov, err := src.Build(BuildRequest{Name: imName, Base: base, Arch: string(arch), Key: key, Label: "Docker, to build Dockerfiles in",
		Apt: DockerPackages, Source: "the Dockerfile builder"})
	if err != nil {
		return nil, err
	}
	prov.Progress, prov.Output = progress, req.Output
	progress("making the Dockerfile builder (" + imName + "), once")
	return prov.Run(ctx)
}

// dockerBuild sends the context and the Dockerfile into the builder,
// starts Docker, builds with BuildKit through the proxy and reads the
// image back.
func (bl *builder) dockerBuild(ctx context.Context, ctxDir string, m *manifest.Manifest, dockerfile []byte, b *envspec.Build) (*savedImage, error) {
	run := func(what string, cmd client.Command) error {
		bl.progress(what)
		fmt.Fprintf(bl.log, "### %s\n", what)
		if cmd.Stdout == nil {
			cmd.Stdout = bl.out
		}
		cmd.Stderr, cmd.Dir = bl.out, "/"
		if err := bl.g.Client.Run(ctx, cmd); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%s: %w; the output is above and in %s", what, err, bl.logPath)
		}
		return nil
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeContext(ctx, ctxDir, m, pw)) }()
	err := run(fmt.Sprintf("sending the build context (%d files)", len(m.Entries)), client.Command{
		Args: []string{"sh", "-c", `set -e; rm -rf "$1"; mkdir -p "$1"; tar -x --no-same-owner -C "$1" -f -`, "sh", buildContext}, Stdin: pr})
	pr.CloseWithError(errors.New("the builder stopped reading"))
	if err != nil {
		return nil, err
	}
	if err := run("sending "+b.Label(), client.Command{Args: []string{"sh", "-c", `cat > "$1"`, "sh", buildDockerfile},
		Stdin: strings.NewReader(string(dockerfile))}); err != nil {
		return nil, err
	}
	// As a step runs it: the builder's environment (the sandbox CA's
	// bundle; the agent adds the proxy), which docker-start passes on to
	// the daemon (guest.DockerProxyEnv).
	if err := run("starting Docker in the builder", client.Command{Args: []string{transfer.DefaultAgentPath, "docker-start"}, Env: bl.env}); err != nil {
		return nil, err
	}
	proxy := guest.ProxyEnv()
	argv := dockerBuildArgv(b, buildDockerfile, buildTag, buildContext, func(k string) string { return k + "=" + cmp.Or(bl.env[k], proxy[k]) })
	env := map[string]string{"DOCKER_BUILDKIT": "1"}
	if err := run("docker build "+b.Label(), client.Command{Args: argv, Env: env}); err != nil {
		return nil, err
	}
	bl.progress("keeping the image Docker built")
	sr, sw := io.Pipe()
	type result struct {
		im  *savedImage
		err error
	}
	done := make(chan result, 1)
	go func() {
		im, err := readDockerSave(sr, bl.p.Store, maxSaved)
		sr.CloseWithError(cmp.Or(err, io.EOF))
		done <- result{im, err}
	}()
	stderr := &headtail.Head{Max: 4 << 10}
	err = bl.g.Client.Run(ctx, client.Command{Args: []string{"docker", "save", buildTag}, Stdout: sw, Stderr: stderr, Dir: "/"})
	sw.CloseWithError(cmp.Or(err, io.EOF))
	res := <-done
	switch {
	case res.err != nil:
		return nil, res.err
	case err != nil:
		return nil, fmt.Errorf("docker save: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return res.im, nil
}

// dockerBuildArgv is the docker build command line of b, the
// Dockerfile at dockerfile and its context at dir, tagged tag: BuildKit
// on the host's network (the builder's, whose only way out is the
// proxy), b's target and arguments, and the proxy for the build's own
// requests (RUN curl, apt-get) as Docker's predefined arguments, which
// are not kept in the image (the guest agent sets them for the commands
// it runs; the build's containers get them only so). proxyArg is such
// an argument: NAME=value, or NAME alone for docker to take its value
// from its own environment.
func dockerBuildArgv(b *envspec.Build, dockerfile, tag, dir string, proxyArg func(name string) string) []string {
	argv := []string{"docker", "build", "--network", "host", "--progress", "plain", "-f", dockerfile, "-t", tag}
	if b.Target != "" {
		argv = append(argv, "--target", b.Target)
	}
	for _, k := range slices.Sorted(maps.Keys(b.Args)) {
		argv = append(argv, "--build-arg", k+"="+b.Args[k])
	}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"} {
		if _, given := b.Args[k]; !given {
			argv = append(argv, "--build-arg", proxyArg(k))
		}
	}
	return append(argv, dir)
}

// contextFits refuses a context too large to send.
func contextFits(m *manifest.Manifest) error {
	if len(m.Entries) > maxContextFiles {
		return fmt.Errorf("has %d files; Airlock sends at most %d into a builder", len(m.Entries), maxContextFiles)
	}
	var n int64
	for _, e := range m.Entries {
		n += e.Size
	}
	if n > maxContextBytes {
		return fmt.Errorf("holds %d MiB; Airlock sends at most %d MiB into a builder", n>>20, maxContextBytes>>20)
	}
	return nil
}

// writeContext writes the context's files as m lists them (a file that
// changed since is an error: the build's key would not be its content).
func writeContext(ctx context.Context, dir string, m *manifest.Manifest, w io.Writer) error {
	tw := tar.NewWriter(w)
	if err := addContext(ctx, tw, "", dir, m); err != nil {
		return err
	}
	return tw.Close()
}

// addContext writes the context's files as m lists them into tw, each
// path under prefix.
func addContext(ctx context.Context, tw *tar.Writer, prefix, dir string, m *manifest.Manifest) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, e := range m.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		h := &tar.Header{Name: prefix + e.Path, Mode: int64(e.Mode.Perm()), Format: tar.FormatPAX}
		switch e.Type {
		case manifest.Dir:
			h.Typeflag, h.Name = tar.TypeDir, prefix+e.Path+"/"
		case manifest.Symlink:
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.Target
		case manifest.File:
			h.Typeflag, h.Size = tar.TypeReg, e.Size
		default:
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if e.Type != manifest.File {
			continue
		}
		f, err := root.Open(e.Path)
		if err != nil {
			return err
		}
		hw := sha256.New()
		_, err = io.CopyN(io.MultiWriter(tw, hw), f, e.Size)
		f.Close()
		if err != nil || hex.EncodeToString(hw.Sum(nil)) != e.SHA256 {
			return fmt.Errorf("%s changed while the build context was sent; build again", e.Path)
		}
	}
	return nil
}

// dockerfileKey identifies a Dockerfile build: the build as described
// (the Dockerfile's path and SHA-256, context, arguments, target), every
// file of the context, and the builder.
func dockerfileKey(b *envspec.Build, m *manifest.Manifest, builder *image.Image) string {
	h := sha256.New()
	desc, _ := json.Marshal(b) // plain data
	fmt.Fprintf(h, "airlock dockerfile 1\x00%s\x00%s\x00%s\x00", desc, builder.Meta.OCI.Key, builder.Arch)
	writeEntries(h, m)
	return hex.EncodeToString(h.Sum(nil))
}

// writeEntries writes what a key holds of a build context: every
// file's path, type, mode, size, SHA-256 and link target.
func writeEntries(w io.Writer, m *manifest.Manifest) {
	for _, e := range m.Entries {
		fmt.Fprintf(w, "%q %s %o %d %s %q\x00", e.Path, e.Type, e.Mode, e.Size, e.SHA256, e.Target)
	}
}

// readProjectFile reads the project's file rel (inside the project: a
// link out of it does not open) and checks it is still what was read
// when the environment was (sum).
func readProjectFile(project, rel, sum string) ([]byte, error) {
	root, err := os.OpenRoot(project)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(filepath.FromSlash(path.Clean(rel)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 1<<20+1))
	if err != nil {
		return nil, err
	}
	if s := sha256.Sum256(data); hex.EncodeToString(s[:]) != sum {
		return nil, fmt.Errorf("%s changed while the environment was read; run again", rel)
	}
	return data, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(slices.Clone(s[:n]), "…")
	}
	return s
}

// registryCredentials are the host's sign-ins (its Docker configuration:
// ~/.docker/config.json, or $DOCKER_CONFIG, and the credential helpers it
// names) for the registries of refs, for the proxy to add to the
// builder's requests to them: a FROM of a private registry pulls with
// your credentials, which never enter the VM. Registries without one,
// and identity tokens (which are not a user and password), give none.
func registryCredentials(refs []string, keychain authn.Keychain) []egress.Credential {
	var out []egress.Credential
	seen := map[string]bool{}
	for _, ref := range refs {
		r, err := name.ParseReference(ref)
		if err != nil {
			continue
		}
		reg := r.Context().Registry
		if seen[reg.RegistryStr()] {
			continue
		}
		seen[reg.RegistryStr()] = true
		a, err := keychain.Resolve(reg)
		if err != nil || a == authn.Anonymous {
			continue
		}
		cfg, err := a.Authorization()
		if err != nil || cfg == nil || cfg.IdentityToken != "" {
			continue
		}
		basic := cfg.Auth
		if basic == "" && cfg.Username != "" {
			basic = base64.StdEncoding.EncodeToString([]byte(cfg.Username + ":" + cfg.Password))
		}
		if basic == "" {
			continue
		}
		hosts := []string{reg.RegistryStr()}
		switch reg.RegistryStr() {
		case name.DefaultRegistry:
			hosts = []string{"registry-1.docker.io", "auth.docker.io"}
		}
		out = append(out, egress.Credential{Hosts: hosts, Authorization: "Basic " + basic, Name: "registry credentials for " + reg.RegistryStr()})
	}
	return out
}

// RunRegistryCredentials are the host's sign-ins (registryCredentials)
// for the registries a run's policy allows by exact name over TLS with
// methods (requests the proxy terminates and decides one by one: @docker's
// and @ghcr's read-only rules, a registry the user allowed so), for the
// proxy to add to the pulls of the Docker daemon inside the VM, as it
// does a build's: private images pull with your sign-in, which never
// enters the VM. A tunnel (a rule without methods) is not looked into, so
// it gets none.
func RunRegistryCredentials(pol *egress.Policy) []egress.Credential {
	return registryCredentials(allowedRegistries(pol.Allow), authn.DefaultKeychain)
}

// allowedRegistries names, as references, the registries rules allow for
// RunRegistryCredentials: Docker Hub once for its API and token hosts.
func allowedRegistries(rules []egress.Rule) []string {
	var refs []string
	for _, r := range rules {
		if len(r.Methods) == 0 || strings.HasPrefix(r.Host, "*.") || (r.Port != 0 && r.Port != egress.DefaultTLSPort) {
			continue
		}
		host := strings.ToLower(strings.TrimSuffix(r.Host, "."))
		switch host {
		case "registry-1.docker.io", "auth.docker.io", "index.docker.io", "docker.io":
			host = name.DefaultRegistry
		}
		if strings.Contains(host, ":") { // an IPv6 address: no registry name
			continue
		}
		refs = append(refs, host+"/airlock/registry")
	}
	return refs
}

// fromRefs are the Dockerfile's FROM images.
func fromRefs(b *envspec.Build) []string {
	var out []string
	for _, f := range b.From {
		out = append(out, f.Ref)
	}
	return out
}
