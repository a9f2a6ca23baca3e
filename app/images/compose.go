package images

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/airlock-dev/airlock/app/envspec"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/sync/transfer"
)

// ComposeImages is where an environment of the Compose form keeps its
// services' images: pulled once, when the environment is built, in the
// builder VM through the egress proxy, and saved there (docker save) in
// the image's read-only layer, so every sandbox of the environment starts
// with them and pulls nothing.
const ComposeImages = "/var/lib/airlock/compose-images/images.tar"

// ComposeProject is the Compose project name of a run's services in the
// VM (its containers are airlock-<service>-1).
const ComposeProject = "airlock"

// ServiceImages are the images the Compose services run, sorted, each
// once.
func ServiceImages(cs *envspec.Compose) []string {
	if cs == nil {
		return nil
	}
	var out []string
	for _, s := range cs.Services {
		if s.Image != "" && s.Build == nil && !slices.Contains(out, s.Image) {
			out = append(out, s.Image)
		}
	}
	slices.Sort(out)
	return out
}

// ServiceRegistry is a registry the services' images come from, and what
// the environment's build may ask of it.
type ServiceRegistry struct {
	// Host is the registry's host (and port) as the image names it;
	// Docker Hub is registry-1.docker.io.
	Host string
	// Allow is the rule the build's pulls get (a preset, or
	// "HOST:PORT (GET,HEAD)"); empty when it is not allowed, and Why says
	// why.
	Allow, Why string
}

// ServiceRegistries are the registries of images (ServiceImages, a
// Dockerfile's FROMs), each once, in order. A registry named by an address, or by a name without a
// dot (an intranet host, localhost), is not allowed: a project's files
// never open the way to the host's own services or its network; the
// build's pull of it then fails with the proxy's refusal.
func ServiceRegistries(images []string) []ServiceRegistry {
	var out []ServiceRegistry
	seen := map[string]bool{}
	for _, img := range images {
		ref, err := name.ParseReference(img)
		if err != nil {
			continue // envspec checked it; nothing to allow
		}
		host := ref.Context().RegistryStr()
		if seen[host] {
			continue
		}
		seen[host] = true
		r := ServiceRegistry{Host: host}
		bare, port := strings.Trim(host, "[]"), "443"
		if h, p, err := net.SplitHostPort(host); err == nil {
			bare, port = h, p
		}
		_, ipErr := netip.ParseAddr(bare)
		switch {
		case host == name.DefaultRegistry:
			r.Host, r.Allow = "registry-1.docker.io", "@docker"
		case host == "ghcr.io":
			r.Allow = "@ghcr"
		case host == "mcr.microsoft.com":
			r.Allow = "@mcr"
		case ipErr == nil:
			r.Why = "an address, not a registry's name"
		case !strings.Contains(bare, ".") || strings.HasSuffix(bare, ".localhost") || strings.HasSuffix(bare, ".local"):
			r.Why = "not a public name (an intranet host or localhost)"
		default:
			r.Allow = bare + ":" + port + " (GET,HEAD)"
		}
		out = append(out, r)
	}
	return out
}

// composeFile is Airlock's own Compose file for the services: made from
// the validated envspec.Compose, never the project's file, so it holds
// only what Airlock read and checked. binds is the folder of the
// project's copy in the VM that a bind's project-relative source is
// under.
type composeFile struct {
	Name     string                    `json:"name"`
	Services map[string]composeService `json:"services"`
	Volumes  map[string]struct{}       `json:"volumes,omitempty"`
}

type composeService struct {
	Image       string                       `json:"image"`
	PullPolicy  string                       `json:"pull_policy"`
	Command     []string                     `json:"command,omitempty"`
	Entrypoint  []string                     `json:"entrypoint,omitempty"`
	User        string                       `json:"user,omitempty"`
	WorkingDir  string                       `json:"working_dir,omitempty"`
	Environment map[string]string            `json:"environment,omitempty"`
	Ports       []composePort                `json:"ports,omitempty"`
	DependsOn   map[string]composeDependency `json:"depends_on,omitempty"`
	Healthcheck *composeHealthcheck          `json:"healthcheck,omitempty"`
	Volumes     []composeVolume              `json:"volumes,omitempty"`
	Privileged  bool                         `json:"privileged,omitempty"`
	CapAdd      []string                     `json:"cap_add,omitempty"`
	Platform    string                       `json:"platform,omitempty"`
}

type composePort struct {
	Target    uint32 `json:"target"`
	Published string `json:"published,omitempty"`
	HostIP    string `json:"host_ip,omitempty"`
	Protocol  string `json:"protocol,omitempty"`
}

type composeDependency struct {
	Condition string `json:"condition"`
}

type composeHealthcheck struct {
	Test        []string `json:"test,omitempty"`
	Interval    string   `json:"interval,omitempty"`
	Timeout     string   `json:"timeout,omitempty"`
	StartPeriod string   `json:"start_period,omitempty"`
	Retries     uint64   `json:"retries,omitempty"`
	Disable     bool     `json:"disable,omitempty"`
}

type composeVolume struct {
	Type     string       `json:"type"`
	Source   string       `json:"source,omitempty"`
	Target   string       `json:"target"`
	ReadOnly bool         `json:"read_only,omitempty"`
	Bind     *composeBind `json:"bind,omitempty"`
}

// composeBind makes a bind's missing source folder, as Compose's short
// syntax does (its long one does not).
type composeBind struct {
	CreateHostPath bool `json:"create_host_path"`
}

// ComposeFile is the Compose file (JSON, which Compose reads as YAML) that
// starts cs's services in the VM: each service's image (pull_policy
// never: the environment's build pulled it), command, entrypoint, user,
// working directory, variables, ports, dependencies with their
// conditions, healthcheck, mounts, privileges and platform. A bind's
// source is that folder of the project's copy under workspace; a bind of
// the Docker socket is the VM's daemon's. Every value is escaped for
// Compose's interpolation ($ as $$), so what envspec read is what runs.
// A service with a build of its own runs the image the environment's
// build made of it (ServiceTag), never built or pulled at run time.
func ComposeFile(cs *envspec.Compose, workspace string) ([]byte, error) {
	f := composeFile{Name: ComposeProject, Services: map[string]composeService{}}
	for _, s := range cs.Services {
		img := s.Image
		if s.Build != nil {
			img = ServiceTag(s.Name)
		}
		c := composeService{
			Image: esc(img), PullPolicy: "never",
			Command: escAll(s.Command), Entrypoint: escAll(s.Entrypoint),
			User: esc(s.User), WorkingDir: esc(s.WorkingDir),
			Privileged: s.Privileged, CapAdd: escAll(s.CapAdd), Platform: esc(s.Platform),
		}
		if len(s.Environment) > 0 {
			c.Environment = map[string]string{}
			for k, v := range s.Environment {
				c.Environment[k] = esc(v)
			}
		}
		for _, p := range s.Ports {
			c.Ports = append(c.Ports, composePort{Target: p.Target, Published: esc(p.Published), HostIP: esc(p.HostIP), Protocol: esc(p.Protocol)})
		}
		for _, d := range s.DependsOn {
			if c.DependsOn == nil {
				c.DependsOn = map[string]composeDependency{}
			}
			c.DependsOn[d.Service] = composeDependency{Condition: cmp.Or(d.Condition, "service_started")}
		}
		if h := s.Healthcheck; h != nil {
			c.Healthcheck = &composeHealthcheck{Test: escAll(h.Test), Retries: h.Retries, Disable: h.Disable,
				Interval: durText(h.Interval), Timeout: durText(h.Timeout), StartPeriod: durText(h.StartPeriod)}
		}
		for _, v := range s.Volumes {
			cv := composeVolume{Type: v.Type, Target: esc(v.Target), ReadOnly: v.ReadOnly}
			switch v.Type {
			case "bind":
				src, ok := bindSource(workspace, v.Source)
				if !ok {
					return nil, fmt.Errorf("the Compose service %s binds %q, which leaves the project", safetext.Line(s.Name), safetext.Line(v.Source))
				}
				cv.Source, cv.Bind = esc(src), &composeBind{CreateHostPath: true}
			case "volume":
				if v.Source != "" {
					if f.Volumes == nil {
						f.Volumes = map[string]struct{}{}
					}
					f.Volumes[esc(v.Source)] = struct{}{}
				}
				cv.Source = esc(v.Source)
			case "tmpfs":
			default:
				continue
			}
			c.Volumes = append(c.Volumes, cv)
		}
		if s.DockerSocket != "" {
			c.Volumes = append(c.Volumes, composeVolume{Type: "bind", Source: "/var/run/docker.sock", Target: esc(s.DockerSocket)})
		}
		f.Services[s.Name] = c
	}
	return json.MarshalIndent(f, "", "  ")
}

// bindSource is a bind's project-relative source as a path of the
// project's copy under workspace; ok is false for one that leaves it
// (envspec refuses those; this is the last check before Docker).
func bindSource(workspace, rel string) (string, bool) {
	c := path.Clean(rel)
	if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
		return "", false
	}
	return path.Join(workspace, c), true
}

// durText is a duration as Compose reads it ("1m30s"); zero is unset.
func durText(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return d.String()
}

// composeImagesStep pulls the services' images in the builder VM, through
// the egress proxy (the rules of ServiceRegistries), builds the services
// that have builds of their own (their contexts and Dockerfiles sent as
// the step's input, built by Docker with BuildKit as the Dockerfile form
// is, tagged ServiceTag), and saves them all as ComposeImages in the
// environment's layer. The daemon is started for the step
// (airlock-guest docker-start: its data on the builder's disk, outside
// the layer) and stopped before the layer is kept; the build inputs, its
// log and key are removed, so the layer holds the images only.
func composeImagesStep(images []string, builds []serviceBuild) SetupStep {
	lines := []string{"set -e", transfer.ShellCommand(transfer.DefaultAgentPath, "docker-start")}
	for _, img := range images {
		lines = append(lines, transfer.ShellCommand("docker", "pull", "-q", img))
	}
	saved := slices.Clone(images)
	if len(builds) > 0 {
		lines = append(lines, transfer.ShellCommand("rm", "-rf", composeBuildDir), transfer.ShellCommand("mkdir", "-p", composeBuildDir),
			transfer.ShellCommand("tar", "-x", "--no-same-owner", "-C", composeBuildDir, "-f", "-"))
	}
	for i, sb := range builds {
		dir := path.Join(composeBuildDir, strconv.Itoa(i))
		// The proxy's variables by name: docker takes their values from
		// the step's environment, which has the builder's proxy.
		argv := dockerBuildArgv(sb.b, dir+"/Dockerfile", ServiceTag(sb.service), dir+"/context", func(k string) string { return k })
		lines = append(lines, "DOCKER_BUILDKIT=1 "+transfer.ShellCommand(argv...))
		saved = append(saved, ServiceTag(sb.service))
	}
	if len(builds) > 0 {
		lines = append(lines, transfer.ShellCommand("rm", "-rf", composeBuildDir))
	}
	dir := path.Dir(ComposeImages)
	lines = append(lines,
		transfer.ShellCommand("mkdir", "-p", dir),
		transfer.ShellCommand(append([]string{"docker", "save", "-o", ComposeImages}, saved...)...),
		transfer.ShellCommand("ls", "-l", ComposeImages),
		"pid=$(cat /var/run/docker.pid)",
		`kill "$pid"`,
		`while [ -e /proc/$pid ]; do sleep 0.2; done`,
		"umount /var/lib/docker 2>/dev/null || true",
		"rm -f /var/log/airlock-dockerd.log /etc/docker/key.json /var/run/docker.pid",
	)
	step := SetupStep{Name: "the Compose services' images", Shell: strings.Join(lines, "\n")}
	if len(builds) > 0 {
		step.Input = func(ctx context.Context, w io.Writer) error { return writeServiceBuilds(ctx, w, builds) }
	}
	return step
}

// composeAllow are the rules the build's pulls get: the registries of
// the services' images and of their Dockerfiles' FROMs.
func composeAllow(cs *envspec.Compose) []string {
	var out []string
	for _, r := range ServiceRegistries(append(ServiceImages(cs), serviceFroms(cs)...)) {
		if r.Allow != "" {
			out = append(out, r.Allow)
		}
	}
	return out
}

// composePrompt adds to the trust prompt the services, their images,
// the Dockerfiles the others are built from, and the registries they
// are pulled from.
func composePrompt(b *strings.Builder, cs *envspec.Compose) {
	if cs == nil {
		return
	}
	var names []string
	for _, s := range cs.Services {
		names = append(names, safetext.Line(s.Name))
	}
	fmt.Fprintf(b, "  Compose services (started in the VM before every command): %s\n", strings.Join(names, ", "))
	images := ServiceImages(cs)
	for _, img := range images {
		fmt.Fprintf(b, "  service image: %s (pulled once, when the environment is built)\n", safetext.Line(img))
	}
	for _, s := range cs.Services {
		if s.Build != nil {
			fmt.Fprintf(b, "  service %s: ", safetext.Line(s.Name))
			writeBuild(b, s.Build, "once, when the environment is built")
		}
	}
	for _, r := range ServiceRegistries(append(images, serviceFroms(cs)...)) {
		if r.Allow != "" {
			fmt.Fprintf(b, "  registry: %s (%s, read-only)\n", safetext.Line(r.Host), r.Allow)
		} else {
			fmt.Fprintf(b, "  registry: %s is not allowed: %s\n", safetext.Line(r.Host), r.Why)
		}
	}
}

// esc escapes s for Compose's interpolation.
func esc(s string) string { return strings.ReplaceAll(s, "$", "$$") }

func escAll(in []string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = esc(s)
	}
	return out
}
