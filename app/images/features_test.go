package images

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/envspec"
	"github.com/airlock-dev/airlock/app/feature"
	"github.com/airlock-dev/airlock/vm/image"
	"github.com/airlock-dev/airlock/vm/oci"
)

func artifact(t *testing.T, ref, meta string) *feature.Artifact {
	t.Helper()
	m, err := feature.ParseMetadata([]byte(meta))
	if err != nil {
		t.Fatal(err)
	}
	return &feature.Artifact{Ref: ref, Digest: "sha256:" + strings.Repeat("a", 64), Meta: *m,
		Files: []feature.File{{Name: "install.sh", Exec: true, Data: []byte("#!/bin/sh\n")}}}
}

func TestPlanFeatures(t *testing.T) {
	goRef, helloRef := "ghcr.io/devcontainers/features/go:1", "127.0.0.1:5000/features/hello:1"
	spec := &envspec.Environment{Env: map[string]string{"GOPATH": "/mine"}, Features: []envspec.Feature{
		{ID: goRef, Ref: goRef, Supported: true, Options: map[string]string{"version": "1.24"}},
		{ID: helloRef, Ref: helloRef, Supported: true, Options: map[string]string{"greeting": "$(reboot)"}},
	}}
	base := &image.Image{}
	base.Meta.OCI = &image.OCIMeta{Image: oci.Image{Config: oci.Config{Env: []string{"PATH=/usr/bin:/bin"}}}}
	arts := []*feature.Artifact{
		artifact(t, goRef, `{"id": "go", "options": {"version": {"type": "string", "default": "latest"}},
			"containerEnv": {"GOPATH": "/go", "PATH": "/usr/local/go/bin:/go/bin:${PATH}"}}`),
		artifact(t, helloRef, `{"id": "hello", "options": {"greeting": {"type": "string", "default": "hi"}},
			"containerEnv": {"PATH": "/opt/hello:${PATH}"}}`),
	}
	p, err := planFeatures(arts, spec, base, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 2 || p.Steps[0].Shell != featureInstall || len(p.Steps[0].Stdin) == 0 {
		t.Fatalf("steps: %+v", p.Steps)
	}
	if diff := cmp.Diff(map[string]string{"VERSION": "1.24", "_REMOTE_USER": "root", "_CONTAINER_USER": "root"}, p.Steps[0].Env); diff != "" {
		t.Errorf("the first install's variables (-want +got):\n%s", diff)
	}
	// The second install sees the first's containerEnv; its option is a
	// value, and the step's text is Airlock's own.
	want := map[string]string{"GREETING": "$(reboot)", "_REMOTE_USER": "root", "_CONTAINER_USER": "root",
		"GOPATH": "/go", "PATH": "/usr/local/go/bin:/go/bin:/usr/bin:/bin"}
	if diff := cmp.Diff(want, p.Steps[1].Env); diff != "" {
		t.Errorf("the second install's variables (-want +got):\n%s", diff)
	}
	if strings.Contains(p.Steps[1].Shell, "reboot") {
		t.Errorf("an option reached the step's shell text: %s", p.Steps[1].Shell)
	}
	if diff := cmp.Diff(map[string]string{"GOPATH": "/go", "PATH": "/opt/hello:/usr/local/go/bin:/go/bin:/usr/bin:/bin"}, p.Env); diff != "" {
		t.Errorf("containerEnv (-want +got):\n%s", diff)
	}
	// The description's own variables win over the features'.
	if got := withFeatureEnv(spec, p.Env).Env; got["GOPATH"] != "/mine" || got["PATH"] != p.Env["PATH"] || spec.Env["PATH"] != "" {
		t.Errorf("withFeatureEnv: %v (spec %v)", got, spec.Env)
	}
	// @debian and go's known hosts; none for the loopback feature.
	if p.Hosts[0] != "@debian" || !strings.Contains(strings.Join(p.Hosts, " "), "dl.google.com") {
		t.Errorf("hosts: %v", p.Hosts)
	}
	k := featureKey("k", p.Digests)
	arts[1].Digest = "sha256:" + strings.Repeat("b", 64)
	p2, _ := planFeatures(arts, spec, base, "")
	if k == featureKey("k", p2.Digests) || featureKey("k", nil) != "k" {
		t.Error("a feature's new digest does not change the environment's key")
	}
}

func TestStepEnvKeepsTheProxy(t *testing.T) {
	net := map[string]string{"HTTPS_PROXY": "http://127.0.0.1:3128"}
	env := stepEnv(nil, net, nil)
	got := withStepEnv(env, net, map[string]string{"HTTPS_PROXY": "http://evil", "VERSION": "1"})
	if got["HTTPS_PROXY"] != "http://127.0.0.1:3128" || got["VERSION"] != "1" || env["VERSION"] != "" {
		t.Errorf("withStepEnv: %v", got)
	}
}

func TestPromptNamesFeatures(t *testing.T) {
	e := &UntrustedEnvironmentError{Project: "/p", Env: &envspec.Environment{Source: ".devcontainer/devcontainer.json", Image: "debian", Features: []envspec.Feature{
		{ID: "ghcr.io/devcontainers/features/node:1", Ref: "ghcr.io/devcontainers/features/node:1", Name: "node", Supported: true},
		{ID: "ghcr.io/rails/devcontainer/features/postgres-client:1", Ref: "ghcr.io/rails/devcontainer/features/postgres-client:1", Name: "postgres-client", Supported: true},
		{ID: "ghcr.io/devcontainers/features/docker-in-docker:2", Ref: "ghcr.io/devcontainers/features/docker-in-docker:2", Name: "docker-in-docker", Supported: true},
	}, Hosts: []string{"apt.postgresql.org"}}}
	msg := e.Error()
	for _, want := range []string{
		"feature: ghcr.io/devcontainers/features/node:1 (its install.sh run as root in the builder VM; it may reach @debian, raw.githubusercontent.com, nodejs.org",
		"feature: ghcr.io/rails/devcontainer/features/postgres-client:1 (its install.sh run as root in the builder VM; it may reach @debian and the hosts below)",
		"hosts: apt.postgresql.org",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "feature: ghcr.io/devcontainers/features/docker-in-docker") {
		t.Errorf("the Docker feature is named as installed by its script:\n%s", msg)
	}
}
