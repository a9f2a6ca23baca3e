package images

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/envspec"
)

// composeSpec is what envspec gives for a project's services: the
// values as read, a $ in them meant literally.
var composeSpec = &envspec.Compose{Files: []string{"compose.yaml"}, Service: "dev", Services: []envspec.Service{
	{
		Name: "db", Image: "postgres:16",
		Environment: map[string]string{"POSTGRES_PASSWORD": "pa$$word${NOT_A_VAR}"},
		Ports:       []envspec.Port{{Target: 5432, Published: "5432", HostIP: "127.0.0.1", Protocol: "tcp"}},
		Healthcheck: &envspec.Healthcheck{Test: []string{"CMD-SHELL", "pg_isready -U $USER"}, Interval: 2 * time.Second, Retries: 5},
		Volumes: []envspec.Volume{
			{Type: "volume", Source: "pg", Target: "/var/lib/postgresql/data"},
			{Type: "bind", Source: ".devcontainer/init", Target: "/docker-entrypoint-initdb.d", ReadOnly: true},
		},
	},
	{
		Name: "worker", Image: "ghcr.io/acme/worker:1", Command: []string{"sh", "-c", "echo $HOME"},
		DependsOn:    []envspec.Dependency{{Service: "db", Condition: "service_healthy"}, {Service: "cache"}},
		DockerSocket: "/var/run/docker.sock", Privileged: true, User: "1000:1000",
		Volumes: []envspec.Volume{{Type: "bind", Source: ".", Target: "/src"}, {Type: "tmpfs", Target: "/scratch"}},
	},
	{Name: "cache", Image: "redis:7"},
}}

// TestComposeFile: Airlock's Compose file, read back by Compose's own
// loader (compose-go, as `docker compose` reads it), gives what envspec
// validated: each $ literal (no interpolation of the project's values
// against the VM's environment), binds in the project's copy, the VM's
// own Docker socket, images never pulled.
func TestComposeFile(t *testing.T) {
	data, err := ComposeFile(composeSpec, "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	proj, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  "/somewhere/else",
		ConfigFiles: []types.ConfigFile{{Filename: "compose.json", Content: data}},
		Environment: types.Mapping{"NOT_A_VAR": "interpolated", "USER": "interpolated", "HOME": "interpolated"},
	}, func(o *loader.Options) { o.SetProjectName("airlock", true) })
	if err != nil {
		t.Fatalf("Compose cannot read Airlock's file: %v\n%s", err, data)
	}
	db, worker := proj.Services["db"], proj.Services["worker"]
	if got := *db.Environment["POSTGRES_PASSWORD"]; got != "pa$$word${NOT_A_VAR}" {
		t.Errorf("a value was interpolated: %q", got)
	}
	if got := db.HealthCheck.Test; !cmp.Equal([]string(got), []string{"CMD-SHELL", "pg_isready -U $USER"}) {
		t.Errorf("healthcheck %q", got)
	}
	if got := time.Duration(*db.HealthCheck.Interval); got != 2*time.Second || *db.HealthCheck.Retries != 5 {
		t.Errorf("healthcheck interval %s, retries %d", got, *db.HealthCheck.Retries)
	}
	if got := []string(worker.Command); !cmp.Equal(got, []string{"sh", "-c", "echo $HOME"}) {
		t.Errorf("command %q", got)
	}
	for _, s := range proj.Services {
		if s.PullPolicy != types.PullPolicyNever {
			t.Errorf("%s: pull_policy %q: the images are the environment's, never pulled at run time", s.Name, s.PullPolicy)
		}
	}
	binds := map[string]string{}
	for _, s := range []types.ServiceConfig{db, worker} {
		for _, v := range s.Volumes {
			binds[v.Target] = v.Type + " " + v.Source
			if v.Type == "bind" && v.Source != "/var/run/docker.sock" && (v.Bind == nil || !v.Bind.CreateHostPath) {
				t.Errorf("bind on %s: a missing source folder is not made, as Compose's short syntax does", v.Target)
			}
		}
	}
	want := map[string]string{
		"/var/lib/postgresql/data":    "volume pg",
		"/docker-entrypoint-initdb.d": "bind /workspace/.devcontainer/init",
		"/src":                        "bind /workspace",
		"/scratch":                    "tmpfs ",
		"/var/run/docker.sock":        "bind /var/run/docker.sock",
	}
	if diff := cmp.Diff(want, binds); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	if _, ok := proj.Volumes["pg"]; !ok {
		t.Errorf("the named volume is not declared: %v", proj.Volumes)
	}
	if got := worker.DependsOn["db"].Condition; got != "service_healthy" {
		t.Errorf("depends_on db: %q", got)
	}
	if got := worker.DependsOn["cache"].Condition; got != "service_started" {
		t.Errorf("depends_on cache: %q", got)
	}
	if !worker.Privileged || worker.User != "1000:1000" {
		t.Errorf("worker: privileged %v, user %q", worker.Privileged, worker.User)
	}
	if p := db.Ports[0]; p.Target != 5432 || p.Published != "5432" || p.HostIP != "127.0.0.1" {
		t.Errorf("port %+v", p)
	}
	if _, ok := proj.Services["dev"]; ok || len(proj.Services) != 3 {
		t.Errorf("services %v: want db, worker, cache and never the dev service", proj.ServiceNames())
	}
}

// TestComposeFileRefuses: a bind that leaves the project (envspec refuses
// those; this is the last check) makes no file.
func TestComposeFileRefuses(t *testing.T) {
	for _, src := range []string{"..", "../etc", "/etc", "a/../../b"} {
		cs := &envspec.Compose{Services: []envspec.Service{{Name: "x", Image: "busybox", Volumes: []envspec.Volume{{Type: "bind", Source: src, Target: "/t"}}}}}
		if _, err := ComposeFile(cs, "/workspace"); err == nil || !strings.Contains(err.Error(), "leaves the project") {
			t.Errorf("bind of %q: %v", src, err)
		}
	}
}

// TestComposeFileBuiltService: a service with a build of its own runs
// the image the environment's build made (Airlock's name for it, never
// the image name the project gave), with no build and no pull at run
// time.
func TestComposeFileBuiltService(t *testing.T) {
	cs := &envspec.Compose{Services: []envspec.Service{{Name: "web", Image: "nginx:1", Build: &envspec.Build{Dockerfile: "web/Dockerfile", Context: "web"}}}}
	data, err := ComposeFile(cs, "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	proj, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir: "/somewhere/else", ConfigFiles: []types.ConfigFile{{Filename: "compose.json", Content: data}},
	}, func(o *loader.Options) { o.SetProjectName("airlock", true) })
	if err != nil {
		t.Fatalf("Compose cannot read Airlock's file: %v\n%s", err, data)
	}
	web := proj.Services["web"]
	if web.Image != ServiceTag("web") || web.Build != nil || web.PullPolicy != types.PullPolicyNever {
		t.Errorf("web: image %q, build %+v, pull_policy %q; want %s, no build, never pulled", web.Image, web.Build, web.PullPolicy, ServiceTag("web"))
	}
	for _, svc := range []string{"web", "a.b_c-d", "Ünïcode", strings.Repeat("x", 200)} {
		if _, err := name.NewTag(ServiceTag(svc), name.StrictValidation); err != nil || !strings.HasPrefix(ServiceTag(svc), "airlock.invalid/") {
			t.Errorf("ServiceTag(%q) = %q: %v", svc, ServiceTag(svc), err)
		}
	}
}

// TestServiceRegistries: Docker Hub and ghcr.io are their presets, any
// other registry read-only by name; an address or a name that is not
// public is never allowed by a project's files.
func TestServiceRegistries(t *testing.T) {
	got := ServiceRegistries([]string{"postgres:16", "docker.io/library/redis:7", "ghcr.io/a/b:1", "quay.io/x/y@sha256:" + strings.Repeat("a", 64),
		"registry.example.com:5000/z", "registry:5000/z", "localhost:5000/z", "10.0.0.1:5000/z", "[::1]:5000/z", "db.local/z", "169.254.169.254/latest"})
	want := []ServiceRegistry{
		{Host: "registry-1.docker.io", Allow: "@docker"},
		{Host: "ghcr.io", Allow: "@ghcr"},
		{Host: "quay.io", Allow: "quay.io:443 (GET,HEAD)"},
		{Host: "registry.example.com:5000", Allow: "registry.example.com:5000 (GET,HEAD)"},
		{Host: "registry:5000", Why: "not a public name (an intranet host or localhost)"},
		{Host: "localhost:5000", Why: "not a public name (an intranet host or localhost)"},
		{Host: "10.0.0.1:5000", Why: "an address, not a registry's name"},
		{Host: "[::1]:5000", Why: "an address, not a registry's name"},
		{Host: "db.local", Why: "not a public name (an intranet host or localhost)"},
		{Host: "169.254.169.254", Why: "an address, not a registry's name"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ServiceRegistries (-want +got):\n%s", diff)
	}
	for _, r := range got {
		if r.Allow == "" {
			continue
		}
		rules, err := egress.ParseRules(r.Allow)
		if err != nil {
			t.Errorf("%s: %v", r.Allow, err)
		}
		for _, rule := range rules {
			if !cmp.Equal(rule.Methods, []string{"GET", "HEAD"}) {
				t.Errorf("%s: methods %v, want read-only", r.Allow, rule.Methods)
			}
		}
	}
}

// TestComposePrompt: the trust prompt names the services, their images
// and each registry, allowed or not.
func TestComposePrompt(t *testing.T) {
	cs := &envspec.Compose{Services: []envspec.Service{{Name: "web", Image: "nginx:1"}, {Name: "x", Image: "registry:5000/x"}}}
	e := &UntrustedEnvironmentError{Project: "/p", Env: &envspec.Environment{Source: ".devcontainer/devcontainer.json", Image: "debian:12", Docker: true, Compose: cs}}
	msg := e.Error()
	for _, want := range []string{"Compose services (started in the VM before every command): web, x", "service image: nginx:1",
		"service image: registry:5000/x", "registry: registry-1.docker.io (@docker, read-only)", "registry: registry:5000 is not allowed", "Docker inside the VM"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, msg)
		}
	}
}

// TestComposeImagesStep: the build pulls each image, builds each service
// with a build of its own from the step's input (with the proxy, its
// target and arguments), saves them all in the layer, and leaves no
// build input or daemon state behind.
func TestComposeImagesStep(t *testing.T) {
	s := composeImagesStep([]string{"busybox:1", "ghcr.io/a/b:1"}, nil)
	for _, want := range []string{"'/init' 'docker-start'", "'docker' 'pull' '-q' 'busybox:1'", "'docker' 'pull' '-q' 'ghcr.io/a/b:1'",
		"'docker' 'save' '-o' '" + ComposeImages + "' 'busybox:1' 'ghcr.io/a/b:1'", `kill "$pid"`, "rm -f /var/log/airlock-dockerd.log"} {
		if !strings.Contains(s.Shell, want) {
			t.Errorf("the step lacks %q:\n%s", want, s.Shell)
		}
	}
	if s.Input != nil || strings.Contains(s.Shell, "docker' 'build") {
		t.Errorf("a step without builds builds:\n%s", s.Shell)
	}
	builds := []serviceBuild{{service: "web", b: &envspec.Build{Dockerfile: "web/Dockerfile", Context: "web", Target: "prod", Args: map[string]string{"V": "1"}}}}
	s = composeImagesStep([]string{"busybox:1"}, builds)
	for _, want := range []string{"'tar' '-x' '--no-same-owner' '-C' '" + composeBuildDir + "' '-f' '-'",
		"DOCKER_BUILDKIT=1 'docker' 'build' '--network' 'host' '--progress' 'plain' '-f' '" + composeBuildDir + "/0/Dockerfile' '-t' '" + ServiceTag("web") +
			"' '--target' 'prod' '--build-arg' 'V=1' '--build-arg' 'HTTP_PROXY'",
		"'" + composeBuildDir + "/0/context'\n'rm' '-rf' '" + composeBuildDir + "'",
		"'docker' 'save' '-o' '" + ComposeImages + "' 'busybox:1' '" + ServiceTag("web") + "'"} {
		if !strings.Contains(s.Shell, want) {
			t.Errorf("the step lacks %q:\n%s", want, s.Shell)
		}
	}
	if s.Input == nil {
		t.Error("the step has no input: the build contexts are not sent")
	}
}
