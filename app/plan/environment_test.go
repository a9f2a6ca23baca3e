package plan

import (
	"archive/tar"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/testkit/ocitest"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
	"github.com/airlock-dev/airlock/vm/oci"
)

// fakeMinimal puts a minimal image of made-up files into h: images made
// from OCI images take its kernel and initramfs (nothing boots here).
func fakeMinimal(t *testing.T, h string) *image.Image {
	t.Helper()
	return testenv.FakeImage(t, h, image.DefaultName, vm.AMD64, nil)
}

// TestAgentOnTheProjectsOwnImage plans an agent preset in a project whose
// environment names an image of its own: the run boots that image with
// the agent image's top layer stacked on it (images.Source.Environment,
// tested in app/images), with the environment's and the image's
// variables; a command run boots the environment's image as it is.
func TestAgentOnTheProjectsOwnImage(t *testing.T) {
	pl, notes := testPlanner(t, "")
	boot := fakeMinimal(t, pl.Home)
	os.RemoveAll(image.Dir(pl.Home, images.AgentsImage, vm.AMD64)) // pulled below
	reg := ocitest.NewRegistry(t)
	st := oci.Store{Dir: home.Layout{Root: pl.Home}.OCI()}
	ctx := context.Background()

	// The agent image, as a pull would leave it: its top layer is the
	// agent layer.
	agentsRef := reg.Push(t, "airlock/agents:1", ocitest.Image(t, "amd64", nil,
		ocitest.Layer(t, ocitest.Entry{Name: "etc/debian_version", Body: "12\n"}),
		ocitest.Layer(t, ocitest.Entry{Name: "opt/airlock/bin/", Type: tar.TypeDir}, ocitest.Entry{Name: "opt/airlock/bin/claude", Body: "cli", Mode: 0o755})))
	pulled, err := st.Pull(ctx, agentsRef, oci.PullOptions{Arch: vm.AMD64})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := image.FromOCI(ctx, pl.Home, image.OCIOptions{Name: images.AgentsImage, Boot: boot, Store: st, Image: pulled}); err != nil {
		t.Fatal(err)
	}

	glibc := reg.Push(t, "team/go:1", ocitest.Image(t, "amd64", []string{"PATH=/usr/local/go/bin:/usr/bin:/bin"},
		ocitest.Layer(t, ocitest.Entry{Name: "lib64/ld-linux-x86-64.so.2", Body: "ld"}, ocitest.Entry{Name: "usr/local/go/bin/go", Body: "go", Mode: 0o755})))
	proj := t.TempDir()
	writeFile(t, filepath.Join(proj, "airlock.toml"), "[environment]\nimage = \""+glibc+"\"\n[environment.env]\nPROJECT = \"yes\"\n")

	var progress []string
	p, err := pl.Run(ctx, Request{Project: proj, Agents: []string{"claude"}, Prompt: "x", TrustProject: true, Progress: func(s string) { progress = append(progress, s) }})
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, strings.Join(*notes, "\n"))
	}
	if all := strings.Join(progress, "\n"); !strings.Contains(all, "pulling "+glibc) || !strings.Contains(all, "adding the agent CLIs") {
		t.Errorf("the request's progress did not see the environment made:\n%s", all)
	}
	defer p.Close()
	o := p.Runs[0]
	if !strings.HasPrefix(o.Image, "envbase-") || !strings.HasSuffix(o.Image, "-agents") {
		t.Fatalf("the agent runs on %q, want the environment's image with the agent layer", o.Image)
	}
	if o.Env["PROJECT"] != "yes" || !strings.HasPrefix(o.Env["PATH"], "/usr/local/go/bin") {
		t.Errorf("env %v: want the environment's and the image's variables", o.Env)
	}
	// A command runs on the environment's image itself.
	p2, err := pl.Run(ctx, Request{Project: proj, Command: []string{"go", "test"}})
	if err != nil {
		t.Fatal(err)
	}
	p2.Close()
	if img := p2.Runs[0].Image; !strings.HasPrefix(img, "envbase-") || strings.HasSuffix(img, "-agents") {
		t.Errorf("a command runs on %q", img)
	}

}
