package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/envspec"
	"github.com/airlock-dev/airlock/vm/image"
)

// serviceBuildProject is a project of the Compose form whose web service
// is built from a Dockerfile of its own, in a context with a secret.
var serviceBuildProject = map[string]string{
	".devcontainer/devcontainer.json": `{"dockerComposeFile": "compose.yaml", "service": "dev"}`,
	".devcontainer/compose.yaml": "services:\n  dev: {image: debian:12}\n" +
		"  web: {image: nginx:1, build: {context: ../web, dockerfile: Dockerfile.web, args: {V: '2'}}}\n  db: {image: postgres:16}\n",
	"web/Dockerfile.web": "ARG V\nFROM ghcr.io/acme/base:${V}\nCOPY index.html /www/\n",
	"web/index.html":     "hello\n",
	"web/.env":           "TOKEN=secret\n",
}

func writeProject(t *testing.T, files map[string]string) string {
	t.Helper()
	proj := t.TempDir()
	for name, data := range files {
		p := filepath.Join(proj, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, data)
	}
	return proj
}

// readBuilds reads proj's environment and its services' builds.
func readBuilds(t *testing.T, src *Source, proj string) (*envspec.Environment, []serviceBuild) {
	t.Helper()
	spec, err := envspec.Find(proj)
	if err != nil {
		t.Fatal(err)
	}
	builds, err := src.readServiceBuilds(context.Background(), proj, spec)
	if err != nil {
		t.Fatal(err)
	}
	return spec, builds
}

// TestServiceBuilds: a Compose service's own build is read as the
// Dockerfile form's is: its context without the secret (named in a
// note), its Dockerfile checked; the environment's key changes with the
// Dockerfile and with any file of the context; its FROM registry is
// allowed read-only.
func TestServiceBuilds(t *testing.T) {
	src, notes := testSource(t)
	proj := writeProject(t, serviceBuildProject)
	spec, builds := readBuilds(t, src, proj)
	if len(builds) != 1 || builds[0].service != "web" || builds[0].b.Dockerfile != "web/Dockerfile.web" {
		t.Fatalf("builds %+v, want web's", builds)
	}
	var paths []string
	for _, e := range builds[0].m.Entries {
		paths = append(paths, e.Path)
	}
	if !slices.Contains(paths, "index.html") || slices.Contains(paths, ".env") {
		t.Errorf("the context holds %q: want index.html and never .env", paths)
	}
	if len(*notes) != 1 || !strings.Contains((*notes)[0], "web leaves out 1 file Airlock treats as secrets (.env)") {
		t.Errorf("notes %q: want the secret named", *notes)
	}
	if got := composeAllow(spec.Compose); !slices.Equal(got, []string{"@docker", "@ghcr"}) {
		t.Errorf("allow %q: want postgres's registry and the Dockerfile's FROM registry", got)
	}
	if got := ServiceImages(spec.Compose); !slices.Equal(got, []string{"postgres:16"}) {
		t.Errorf("images pulled %q: a built service's image is never pulled", got)
	}
	const base = "environment key"
	key := serviceBuildsKey(base, builds)
	if key == base || serviceBuildsKey(base, nil) != base {
		t.Error("the key does not hold the builds, or an environment without builds has a new key")
	}
	writeFile(t, filepath.Join(proj, "web/index.html"), "changed\n")
	_, builds = readBuilds(t, src, proj)
	k2 := serviceBuildsKey(base, builds)
	if k2 == key {
		t.Error("a changed file of the context keeps the key")
	}
	writeFile(t, filepath.Join(proj, "web/.env"), "TOKEN=other\n")
	if _, builds = readBuilds(t, src, proj); serviceBuildsKey(base, builds) != k2 {
		t.Error("a secret, which never enters the build, changes the key")
	}
	writeFile(t, filepath.Join(proj, "web/Dockerfile.web"), "FROM ghcr.io/acme/base:2\nRUN true\n")
	if _, builds = readBuilds(t, src, proj); serviceBuildsKey(base, builds) == k2 {
		t.Error("a changed Dockerfile keeps the key")
	}
	// A Dockerfile changed after envspec read it is refused.
	spec, _ = readBuilds(t, src, proj)
	writeFile(t, filepath.Join(proj, "web/Dockerfile.web"), "FROM ghcr.io/acme/base:3\n")
	if _, err := src.readServiceBuilds(context.Background(), proj, spec); err == nil || !strings.Contains(err.Error(), "changed while the environment was read") {
		t.Errorf("a Dockerfile changed since it was read: %v", err)
	}
}

// TestServiceBuildInput: the step's input holds each build's context
// under its number and its Dockerfile beside it, and nothing else: a
// link out of the context is sent as the link, never what it points at.
func TestServiceBuildInput(t *testing.T) {
	src, _ := testSource(t)
	proj := writeProject(t, serviceBuildProject)
	if err := os.Symlink("../../../etc/passwd", filepath.Join(proj, "web/passwd")); err != nil {
		t.Fatal(err)
	}
	_, builds := readBuilds(t, src, proj)
	var buf bytes.Buffer
	if err := writeServiceBuilds(context.Background(), &buf, builds); err != nil {
		t.Fatal(err)
	}
	got, headers, files := untar(t, &buf)
	if h := headers["0/context/passwd"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "../../../etc/passwd" || h.Size != 0 {
		t.Errorf("the link out of the context is sent as %+v", h)
	}
	want := []string{"0/", "0/context/", "0/context/Dockerfile.web", "0/context/index.html", "0/context/passwd", "0/Dockerfile"}
	if !slices.Equal(got, want) {
		t.Errorf("the input holds %q, want %q", got, want)
	}
	if files["0/Dockerfile"] != serviceBuildProject["web/Dockerfile.web"] || files["0/context/index.html"] != "hello\n" {
		t.Errorf("the files sent: %q", files)
	}
}

// TestServiceBuildConfirmed: a Compose service built from a Dockerfile
// is confirmed before anything is pulled or built: the prompt names the
// service, its Dockerfile with its SHA-256, the image its FROM starts
// from and that image's registry.
func TestServiceBuildConfirmed(t *testing.T) {
	src, _ := testSource(t)
	proj := writeProject(t, serviceBuildProject)
	_, err := src.Environment(context.Background(), EnvironmentRequest{Project: proj})
	var untrusted *UntrustedEnvironmentError
	if !errors.As(err, &untrusted) {
		t.Fatalf("Environment: %v, want it to ask for a confirmation", err)
	}
	for _, want := range []string{"Compose services (started in the VM before every command): db, web",
		"service web: Dockerfile: web/Dockerfile.web, built from the context web, by Docker in a builder VM, once, when the environment is built",
		"Dockerfile SHA-256: " + untrusted.Env.Compose.Services[1].Build.Sum, "FROM ghcr.io/acme/base:2 (line 2",
		"registry: ghcr.io (@ghcr, read-only)", "service image: postgres:16"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the prompt lacks %q:\n%s", want, err)
		}
	}
	if strings.Contains(err.Error(), "nginx:1") {
		t.Errorf("the prompt names the image the project would tag the build with, which is never pulled:\n%s", err)
	}
	if ims, _ := image.List(src.Home); len(ims) != 1 {
		t.Errorf("images before a confirmation: %d, want the minimal image only", len(ims))
	}
}

// TestServiceBuildInline: a service whose Compose file holds its
// Dockerfile (dockerfile_inline) is built from that text: it is what the
// step sends as the build's Dockerfile, the key changes with it, and the
// prompt names where it is and its SHA-256.
func TestServiceBuildInline(t *testing.T) {
	src, _ := testSource(t)
	files := map[string]string{
		".devcontainer/devcontainer.json": `{"dockerComposeFile": "compose.yaml", "service": "dev"}`,
		".devcontainer/compose.yaml": "services:\n  dev: {image: debian:12}\n" +
			"  web:\n    build:\n      context: ../web\n      dockerfile_inline: |\n        FROM ghcr.io/acme/base:2\n        COPY index.html /www/\n",
		"web/index.html": "hello\n",
	}
	proj := writeProject(t, files)
	_, builds := readBuilds(t, src, proj)
	if len(builds) != 1 || builds[0].b.Inline == "" {
		t.Fatalf("builds %+v, want web's inline one", builds)
	}
	var buf bytes.Buffer
	if err := writeServiceBuilds(context.Background(), &buf, builds); err != nil {
		t.Fatal(err)
	}
	_, _, sent := untar(t, &buf)
	if want := "FROM ghcr.io/acme/base:2\nCOPY index.html /www/\n"; sent["0/Dockerfile"] != want {
		t.Errorf("the Dockerfile sent: %q, want %q", sent["0/Dockerfile"], want)
	}
	key := serviceBuildsKey("k", builds)
	files[".devcontainer/compose.yaml"] = strings.Replace(files[".devcontainer/compose.yaml"], "base:2", "base:3", 1)
	proj2 := writeProject(t, files)
	if _, b2 := readBuilds(t, src, proj2); serviceBuildsKey("k", b2) == key {
		t.Error("a changed dockerfile_inline keeps the key")
	}
	_, err := src.Environment(context.Background(), EnvironmentRequest{Project: proj})
	var ue *UntrustedEnvironmentError
	if !errors.As(err, &ue) {
		t.Fatalf("an unconfirmed environment: %v", err)
	}
	for _, want := range []string{"compose services.web.build.dockerfile_inline", builds[0].b.Sum, "ghcr.io/acme/base:2"} {
		if !strings.Contains(ue.Error(), want) {
			t.Errorf("the prompt does not name %q:\n%s", want, ue.Error())
		}
	}
}

// untar reads a tar's names in order, their headers and their contents.
func untar(t *testing.T, r io.Reader) (names []string, headers map[string]*tar.Header, files map[string]string) {
	t.Helper()
	headers, files = map[string]*tar.Header{}, map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names, headers, files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		names, headers[h.Name], files[h.Name] = append(names, h.Name), h, string(data)
	}
}
