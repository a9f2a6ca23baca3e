package docker

import (
	"archive/tar"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/airlock-dev/airlock/app/cli/clitest"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/ocitest"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// TestDockerInTheVM runs a project whose airlock.toml asks for Docker
// (docker = true) on a Debian image: the environment is built once in a
// builder VM (the engine's packages already in the test's base, so apt
// installs nothing; the user put in the docker group), then the run
// starts the Docker Engine in the VM before the command, and the
// command's user, not root, loads a tiny busybox image and runs a
// container that writes into /workspace through a bind mount: the file
// comes back in the changeset like any other. The audit log says when
// the engine answered; a reply round, in a fresh VM, starts it again.
func TestDockerInTheVM(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	reg := ocitest.NewRegistry(t)
	ref := reg.Push(t, "library/debian:bookworm-docker", ocitest.Image(t, "amd64",
		[]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, ocitest.LayerFromFile(t, testenv.DebianDocker(t))))

	proj := t.TempDir()
	toml := "[environment]\nimage = \"" + ref + "\"\ndocker = true\nuser = \"dev\"\n" +
		"setup = [\"useradd --create-home --uid 1000 dev && mkdir -p /workspace && chown dev: /workspace\"]\n"
	if err := os.WriteFile(filepath.Join(proj, "airlock.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	writeBusyboxArchive(t, filepath.Join(proj, "bb.tar"))

	// Untrusted first: nothing is built, and the prompt names Docker.
	code, out, errOut := clitest.Run(t, home, nil, "run", "--arch", "amd64", "--project", proj, "--", "true")
	if code == 0 || !strings.Contains(errOut, "Docker inside the VM: docker.io iptables") {
		t.Fatalf("an unconfirmed environment with Docker ran, or its prompt does not name Docker: exit %d\n%s%s", code, out, errOut)
	}

	// A reply round (AIRLOCK_REPLY set) only asks the engine; a
	// container that does not end within five minutes prints what runs
	// and the daemon's log (a hang once seen under QEMU without KVM).
	script := strings.Join([]string{
		"set -e",
		"id -un",
		`if [ -n "$AIRLOCK_REPLY" ]; then docker info --format 'round 2: driver={{.Driver}}'; exit 0; fi`,
		"docker info --format 'driver={{.Driver}} cgroup={{.CgroupVersion}}'",
		"docker load -q -i bb.tar",
		"timeout 300 docker run --rm -v \"$PWD\":/out airlock-test/bb:1 sh -c 'echo made-in-a-container > /out/from-container.txt; uname -s' ||",
		"  { echo 'docker run failed or hung' >&2; ps -eo pid,stat,pcpu,etime,args >&2; tail -50 /var/log/airlock-dockerd.log >&2; exit 1; }",
	}, "\n")
	start := time.Now()
	code, out, errOut = clitest.Run(t, home, nil, "run", "--arch", "amd64", "--json", "--trust-project", "--project", proj, "--", "sh", "-c", script)
	t.Logf("first run (environment built, engine started) in %s", time.Since(start).Round(time.Second))
	if code != 0 {
		t.Fatalf("run with Docker: exit %d\n%s%s", code, out, errOut)
	}
	var res struct {
		Sandbox  string `json:"sandbox"`
		ExitCode int    `json:"exit_code"`
		Changes  struct {
			Added int `json:"added"`
		} `json:"changes"`
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
	for _, want := range []string{"dev\n", "driver=overlay2 cgroup=2", "Loaded image: airlock-test/bb:1", "Linux"} {
		if !strings.Contains(string(transcript), want) {
			t.Errorf("the transcript lacks %q:\n%s", want, transcript)
		}
	}
	audit, err := sb.AuditRaw()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(audit), `"event":"docker"`) || !strings.Contains(string(audit), "Docker Engine started in") {
		t.Errorf("the audit log does not say the engine started:\n%s", audit)
	}
	for _, l := range strings.Split(string(audit), "\n") {
		if strings.Contains(l, `"event":"docker"`) {
			t.Logf("audit: %s", l)
		}
	}

	// A reply round runs in a fresh VM of the sandbox's image: the
	// engine is started again before the command.
	code, out, errOut = clitest.Run(t, home, nil, "reply", res.Sandbox, "--message", "once more")
	if code != 0 {
		t.Fatalf("reply: exit %d\n%s%s", code, out, errOut)
	}
	if audit, err = sb.AuditRaw(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(audit), `"event":"docker"`); n != 2 {
		t.Errorf("the engine was started %d times in two rounds:\n%s", n, audit)
	}
	if transcript, err = os.ReadFile(sb.Path(sandbox.TranscriptFile)); err != nil || !strings.Contains(string(transcript), "round 2: driver=overlay2") {
		t.Errorf("the reply round did not reach the engine (%v):\n%s", err, transcript)
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

// writeBusyboxArchive writes a docker-archive (docker load) of a tiny
// image: the host's static busybox as /bin/busybox and /bin/sh.
func writeBusyboxArchive(t *testing.T, path string) {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("busybox-static (scripts/setup-debian installs it): %v", err)
	}
	img := ocitest.Image(t, "amd64", []string{"PATH=/bin"}, ocitest.Layer(t,
		ocitest.Entry{Name: "bin/", Type: tar.TypeDir},
		ocitest.Entry{Name: "bin/busybox", Mode: 0o755, Body: string(bb)},
		ocitest.Entry{Name: "bin/sh", Type: tar.TypeSymlink, Linkname: "busybox"},
		ocitest.Entry{Name: "bin/uname", Type: tar.TypeSymlink, Linkname: "busybox"},
		ocitest.Entry{Name: "bin/echo", Type: tar.TypeSymlink, Linkname: "busybox"}))
	tag, err := name.NewTag("airlock-test/bb:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		t.Fatal(err)
	}
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
