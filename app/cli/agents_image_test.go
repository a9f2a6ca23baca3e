package cli

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/testkit/ocitest"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// TestAgentImagePulledOnFirstUse: an agent preset on a machine with
// neither the full nor the agent image pulls the published agent image
// (here from a registry on loopback, AIRLOCK_AGENTS_REPO) before the run,
// once; image push publishes it where the pull looks.
func TestAgentImagePulledOnFirstUse(t *testing.T) {
	testenv.SkipIfShort(t)
	minimal := testenv.Image(t, vm.AMD64)
	reg := ocitest.NewRegistry(t)
	repo := reg.Host + "/airlock/agents"
	t.Setenv("AIRLOCK_AGENTS_REPO", repo)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("ANTHROPIC_API_KEY", "sk-test")

	// A publisher pushes an image as the agent image.
	pub := t.TempDir()
	testenv.CopyMinimal(t, minimal, pub)
	src := reg.Push(t, "stand-in:1", ocitest.Image(t, "amd64", []string{"PATH=/bin"}, busyboxLayers(t)...))
	if code, out, errOut := airlockCLI(t, pub, "image", "pull", "--arch", "amd64", "--name", "agents", src); code != 0 {
		t.Fatalf("pull: %d %s%s", code, out, errOut)
	}
	code, out, errOut := airlockCLI(t, pub, "image", "push", "--arch", "amd64", "agents")
	if code != 0 || !strings.Contains(out, "pushed agents as "+images.AgentsRef(repo, vm.AMD64)) {
		t.Fatalf("image push agents: exit %d\n%s%s", code, out, errOut)
	}

	home := t.TempDir()
	testenv.CopyMinimal(t, minimal, home)
	code, out, errOut = airlockCLI(t, home, "run", "--arch", "amd64", "--project", t.TempDir(), "--disk", "none", "--agent", "claude", "--prompt", "x")
	if !strings.Contains(errOut, "pulling "+images.AgentsRef(repo, vm.AMD64)) {
		t.Errorf("the agent image was not pulled on first use: exit %d\n%s%s", code, out, errOut)
	}
	im, err := image.Load(home, images.AgentsImage, vm.AMD64)
	if err != nil || im.Meta.OCI == nil || !strings.HasPrefix(im.Meta.OCI.Ref, repo) {
		t.Fatalf("the agent image in the new home: %v %+v", err, im)
	}
}
