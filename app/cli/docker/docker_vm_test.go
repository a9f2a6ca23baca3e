package docker

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlock-dev/airlock/app/cli"
	"github.com/airlock-dev/airlock/app/cli/clitest"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/fakevendor"
	"github.com/airlock-dev/airlock/testkit/ocitest"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// TestDockerInTheVM runs a project whose airlock.toml asks for Docker
// (docker = true) on a Debian image: the environment is built once in a
// builder VM (the engine's packages already in the test's base, so apt
// installs nothing; the user put in the docker group), then the run
// starts the Docker Engine in the VM before the command, and the
// command's user, not root, pulls a tiny busybox image from Docker Hub
// through Airlock's proxy (--allow @docker; Docker Hub is the test's
// registry under its name), is refused a pull from ghcr.io (not
// allowed), and runs a Compose v2 service (Compose fetched from Debian's
// mirror by the builder, by hash) whose container writes into /workspace
// through a bind mount and finds no direct way out: the file comes back
// in the changeset like any other. The audit log says when the engine
// answered. (That a reply round starts it again is app/plan's contract
// test: the session's code is the same.)
func TestDockerInTheVM(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	ref, hub := dockerRegistries(t)

	proj := t.TempDir()
	toml := "[environment]\nimage = \"" + ref + "\"\ndocker = true\nuser = \"dev\"\n" +
		"setup = [\"useradd --create-home --uid 1000 dev && mkdir -p /workspace && chown dev: /workspace\"]\n"
	if err := os.WriteFile(filepath.Join(proj, "airlock.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	// One service: it writes into /workspace through a bind of the
	// project's folder, and finds no way out but the proxy (the VM has
	// no network device).
	compose := `services:
  hello:
    image: airlock-test/bb:1
    volumes: [".:/out"]
    command: ["sh", "-c", "echo hello-from-compose; echo made-in-a-container > /out/from-container.txt; uname -s; nc -w 5 1.1.1.1 80 </dev/null 2>&1 || echo no-direct-way-out; wget -q -O- http://files.airlock.test/compose"]
`
	if err := os.WriteFile(filepath.Join(proj, "compose.yaml"), []byte(compose), 0o644); err != nil {
		t.Fatal(err)
	}

	// Untrusted first: nothing is built, and the prompt names Docker.
	code, out, errOut := clitest.Run(t, home, nil, "run", "--arch", "amd64", "--project", proj, "--", "true")
	if code == 0 || !strings.Contains(errOut, "Docker inside the VM: docker.io iptables curl and Compose v2") {
		t.Fatalf("an unconfirmed environment with Docker ran, or its prompt does not name Docker: exit %d\n%s%s", code, out, errOut)
	}

	// A container that does not end within five minutes prints what
	// runs and the daemon's log (a hang once seen under QEMU without
	// KVM).
	script := strings.Join([]string{
		"set -e",
		"id -un",
		"docker info --format 'driver={{.Driver}} cgroup={{.CgroupVersion}}'",
		"docker pull -q airlock-test/bb:1",
		// Not allowed: the proxy refuses, and the pull says so.
		"if docker pull -q ghcr.io/airlock-test/bb:1 2>&1; then echo ghcr-pulled; fi",
		"docker compose version",
		// A container's own HTTP goes through Airlock's proxy (the
		// CLI gives it the proxy's variables), and only there.
		"docker run --rm airlock-test/bb:1 sh -c 'wget -q -O- http://files.airlock.test/run'",
		"docker run --rm airlock-test/bb:1 sh -c 'wget -q -O- http://not-allowed.airlock.test/ 2>&1' || echo refused-by-the-proxy",
		"timeout 300 docker compose run --rm -T hello ||",
		"  { echo 'the container failed or hung' >&2; ps -eo pid,stat,pcpu,etime,args >&2; tail -50 /var/log/airlock-dockerd.log >&2; exit 1; }",
		// A fork bomb in a container: the containers' cgroup stops it
		// at its cap, and the VM (its agent, this script) goes on.
		"cg=/sys/fs/cgroup/airlock-containers",
		"docker run -d --name bomb airlock-test/bb:1 sh -c 'b() { b | b & }; b; sleep 600' >/dev/null",
		"for i in $(seq 120); do [ $(cat $cg/pids.current) -ge $(cat $cg/pids.max) ] && break; sleep 1; done",
		"echo \"bomb: $(cat $cg/pids.current) of $(cat $cg/pids.max) processes after ${i}s\"",
		// Its 4096 processes take a while to reap under emulation, and
		// longer on a loaded machine: each try waits for the exit up to
		// its limit, the reaping goes on between.
		"for i in $(seq 18); do docker rm -f bomb >/dev/null 2>&1 && break; sleep 10; done",
		"if docker inspect bomb >/dev/null 2>&1; then echo 'the bomb outlived 3 minutes of docker rm -f' >&2; docker rm -f bomb; fi",
		"echo the-vm-outlived-the-bomb",
		// A container that fills the sandbox's disk (its quota, --disk
		// 1GiB) through a bind mount: No space left on device in the
		// VM, the changes still come back (the filler left out, over
		// --max-file-size), and Airlock says the disk was full.
		"docker run --rm -v /workspace:/w airlock-test/bb:1 sh -c 'dd if=/dev/zero of=/w/filler bs=1M' 2>&1 | tail -3 || true",
		"df -h /workspace",
	}, "\n")
	start := time.Now()
	files := startFiles(t)
	up := []cli.Option{cli.WithPlanHook(func(p *plan.Plan) error {
		for i := range p.Runs {
			if n := p.Runs[i].Network; n != nil {
				n.Dial, n.RootCAs = files.dial(hub), hub.RootCAs
			}
		}
		return nil
	})}
	code, out, errOut = clitest.Run(t, home, up, "run", "--arch", "amd64", "--json", "--trust-project", "--allow", "@docker", "--allow", "files.airlock.test", "--disk", "1GiB", "--max-file-size", "64MiB", "--project", proj, "--", "sh", "-c", script)
	t.Logf("first run (environment built, engine started) in %s", time.Since(start).Round(time.Second))
	for _, l := range strings.Split(errOut, "\n") {
		if strings.HasPrefix(l, "###") || strings.Contains(l, "cold boot") {
			t.Logf("  %s", l)
		}
	}
	if code != 0 {
		var id struct{ Sandbox string }
		json.Unmarshal([]byte(out), &id)
		tr, _ := os.ReadFile(filepath.Join(home, "sandboxes", id.Sandbox, sandbox.TranscriptFile))
		t.Fatalf("run with Docker: exit %d\n%s%s\ntranscript:\n%s", code, out, errOut, tr)
	}
	var res struct {
		Sandbox  string `json:"sandbox"`
		ExitCode int    `json:"exit_code"`
		Changes  struct {
			Added int `json:"added"`
		} `json:"changes"`
		DiskFull *sandbox.DiskUsage `json:"disk_full"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("run --json: %v\n%s", err, out)
	}
	if res.ExitCode != 0 || res.Changes.Added != 1 {
		t.Errorf("the container's file is not the one change: %+v\n%s", res, errOut)
	}
	sb := openSandbox(t, home, res.Sandbox)
	transcript, err := os.ReadFile(sb.Path(sandbox.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dev\n", "driver=overlay2 cgroup=2", "docker.io/airlock-test/bb:1", "Linux",
		"Docker Compose version 2.26.1", "hello-from-compose", "1.1.1.1): Network is unreachable", "no-direct-way-out", `"https://ghcr.io/v2/": Forbidden`,
		"files-served /run", "files-served /compose", "403 Forbidden", "refused-by-the-proxy",
		"of 4096 processes after", "the-vm-outlived-the-bomb", "No space left on device"} {
		if !strings.Contains(string(transcript), want) {
			t.Errorf("the transcript lacks %q:\n%s", want, transcript)
		}
	}
	if res.DiskFull == nil || res.DiskFull.Path != "/workspace" || res.DiskFull.Size > 1<<30 || res.DiskFull.Used < res.DiskFull.Size-16<<20 {
		t.Errorf("the full disk is not named in the result: %+v", res.DiskFull)
	}
	for _, l := range strings.Split(string(transcript), "\n") {
		if strings.HasPrefix(l, "bomb:") || strings.Contains(l, "/workspace") {
			t.Logf("  %s", l)
		}
	}
	if strings.Contains(string(transcript), "ghcr-pulled") {
		t.Errorf("a pull from a registry not allowed went through:\n%s", transcript)
	}
	// The daemon's pull went through the proxy, which logged it; the
	// refused one too.
	var pulled, refused bool
	for _, r := range hub.Requests() {
		pulled = pulled || ((r.Method == "GET" || r.Method == "HEAD") && r.Path == "/v2/airlock-test/bb/manifests/1" && r.Status == 200)
	}
	if !pulled {
		t.Errorf("Docker Hub never served the manifest: %+v", hub.Requests())
	}
	audit, err := sb.AuditRaw()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(audit), "\n") {
		refused = refused || (strings.Contains(l, `"event":"egress"`) && strings.Contains(l, `"host":"ghcr.io"`) && !strings.Contains(l, `"allowed":true`))
	}
	if !refused {
		t.Errorf("the audit log has no refusal of ghcr.io:\n%s", audit)
	}
	if !strings.Contains(string(audit), `"event":"docker"`) || !strings.Contains(string(audit), "Docker Engine started in") {
		t.Errorf("the audit log does not say the engine started:\n%s", audit)
	}
	for _, l := range strings.Split(string(audit), "\n") {
		if strings.Contains(l, `"event":"docker"`) {
			t.Logf("audit: %s", l)
		}
	}
}

// TestDockerRefusedOnMusl: an environment asking for Docker on an image
// that cannot have Debian's engine (musl) is refused before anything is
// built, with the reason.
func TestDockerRefusedOnMusl(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	reg := ocitest.NewRegistry(t)
	ref := reg.Push(t, "library/bb:musl", ocitest.Image(t, "amd64", nil, ocitest.Layer(t,
		ocitest.Entry{Name: "bin/", Type: tar.TypeDir},
		ocitest.Entry{Name: "lib/ld-musl-x86_64.so.1", Body: "not really"})))
	proj := t.TempDir()
	if err := os.WriteFile(filepath.Join(proj, "airlock.toml"), []byte("[environment]\nimage = \""+ref+"\"\ndocker = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := clitest.Run(t, home, nil, "run", "--arch", "amd64", "--trust-project", "--project", proj, "--", "true")
	if code == 0 || !strings.Contains(errOut, "installs from Debian's docker.io") || !strings.Contains(errOut, "musl") {
		t.Errorf("Docker on a musl image: exit %d\n%s%s", code, out, errOut)
	}
}

// dockerRegistries are the tests' registries: the test's own on loopback,
// holding the Debian base with Docker's engine (testenv.DebianEnv, whose
// reference base is), and Docker Hub as the daemon sees it through the
// proxy: that registry under registry-1.docker.io's name, over TLS with a
// CA of the test's (the proxy verifies it; the daemon trusts the
// sandbox's), holding airlock-test/bb:1 (busybox).
func dockerRegistries(t *testing.T) (base string, hub *fakevendor.Server) {
	t.Helper()
	reg := ocitest.NewRegistry(t)
	base = reg.Push(t, "library/debian:bookworm-docker", ocitest.Image(t, "amd64",
		[]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, ocitest.LayerFromFile(t, testenv.DebianEnv(t))))
	reg.Push(t, "airlock-test/bb:1", busybox(t))
	return base, fakevendor.Start(t, fakevendor.Script{}, dockerHub{reg: reg.Host})
}

// busybox is a tiny image: the host's static busybox as /bin/busybox and
// the commands the test's containers use.
func busybox(t *testing.T) v1.Image {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("busybox-static (scripts/setup-debian installs it): %v", err)
	}
	entries := []ocitest.Entry{{Name: "bin/", Type: tar.TypeDir}, {Name: "bin/busybox", Mode: 0o755, Body: string(bb)}}
	for _, c := range []string{"sh", "uname", "echo", "nc"} {
		entries = append(entries, ocitest.Entry{Name: "bin/" + c, Type: tar.TypeSymlink, Linkname: "busybox"})
	}
	return ocitest.Image(t, "amd64", []string{"PATH=/bin"}, ocitest.Layer(t, entries...))
}

// dockerHub answers for Docker Hub's registry host with the test's
// registry (plain HTTP on loopback) behind it.
type dockerHub struct{ reg string }

func (dockerHub) Hosts() []string { return []string{"registry-1.docker.io"} }

func (h dockerHub) Serve(_ *fakevendor.Server, w http.ResponseWriter, r *http.Request, body []byte) int {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+h.reg+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return http.StatusBadGateway
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return http.StatusBadGateway
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
	return resp.StatusCode
}

func openSandbox(t *testing.T, home, id string) *sandbox.Sandbox {
	t.Helper()
	st, err := sandbox.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := st.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}
