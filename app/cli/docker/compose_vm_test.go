package docker

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlock-dev/airlock/app/cli"
	"github.com/airlock-dev/airlock/app/cli/clitest"
	"github.com/airlock-dev/airlock/testkit/fakevendor"
	"github.com/airlock-dev/airlock/testkit/ocitest"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// TestComposeServices runs a devcontainer.json of the Compose form: the
// dev service on a Debian image with Docker (the agent runs in the VM, on
// that image), and beside it a web service (busybox httpd serving a file
// of the project through a bind), a client service that fetches from it
// by its service name into the project's copy and, privileged, asks for
// the host's / and the Docker socket, and a one-shot test service that
// must complete, built from a Dockerfile of the project (FROM the test's
// busybox, a COPY of a file with the run's nonce, a RUN). The
// environment's build (airlock env build) pulls the services' images
// once through the proxy (Docker Hub, the test's registry under its
// name), builds the test service's image, and keeps them all in the
// environment's layer; a run starts the services before the command,
// building and pulling nothing, and the
// command and --verify reach the web service by name and by its
// published port on localhost. A service image of a registry that is not
// allowed (an intranet name) is named in the trust prompt and its pull
// refused by the proxy. Nothing reaches the host: the host's / was not
// mounted, a container bound on the VM's / writes the VM's, and the
// changeset is the workspace's file only.
func TestComposeServices(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	start := time.Now()
	lap := func(what string) {
		t.Logf("+%s %s", time.Since(start).Round(time.Second), what)
	}
	reg := ocitest.NewRegistry(t)
	dev := reg.Push(t, "library/debian:bookworm-docker", ocitest.Image(t, "amd64",
		[]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, ocitest.LayerFromFile(t, testenv.DebianEnv(t))))
	// The dev service's image is pulled into the shared test home under a
	// name of its reference, which holds the registry's port: the test's
	// own, removed at the end.
	t.Cleanup(func() {
		sum := sha256.Sum256([]byte(dev))
		os.RemoveAll(filepath.Join(home, "images", "envbase-"+hex.EncodeToString(sum[:])[:12]))
	})
	reg.Push(t, "airlock-test/bb:1", composeBusybox(t))
	hub := fakevendor.Start(t, fakevendor.Script{}, dockerHub{reg: reg.Host})
	// The builder reaches Docker Hub's name at the test's registry, and
	// Debian's mirror (Compose's package) as it is.
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if h, _, _ := net.SplitHostPort(addr); h == "registry-1.docker.io" {
			return hub.Dial(ctx, network, addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	opts := []cli.Option{clitest.UpstreamHook(hub), cli.WithBuildNetwork(dial, hub.RootCAs, "")}
	lap("images pushed")

	// A registry that is not allowed: named in the prompt, refused by
	// the proxy when the build pulls from it.
	bad := composeProject(t, dev, "registry:5000/airlock-test/bb:1", "")
	code, out, errOut := clitest.Run(t, home, opts, "run", "--arch", "amd64", "--project", bad, "--", "true")
	sum := sha256.Sum256([]byte(testServiceDockerfile))
	for _, want := range []string{"service image: registry:5000/airlock-test/bb:1", "registry: registry:5000 is not allowed", "Docker inside the VM",
		"service test: Dockerfile: testsvc/Dockerfile, built from the context testsvc", "Dockerfile SHA-256: " + hex.EncodeToString(sum[:]),
		"FROM airlock-test/bb:1 (line 1"} {
		if code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("the trust prompt lacks %q: exit %d\n%s%s", want, code, out, errOut)
		}
	}
	// The host's / is not the VM's: a bind of it is named, not made.
	if !strings.Contains(errOut, "/ is outside the project and is not mounted") {
		t.Errorf("the bind of the host's / is not named:\n%s", errOut)
	}
	code, out, errOut = clitest.Run(t, home, opts, "env", "build", "--arch", "amd64", "--trust-project", bad)
	if code == 0 || !strings.Contains(errOut, `"https://registry:5000/v2/": Forbidden`) || !strings.Contains(errOut, "the Compose services' images") {
		t.Errorf("a service image of a registry not allowed: exit %d, want the proxy's refusal in the build's step\n%s%s", code, out, errOut)
	}
	lap("the build refused a registry not allowed")

	nonce := make([]byte, 6)
	rand.Read(nonce)
	proj := composeProject(t, dev, "airlock-test/bb:1", hex.EncodeToString(nonce))
	before := treeOf(t, proj)
	escape := "/tmp/airlock-compose-escape-" + hex.EncodeToString(nonce)
	script := strings.Join([]string{
		"set -e",
		"id -un",
		"grep 'Compose services' /etc/hosts",
		"echo by-name: $(curl -fsS http://web:8080/index.html)",
		"echo by-port: $(curl -fsS http://localhost:8080/index.html)",
		"docker ps -a --format '{{.Names}} {{.Status}}' | sort",
		"docker logs airlock-client-1",
		"docker inspect -f '{{.Name}} created {{.Created}} started {{.State.StartedAt}} ended {{.State.FinishedAt}}' $(docker ps -aq)",
		"docker inspect -f '{{json .State.Health}}' airlock-web-1 | head -c 600; echo",
		"docker logs airlock-test-1",
		// / of the VM is the VM's: a container may bind it.
		"docker run --rm -v /:/vmroot airlock-test/bb:1 sh -c 'echo escaped > /vmroot" + escape + " && echo wrote-the-vm-root'",
		"cat " + escape,
		"docker image ls --format '{{.Repository}}:{{.Tag}}'",
	}, "\n")
	// The environment's build pulls the images, once.
	code, out, errOut = clitest.Run(t, home, opts, "env", "build", "--arch", "amd64", "--trust-project", proj)
	lap("environment built (the services' images pulled in the builder)")
	logTimes(t, errOut)
	if code != 0 {
		t.Fatalf("env build: exit %d\n%s%s", code, out, errOut)
	}
	built := out
	t.Cleanup(func() { removeEnvImage(t, home, built) })
	pulls := registryPulls(hub)
	if pulls == 0 {
		t.Errorf("the build pulled nothing from Docker Hub: %+v", hub.Requests())
	}
	t.Logf("  Docker Hub requests of the build: %d", pulls)

	// A run of it pulls nothing: the images are in its layer.
	verify := "curl -fsS http://web:8080/index.html | grep -q served-by-web && curl -fsS http://localhost:8080/index.html | grep -q served-by-web && echo verify-reached-web"
	code, out, errOut = clitest.Run(t, home, opts, "run", "--arch", "amd64", "--json", "--project", proj, "--verify", verify, "--", "sh", "-c", script)
	lap("run (services started, command, verify)")
	if code != 0 {
		t.Fatalf("compose run: exit %d\n%s%s", code, out, errOut)
	}
	if n := registryPulls(hub); n != pulls {
		t.Errorf("the run asked Docker Hub %d times: its environment's images should be there", n-pulls)
	}
	if strings.Contains(errOut, "building the environment") || strings.Contains(errOut, "docker' 'build") {
		t.Errorf("the run built its environment again:\n%s", errOut)
	}
	res := runResult(t, out)
	sb := openSandbox(t, home, res.Sandbox)
	transcript, err := os.ReadFile(filepath.Join(sb.Dir, "transcript.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dev\n", "by-name: served-by-web", "by-port: served-by-web",
		"airlock-web-1 Up", "(healthy)", "airlock-client-1 Up", "airlock-test-1 Exited (0)", "test-passed",
		"no-host-root", "vm-docker-socket", "privileged-mount", "wrote-the-vm-root", "escaped",
		// The test service ran the image built of the project's
		// Dockerfile, with this run's nonce: never a stale one.
		"built-" + hex.EncodeToString(nonce) + "\n", "airlock.invalid/compose:service-test"} {
		if !strings.Contains(string(transcript), want) {
			t.Errorf("the transcript lacks %q:\n%s", want, transcript)
		}
	}
	// Where the services' start went: each container's creation, start
	// and end.
	for _, l := range strings.Split(string(transcript), "\n") {
		if strings.Contains(l, " created ") {
			t.Logf("  container: %s", l)
		}
	}
	if res.Verify == nil || !res.Verify.Passed {
		t.Errorf("verify did not reach the web service: %+v\n%s", res.Verify, errOut)
	}
	// The services' files in the workspace are the changeset; nothing
	// else of the VM is.
	if res.Changes.Added != 1 || res.Changes.Modified+res.Changes.Deleted != 0 {
		t.Errorf("changes %+v, want the client's one file\n%s", res.Changes, errOut)
	}
	code, diff, _ := clitest.Run(t, home, nil, "diff", res.Sandbox)
	if code != 0 || !strings.Contains(diff, "out/from-client.txt") || !strings.Contains(diff, "+served-by-web") {
		t.Errorf("the diff is not the client's file: exit %d\n%s", code, diff)
	}
	if _, err := os.Stat(escape); !os.IsNotExist(err) {
		t.Errorf("a container's write on the VM's / reached the host's %s: %v", escape, err)
	}
	if after := treeOf(t, proj); after != before {
		t.Errorf("the project changed on the host:\n%s\nwas\n%s", after, before)
	}
	audit, err := sb.AuditRaw()
	if err != nil {
		t.Fatal(err)
	}
	servicesEvent(t, audit, "run")
	logDisk(t, sb.Dir)
}

// composeProject writes a project of the Compose form whose services run
// image; nonce (when set) makes its environment its own.
func composeProject(t *testing.T, dev, image, nonce string) string {
	t.Helper()
	proj := t.TempDir()
	dc := `{
  "dockerComposeFile": "compose.yaml",
  "service": "dev",
  "remoteUser": "dev",
  "containerEnv": {"RUN_NONCE": "` + nonce + `"},
  "postCreateCommand": "useradd --create-home --uid 1000 dev && mkdir -p /workspace && chown dev: /workspace",
  "forwardPorts": [8080]
}`
	compose := `services:
  dev:
    image: ` + dev + `
    command: sleep infinity
    volumes: ["..:/workspace:cached"]
  web:
    image: ` + image + `
    command: ["httpd", "-f", "-p", "80", "-h", "/www"]
    ports: ["8080:80"]
    volumes: ["../site:/www:ro"]
    healthcheck:
      test: ["CMD", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1/index.html"]
      interval: 1s
      retries: 60
  client:
    image: ` + image + `
    depends_on: {web: {condition: service_healthy}}
    privileged: true
    volumes: ["../out:/out", "/:/host", "/var/run/docker.sock:/var/run/docker.sock"]
    command: ["sh", "-c", "wget -q -O /out/from-client.txt http://web/index.html; if [ -e /host/etc ]; then echo host-root-mounted; else echo no-host-root; fi; [ -S /var/run/docker.sock ] && echo vm-docker-socket; mount -t tmpfs none /mnt && echo privileged-mount; exec sleep 3600"]
  test:
    image: airlock-test/never-pulled:1
    build: {context: ../testsvc}
    depends_on: {web: {condition: service_healthy}}
    command: ["sh", "-c", "wget -q -O - http://web/index.html | grep -q served-by-web && cat /built.txt && echo test-passed"]
`
	for name, body := range map[string]string{
		".devcontainer/devcontainer.json": dc, ".devcontainer/compose.yaml": compose, "site/index.html": "served-by-web\n",
		"testsvc/Dockerfile": testServiceDockerfile, "testsvc/nonce.txt": "built-" + nonce + "\n",
	} {
		p := filepath.Join(proj, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return proj
}

// testServiceDockerfile builds the test service: the test's busybox
// (Docker Hub's name, served by the test's registry), a file of the
// context with the run's nonce, and a RUN that needs no network.
const testServiceDockerfile = "FROM airlock-test/bb:1\nCOPY nonce.txt /nonce.txt\nRUN cat /nonce.txt > /built.txt\n"

// composeBusybox is busybox with what the services run.
func composeBusybox(t *testing.T) v1.Image {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("busybox-static (scripts/setup-debian installs it): %v", err)
	}
	entries := []ocitest.Entry{{Name: "bin/", Type: tar.TypeDir}, {Name: "bin/busybox", Mode: 0o755, Body: string(bb)},
		{Name: "mnt/", Type: tar.TypeDir}, {Name: "tmp/", Type: tar.TypeDir}}
	for _, c := range []string{"sh", "echo", "httpd", "wget", "grep", "sleep", "mount", "cat"} {
		entries = append(entries, ocitest.Entry{Name: "bin/" + c, Type: tar.TypeSymlink, Linkname: "busybox"})
	}
	return ocitest.Image(t, "amd64", []string{"PATH=/bin"}, ocitest.Layer(t, entries...))
}

type composeRun struct {
	Sandbox string `json:"sandbox"`
	Changes struct {
		Added, Modified, Deleted int
	} `json:"changes"`
	Verify *struct {
		Passed bool `json:"passed"`
	} `json:"verify"`
}

func runResult(t *testing.T, out string) composeRun {
	t.Helper()
	var res composeRun
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("run --json: %v\n%s", err, out)
	}
	return res
}

// registryPulls counts the registry requests Docker Hub answered.
func registryPulls(hub *fakevendor.Server) int {
	n := 0
	for _, r := range hub.Requests() {
		if strings.HasPrefix(r.Path, "/v2/") {
			n++
		}
	}
	return n
}

// servicesEvent checks the audit's services event, and logs the run's
// timeline (each event's time from the first) and what Docker and the
// services said.
func servicesEvent(t *testing.T, audit []byte, what string) {
	t.Helper()
	var first time.Time
	found := false
	for _, l := range strings.Split(string(audit), "\n") {
		var ev struct {
			Time  time.Time       `json:"time"`
			Event string          `json:"event"`
			Data  json.RawMessage `json:"data"`
		}
		if json.Unmarshal([]byte(l), &ev) != nil {
			continue
		}
		if first.IsZero() {
			first = ev.Time
		}
		line := fmt.Sprintf("%s: +%5.1fs %s", what, ev.Time.Sub(first).Seconds(), ev.Event)
		if ev.Event == "services" || ev.Event == "docker" || ev.Event == "booted" {
			line += " " + string(ev.Data)
		}
		t.Log(line)
		found = found || (ev.Event == "services" && strings.Contains(string(ev.Data), `"completed"`) && strings.Contains(string(ev.Data), `"web"`))
	}
	if !found {
		t.Errorf("%s: the audit log does not say the services started:\n%s", what, audit)
	}
}

// logTimes logs the builder's phases (### lines) and the run's boot.
func logTimes(t *testing.T, errOut string) {
	for _, l := range strings.Split(errOut, "\n") {
		if strings.HasPrefix(l, "###") || strings.Contains(l, "cold boot") || strings.Contains(l, "environment:") {
			t.Logf("  %s", l)
		}
	}
}

// logDisk logs what a sandbox's own files hold on the host's disk.
func logDisk(t *testing.T, dir string) {
	var total int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if n := allocated(p); n > 1<<20 {
			t.Logf("  sandbox disk: %s %d MiB", strings.TrimPrefix(p, dir), n>>20)
			total += n
		}
		return nil
	})
	t.Logf("  the sandbox's own files: %d MiB on the host", total>>20)
}

// allocated is the host disk a file takes (its blocks: a sparse disk
// image's holes take none).
func allocated(p string) int64 {
	var st syscall.Stat_t
	if syscall.Stat(p, &st) != nil {
		return 0
	}
	return st.Blocks * 512
}

var envImage = regexp.MustCompile(`image (env-[0-9a-f]{12})`)

// removeEnvImage removes the environment the test built from the shared
// test home: its nonce makes it the test's own.
func removeEnvImage(t *testing.T, home, errOut string) {
	if m := envImage.FindStringSubmatch(errOut); m != nil {
		matches, _ := filepath.Glob(filepath.Join(home, "images", m[1]+"*"))
		for _, d := range matches {
			os.RemoveAll(d)
		}
	}
}

// treeOf is a listing of the project's files and their contents.
func treeOf(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b.WriteString(rel)
		if !d.IsDir() {
			data, _ := os.ReadFile(p)
			b.WriteString(" " + string(data))
		}
		b.WriteString("\n")
		return nil
	})
	return b.String()
}
