package envspec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/template"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v4"
)

// Limits on what a Compose setup may ask for: a project's files are
// hostile input, and Compose expands port ranges.
const (
	maxComposeFiles = 8
	maxServices     = 64
	maxPorts        = 1024
)

// composeProjectName names the Compose project (container and network
// names in the VM); the project's own name never matters there.
const composeProjectName = "airlock"

// composeForm reads the Compose form: dockerComposeFile (a path or an
// array, relative to the devcontainer.json's folder), service and
// runServices. The dev service's image or build becomes the
// environment's, its variables the environment's first ones; the others
// are the services the runtime starts beside the agent.
func (d *dc) composeForm() {
	var paths []string
	raw := d.doc["dockerComposeFile"]
	var one string
	if json.Unmarshal(raw, &one) == nil {
		paths = []string{one}
	} else if err := json.Unmarshal(raw, &paths); err != nil {
		d.c.failf("dockerComposeFile", "want a path or an array of paths")
		return
	}
	if len(paths) == 0 || len(paths) > maxComposeFiles {
		d.c.failf("dockerComposeFile", "want between 1 and %d Compose files, not %d", maxComposeFiles, len(paths))
		return
	}
	cs := &Compose{Service: d.str("service")}
	for i, p := range paths {
		key := fmt.Sprintf("dockerComposeFile[%d]", i)
		rel, ok := inProject(d.dir, p)
		switch {
		case !d.c.text(key, p):
			return
		case !ok:
			d.c.failf(key, "%q leaves the project; Airlock reads Compose files only inside the project", p)
			return
		}
		cs.Files = append(cs.Files, rel)
	}
	if cs.Service == "" {
		d.c.failf("service", "missing; want the Compose service the agent runs in")
		return
	}
	for _, key := range []string{"image", "build", "dockerFile", "runArgs", "mounts"} {
		if d.has(key) {
			d.warn(key, true, "%q is not used: with dockerComposeFile, the dev service %q describes the container.", key, cs.Service)
		}
	}
	proj := d.loadCompose(cs.Files)
	if proj == nil {
		return
	}
	dev, ok := proj.Services[cs.Service]
	if !ok {
		d.c.failf("service", "%q is not a service of %s (it has %s)", cs.Service, strings.Join(cs.Files, ", "), strings.Join(slices.Sorted(maps.Keys(proj.Services)), ", "))
		return
	}
	if raw, ok := d.doc["runServices"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &cs.RunServices); err != nil {
			d.c.failf("runServices", "want an array of service names")
		}
		for i, s := range cs.RunServices {
			if _, ok := proj.Services[s]; !ok {
				d.c.failf(fmt.Sprintf("runServices[%d]", i), "%q is not a service of %s", s, strings.Join(cs.Files, ", "))
			}
		}
	} else {
		for _, s := range slices.Sorted(maps.Keys(proj.Services)) {
			if s != cs.Service {
				cs.RunServices = append(cs.RunServices, s)
			}
		}
	}
	d.devService(dev, cs)
	start := map[string]bool{}
	var visit func(string)
	visit = func(name string) {
		if start[name] || name == cs.Service {
			return
		}
		start[name] = true
		for dep := range proj.Services[name].DependsOn {
			visit(dep)
		}
	}
	for _, s := range cs.RunServices {
		visit(s)
	}
	for dep := range dev.DependsOn {
		visit(dep)
	}
	for _, name := range slices.Sorted(maps.Keys(start)) {
		if svc, ok := proj.Services[name]; ok {
			cs.Services = append(cs.Services, d.service(svc, cs.Service))
		}
	}
	d.env.Compose = cs
	d.env.Docker = true // the services run under Docker inside the VM
}

// loadCompose reads the Compose files through the project's files and
// loads them with compose-go: without the host's environment (variables
// are interpolated from nothing, so ${X:-default} gives its default and
// ${X} the empty string, named in a warning), without the project's .env
// (a secret file that never enters a sandbox), without following include
// or extends to other files, and with every relative path resolved
// against the first file's folder, as Compose does.
func (d *dc) loadCompose(files []string) *types.Project {
	details := types.ConfigDetails{
		WorkingDir:  filepath.Join(d.files.dir, filepath.FromSlash(path.Dir(files[0]))),
		Environment: types.Mapping{},
	}
	for i, name := range files {
		key := fmt.Sprintf("dockerComposeFile[%d]", i)
		data, err := d.files.read(name)
		if err != nil {
			d.c.failf(key, "%s cannot be read inside the project: %v", name, err)
			return nil
		}
		cfg, err := d.composeYAML(name, data)
		if err != nil {
			d.c.failf(key, "%s: %v", name, err)
			return nil
		}
		details.ConfigFiles = append(details.ConfigFiles, types.ConfigFile{
			Filename: filepath.Join(d.files.dir, filepath.FromSlash(name)),
			// Config is what compose-go loads; Content, already read, keeps
			// it from reading the file from the host's disk anywhere.
			Config:  cfg,
			Content: data,
		})
	}
	missing := map[string]bool{}
	proj, err := loader.LoadWithContext(context.Background(), details, func(o *loader.Options) {
		o.SetProjectName(composeProjectName, true)
		o.SkipInclude, o.SkipExtends = true, true
		o.SkipResolveEnvironment, o.SkipResolveLabels = true, true
		o.Interpolate.LookupValue = func(name string) (string, bool) {
			missing[name] = true
			return "", false
		}
		// compose-go logs an unset variable through logrus's global
		// logger; here it is a warning of the environment's.
		o.Interpolate.Substitute = func(s string, m template.Mapping) (string, error) {
			return template.SubstituteWithOptions(s, m, template.WithoutLogging)
		}
	})
	for _, name := range slices.Sorted(maps.Keys(missing)) {
		d.warn("dockerComposeFile", false, "Compose variable ${%s} is empty: Airlock interpolates Compose files without the host's environment or the project's .env (a secret file that never enters a sandbox); give it a default in the file (${%s:-value}).", name, name)
	}
	if err != nil {
		d.c.failf("dockerComposeFile", "%s: %v", strings.Join(files, ", "), err)
		return nil
	}
	if len(proj.Services) > maxServices {
		d.c.failf("dockerComposeFile", "%d services; Airlock runs at most %d", len(proj.Services), maxServices)
		return nil
	}
	return proj
}

// portRange matches a range of ports in a port's short syntax.
var portRange = regexp.MustCompile(`(\d+)-(\d+)`)

// composeYAML decodes one Compose file (its first YAML document) and
// refuses what Airlock does not read: a file larger than Compose expands
// safely, include and extends (named in warnings and dropped), more port
// entries than maxPorts.
func (d *dc) composeYAML(name string, data []byte) (map[string]any, error) {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	var more any
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		d.warn("dockerComposeFile", false, "%s: only its first YAML document is read.", name)
	}
	cfg, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("not a Compose file: want a mapping at the top")
	}
	delete(cfg, "version") // obsolete; Compose ignores it
	if _, ok := cfg["include"]; ok {
		d.warn("dockerComposeFile", false, "%s: \"include\" is not followed: Airlock reads only the Compose files devcontainer.json names.", name)
		delete(cfg, "include")
	}
	services, _ := cfg["services"].(map[string]any)
	if len(services) > maxServices {
		return nil, fmt.Errorf("%d services; Airlock runs at most %d", len(services), maxServices)
	}
	ports := 0
	for _, sn := range slices.Sorted(maps.Keys(services)) {
		svc, _ := services[sn].(map[string]any)
		if _, ok := svc["extends"]; ok {
			d.warn("compose services."+sn+".extends", false, "%s: service %q: \"extends\" is not followed: Airlock reads each service as its file writes it.", name, sn)
			delete(svc, "extends")
		}
		for _, k := range []string{"ports", "expose"} {
			list, _ := svc[k].([]any)
			for _, p := range list {
				ports += portCount(p)
			}
		}
	}
	if ports > maxPorts {
		return nil, fmt.Errorf("its services publish %d ports; Airlock takes at most %d", ports, maxPorts)
	}
	return cfg, nil
}

// portCount is how many ports one ports or expose entry stands for once
// Compose expands its ranges.
func portCount(p any) int {
	s, ok := p.(string)
	if !ok {
		return 1
	}
	n := 1
	for _, m := range portRange.FindAllStringSubmatch(s, -1) {
		lo, err1 := strconv.Atoi(m[1])
		hi, err2 := strconv.Atoi(m[2])
		if err1 != nil || err2 != nil || hi < lo {
			continue
		}
		n = max(n, hi-lo+1)
	}
	return n
}

// devService makes the dev service the environment: its build or image,
// its variables, its user, its mounts; whatever else it asks for is
// named.
func (d *dc) devService(svc types.ServiceConfig, cs *Compose) {
	key := "compose services." + svc.Name
	switch {
	case svc.Build != nil:
		d.env.Build = d.composeBuild(key, svc.Build)
	case svc.Image != "":
		d.env.Image = svc.Image
		d.c.image(key+".image", svc.Image)
	default:
		d.c.failf(key, "has neither image nor build")
	}
	d.env.Env = d.serviceEnv(key, svc, true)
	if svc.User != "" && userName.MatchString(svc.User) {
		d.env.User = svc.User
	}
	for i, v := range svc.Volumes {
		k := fmt.Sprintf("%s.volumes[%d]", key, i)
		switch vol, kind := d.volume(k, v, true); kind {
		case ArgNotNeeded:
			d.warn(k, true, "dev service %q: the bind of %s on %s is not needed: the project is copied into the sandbox, at workspaceFolder.", svc.Name, vol.Source, v.Target)
		case ArgVolume:
			cs.DevVolumes = append(cs.DevVolumes, vol)
		}
	}
	if len(svc.Ports) > 0 {
		d.warn(key+".ports", true, "dev service %q: its ports are the VM's own; nothing reaches into a sandbox from outside.", svc.Name)
	}
	for _, k := range []string{"cap_add", "security_opt", "privileged", "init"} {
		if d.serviceHas(svc, k) {
			d.warn(key+"."+k, true, "dev service %q: %q is not needed: a sandbox is a VM, which has what a container asks for this.", svc.Name, k)
		}
	}
	if svc.NetworkMode != "" {
		d.warn(key+".network_mode", true, "dev service %q: network_mode %q is met: the services' ports are on the VM's localhost and their names resolve to it.", svc.Name, svc.NetworkMode)
	}
	if len(svc.Entrypoint) > 0 {
		d.warn(key+".entrypoint", false, "dev service %q: its entrypoint is not run: the agent's command runs in the VM.", svc.Name)
	}
}

// coversProject says a bind of source (project-relative, or ".." for
// what leaves it) on target is the dev container's usual mount of the
// project: the project or a folder above it, on a folder that holds
// workspaceFolder.
func (d *dc) coversProject(source, target string) bool {
	ws := d.str("workspaceFolder")
	if ws == "" {
		ws = DefaultWorkspace
	}
	under := ws == target || strings.HasPrefix(ws, strings.TrimSuffix(target, "/")+"/")
	return under && (source == "." || strings.Trim(strings.ReplaceAll(source, "..", ""), "/") == "")
}

// serviceHas says the service sets key (for keys compose-go keeps as
// zero values).
func (d *dc) serviceHas(svc types.ServiceConfig, key string) bool {
	switch key {
	case "cap_add":
		return len(svc.CapAdd) > 0
	case "security_opt":
		return len(svc.SecurityOpt) > 0
	case "privileged":
		return svc.Privileged
	case "init":
		return svc.Init != nil
	}
	return false
}

// carried are the service keys a Service carries, or the runtime does
// not need (the VM is one network; it stops with its services).
var carried = map[string]bool{
	"image": true, "build": true, "command": true, "entrypoint": true, "user": true, "working_dir": true,
	"environment": true, "env_file": true, "ports": true, "depends_on": true, "healthcheck": true,
	"volumes": true, "privileged": true, "cap_add": true, "platform": true,
	"restart": true, "container_name": true, "labels": true, "networks": true, "hostname": true,
	"expose": true, "logging": true, "stop_grace_period": true, "stop_signal": true, "init": true,
	"security_opt": true, "tty": true, "stdin_open": true, "profiles": true, "network_mode": true,
}

// service is a service to run beside the agent, as the runtime needs it.
func (d *dc) service(svc types.ServiceConfig, dev string) Service {
	key := "compose services." + svc.Name
	s := Service{
		Name: svc.Name, Image: svc.Image,
		Command: slices.Clone(svc.Command), Entrypoint: slices.Clone(svc.Entrypoint),
		User: svc.User, WorkingDir: svc.WorkingDir,
		Privileged: svc.Privileged, CapAdd: slices.Clone(svc.CapAdd), Platform: svc.Platform,
	}
	d.c.text(key+".name", svc.Name)
	switch {
	case svc.Build != nil:
		s.Build = d.composeBuild(key, svc.Build)
	case svc.Image != "":
		d.c.image(key+".image", svc.Image)
	default:
		d.c.failf(key, "has neither image nor build")
	}
	s.Environment = d.serviceEnv(key, svc, false)
	for _, p := range svc.Ports {
		s.Ports = append(s.Ports, Port{Target: p.Target, Published: p.Published, HostIP: p.HostIP, Protocol: p.Protocol})
	}
	for _, dep := range slices.Sorted(maps.Keys(svc.DependsOn)) {
		if dep != dev {
			s.DependsOn = append(s.DependsOn, Dependency{Service: dep, Condition: svc.DependsOn[dep].Condition})
		}
	}
	if h := svc.HealthCheck; h != nil {
		s.Healthcheck = &Healthcheck{Test: slices.Clone(h.Test), Interval: dur(h.Interval), Timeout: dur(h.Timeout),
			StartPeriod: dur(h.StartPeriod), Disable: h.Disable}
		if h.Retries != nil {
			s.Healthcheck.Retries = *h.Retries
		}
	}
	for i, v := range svc.Volumes {
		switch vol, kind := d.volume(fmt.Sprintf("%s.volumes[%d]", key, i), v, false); kind {
		case ArgVolume:
			s.Volumes = append(s.Volumes, vol)
		case ArgDocker:
			s.DockerSocket = vol.Target
		}
	}
	if m := svc.NetworkMode; m != "" && m != "host" && m != "service:"+dev && !strings.HasPrefix(m, "container:") {
		d.warn(key+".network_mode", false, "service %q: network_mode %q is not applied: every service is on the VM's one network.", svc.Name, m)
	}
	for _, c := range []string{svc.Image, svc.User, svc.WorkingDir, svc.Platform} {
		d.c.text(key, c)
	}
	for _, a := range append(slices.Clone(s.Command), s.Entrypoint...) {
		d.c.text(key+".command", a)
	}
	return s
}

func dur(d *types.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return time.Duration(*d)
}

// composeBuild is a service's build: its context (made absolute by
// compose-go against the first file's folder) and its dockerfile,
// relative to the context, both inside the project.
func (d *dc) composeBuild(key string, b *types.BuildConfig) *Build {
	ctx, ok := d.relative(b.Context)
	if !ok {
		d.c.failf(key+".build.context", "%q leaves the project; Airlock builds only from inside the project", b.Context)
		return nil
	}
	args := map[string]string{}
	for name, v := range b.Args {
		if v == nil {
			d.warn(key+".build.args."+name, false, "%s: build argument %s takes its value from the host's environment, which never enters a sandbox: it is left unset.", key, name)
			continue
		}
		args[name] = *v
	}
	if len(args) == 0 {
		args = nil
	}
	return d.c.buildFrom(key+".build.", d.files, ctx, b.Dockerfile, b.DockerfileInline, ".", args, b.Target)
}

// relative makes a path compose-go resolved (absolute, on the host's
// side of the project's path) project-relative; ok is false when it
// leaves the project.
func (d *dc) relative(p string) (string, bool) {
	if !filepath.IsAbs(p) {
		return inProject(".", filepath.ToSlash(p))
	}
	rel, err := filepath.Rel(d.files.dir, p)
	if err != nil {
		return "", false
	}
	return inProject(".", filepath.ToSlash(rel))
}

// volume is one of a service's mounts as the runtime makes it (kind
// ArgVolume: a bind inside the project, a volume, a tmpfs). A bind of the
// Docker socket asks for Docker inside the VM (ArgDocker); the dev
// service's bind of the project or a folder above it is its usual mount
// of the project (ArgNotNeeded, with the path relative to the project);
// any other bind that leaves the project is named and not made
// (ArgIgnored).
func (d *dc) volume(key string, v types.ServiceVolumeConfig, dev bool) (Volume, ArgKind) {
	vol := Volume{Type: v.Type, Target: v.Target, ReadOnly: v.ReadOnly}
	d.c.text(key, v.Source)
	d.c.text(key, v.Target)
	switch v.Type {
	case "bind":
		if isDockerSocket(v.Source) {
			d.env.Docker = true
			d.warn(key, true, "%s: the host's Docker is never shared with a sandbox; Docker runs inside the VM instead.", key)
			return vol, ArgDocker
		}
		rel, ok := d.relative(v.Source)
		if dev && (!ok || rel == ".") && d.coversProject(d.relOutside(v.Source), v.Target) {
			vol.Source = d.relOutside(v.Source)
			return vol, ArgNotNeeded
		}
		if !ok {
			d.warn(key, false, "%s: %s is outside the project and is not mounted: nothing of the host is mounted into a sandbox.", key, v.Source)
			return vol, ArgIgnored
		}
		vol.Source = rel
	case "volume", "tmpfs":
		vol.Source = v.Source
	default:
		d.warn(key, false, "%s: a %s mount is not made.", key, v.Type)
		return vol, ArgIgnored
	}
	return vol, ArgVolume
}

// relOutside is p relative to the project, even when that leaves it
// ("..", "../.."), for naming; an unrelated path stays as it is.
func (d *dc) relOutside(p string) string {
	rel, err := filepath.Rel(d.files.dir, p)
	if err != nil || !filepath.IsAbs(p) {
		return p
	}
	rel = filepath.ToSlash(rel)
	if strings.Trim(strings.ReplaceAll(rel, "..", ""), "/") == "" {
		return rel
	}
	return p
}

// serviceEnv is a service's variables: its env_file entries, read from
// the project (never a .env file: those are secrets that never enter a
// sandbox), then its environment over them. A variable without a value
// takes it from the host in Compose; here it is unset, and named.
func (d *dc) serviceEnv(key string, svc types.ServiceConfig, dev bool) map[string]string {
	env := map[string]string{}
	for i, f := range svc.EnvFiles {
		k := fmt.Sprintf("%s.env_file[%d]", key, i)
		rel, ok := d.relative(f.Path)
		switch {
		case !ok:
			d.warn(k, false, "%s: %s is outside the project and is not read.", key, f.Path)
			continue
		case isSecretEnvFile(rel):
			d.warn(k, false, "%s: %s is not read: .env files are secrets, which never enter a sandbox.", key, rel)
			continue
		}
		data, err := d.files.read(rel)
		if err != nil {
			if bool(f.Required) {
				d.warn(k, false, "%s: %s cannot be read inside the project: %v.", key, rel, err)
			}
			continue
		}
		vars, err := dotenv.ParseWithLookup(strings.NewReader(string(data)), func(string) (string, bool) { return "", false })
		if err != nil {
			d.c.failf(k, "%s: %v", rel, err)
			continue
		}
		maps.Copy(env, vars)
	}
	for _, name := range slices.Sorted(maps.Keys(svc.Environment)) {
		v := svc.Environment[name]
		if v == nil {
			d.warn(key+".environment."+name, false, "%s: %s takes its value from the host's environment, which never enters a sandbox: it is left unset.", key, name)
			continue
		}
		env[name] = *v
	}
	for _, name := range slices.Sorted(maps.Keys(env)) {
		// A container takes any name without '=' (opensearch reads
		// discovery.type); the shell's grammar is for the dev service,
		// whose variables are the sandbox's.
		if name == "" || strings.ContainsAny(name, "=\x00") {
			d.c.failf(key+".environment."+name, "%q is not a variable name", name)
		} else if dev && !envName.MatchString(name) {
			d.warn(key+".environment."+name, false, "%s: %s is not set in the sandbox: it is not a variable name a shell can use.", key, name)
			delete(env, name)
			continue
		}
		d.c.text(key+".environment."+name, env[name])
	}
	if len(env) == 0 {
		return nil
	}
	return env
}

// isSecretEnvFile is sync/manifest's rule for environment files: .env
// and .env.* but the templates (.env.example, .env.sample, .env.template,
// .env.dist). Such a file never enters a sandbox, so its variables do
// not either.
func isSecretEnvFile(rel string) bool {
	name := strings.ToLower(path.Base(rel))
	switch name {
	case ".env.example", ".env.sample", ".env.template", ".env.dist":
		return false
	}
	return name == ".env" || strings.HasPrefix(name, ".env.")
}
