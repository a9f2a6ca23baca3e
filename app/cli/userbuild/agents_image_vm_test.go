package userbuild

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/testkit/fakenpm"
	"github.com/airlock-dev/airlock/testkit/ocitest"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// nobody is the unprivileged account the agent image is built as.
const nobody = "65534"

// TestAgentsImageByNonRootUser builds the agent image the way a Mac user
// does, as an ordinary user: the Debian base pulled from a registry (here
// a layer made from Debian packages, on loopback), then the packages
// (already in that base, see below), node, the agent CLIs and the agent
// user installed in builder VMs through the egress proxy, from a mirror
// of the npm registry (--npm-registry). claude, codex, gemini, git and
// node answer in it, as the agent user.
//
// The mirror is the test's, on loopback: node and npm are the real
// tarballs, the three CLIs small stand-ins with their pinned names and
// versions that print what the real ones print for --version. The real
// CLIs are 340 MB of tarballs and a 1 GiB layer: npm unpacking them took
// 7 to 15 minutes under QEMU without KVM and bringing the layer back 5
// to 7 more, most of the suite's longest lane, for nothing this test
// proves that the stand-ins do not (every stage, the proxy, the layer,
// the image's disk, as an ordinary user). The real CLIs are proven on
// every run in app/cli/agents and app/cli/gemini, installed by npm from
// npm's registry into the full image.
func TestAgentsImageByNonRootUser(t *testing.T) {
	testenv.SkipIfShort(t)
	if os.Getuid() != 0 {
		testenv.Skip(t, testenv.Root, "the test switches to an unprivileged user, which needs root")
	}
	minimal := testenv.Image(t, vm.AMD64)
	reg := ocitest.NewRegistry(t)
	path := "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	base := reg.Push(t, "library/debian:bookworm-slim", ocitest.Image(t, "amd64", []string{path}, ocitest.LayerFromFile(t, testenv.DebianEnv(t))))
	// The agent image's base has its Debian packages already: the build
	// runs every stage as a user's does (the apt step in the builder VM
	// finds them installed and runs no apt), without the half hour dpkg
	// takes to unpack them under QEMU without KVM.
	// TestGoProjectEnvironment proves apt installing in a builder VM.
	tools := reg.Push(t, "library/debian:bookworm-tools", ocitest.Image(t, "amd64", []string{path}, ocitest.LayerFromFile(t, testenv.DebianTools(t))))

	// The npm mirror: 127.0.0.2, a loopback address the guest's NO_PROXY
	// does not name, so npm and curl in the builder go through the
	// proxy, which reaches the mirror because the build allows it by
	// address and port (and nothing else: not npm's registry).
	spec := image.FullSpec(vm.AMD64)
	claude, codex, gemini := spec.Agents[0], spec.Agents[1], spec.Agents[2]
	npmReg := fakenpm.Start(t, "127.0.0.2:0",
		fakenpm.FromFile(t, spec.Node.Name, spec.Node.Version, testenv.NpmTarball(t, spec.Node)),
		fakenpm.FromFile(t, spec.NPM.Name, spec.NPM.Version, testenv.NpmTarball(t, spec.NPM)),
		fakenpm.CLI(t, claude.Name, claude.Version, "claude", claude.Version+" (Claude Code)"),
		fakenpm.CLI(t, codex.Name, codex.Version, "codex", "codex-cli "+codex.Version),
		fakenpm.CLI(t, gemini.Name, gemini.Version, "gemini", gemini.Version))

	// The unprivileged user's own home, with the minimal image (it ships
	// with the app) and the airlock binary.
	// Not t.TempDir: its parent is root's alone.
	dir, err := os.MkdirTemp("", "airlock-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	testenv.CopyMinimal(t, minimal, home)
	bin := filepath.Join(dir, "airlock")
	build := exec.Command("go", "build", "-o", bin, "./app")
	build.Dir = testenv.RepoRoot(t)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./app: %v\n%s", err, out)
	}
	if out, err := exec.Command("chown", "-R", nobody+":"+nobody, dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	asNobody := func(args ...string) (string, error) {
		cmd := exec.Command("setpriv", append([]string{"--reuid=" + nobody, "--regid=" + nobody, "--clear-groups", "--",
			bin, "--home", home}, args...)...)
		cmd.Env = []string{"HOME=" + dir, path, "TMPDIR=" + dir}
		// Each line is logged as it comes, with the time since the
		// command started: where a slow build spends its time shows in
		// the test's log.
		var out strings.Builder
		lw := &timedLines{t: t, start: time.Now(), all: &out}
		cmd.Stdout, cmd.Stderr = lw, lw
		err := cmd.Run()
		lw.flush()
		return out.String(), err
	}

	start := time.Now()
	out, err := asNobody("image", "build", "--arch", "amd64", "--base", tools, "--npm-registry", npmReg.URL, "agents")
	if err != nil {
		t.Fatalf("image build agents as an unprivileged user: %v\n%s", err, out)
	}
	t.Logf("built the agent image in a VM in %s", time.Since(start).Round(time.Second))
	if !strings.Contains(out, "built the agent image agents") || !strings.Contains(out, "user agent") ||
		!strings.Contains(out, ": all installed already") {
		t.Errorf("image build agents says:\n%s", out)
	}
	served := strings.Join(npmReg.Requests(), "\n")
	for _, p := range append([]image.NpmPackage{spec.Node, spec.NPM}, spec.Agents...) {
		if !strings.Contains(served, p.Version+".tgz 200") {
			t.Errorf("the mirror did not serve %s's tarball:\n%s", p, served)
		}
	}
	out, err = asNobody("exec", "--arch", "amd64", "--image", "agents", "--", "sh", "-c",
		`id -un; claude --version; codex --version; gemini --version; git --version; node --version`)
	if err != nil {
		t.Fatalf("exec on the agent image: %v\n%s", err, out)
	}
	for _, want := range []string{"agent\n", spec.Agents[0].Version + " (Claude Code)", "codex-cli " + spec.Agents[1].Version,
		"\n" + spec.Agents[2].Version + "\n", "git version 2.", "v" + spec.Node.Version} {
		if !strings.Contains(out, want) {
			t.Errorf("the agent image's output lacks %q:\n%s", want, out)
		}
	}

	// The agent layer on a project's own image: an environment naming an
	// image (here the Debian base of the tests' environments: Go and Docker, no git, no node) gets the agent
	// CLIs stacked on it, without a VM.
	proj := filepath.Join(dir, "project")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "airlock.toml"), []byte("[environment]\nimage = \""+base+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", "-R", nobody+":"+nobody, proj).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	out, err = asNobody("env", "build", "--arch", "amd64", "--with-agents", "--trust-project", proj)
	if err != nil || !strings.Contains(out, "with the agent CLIs: image envbase-") {
		t.Fatalf("env build --with-agents: %v\n%s", err, out)
	}
	const with = "with the agent CLIs: image "
	envAgents := out[strings.Index(out, with)+len(with):]
	if i := strings.IndexByte(envAgents, '\n'); i >= 0 {
		envAgents = envAgents[:i]
	}
	envAgents = strings.TrimSpace(envAgents)
	out, err = asNobody("exec", "--arch", "amd64", "--image", envAgents, "--", "sh", "-c",
		`claude --version; command -v gemini; command -v codex; node --version; command -v git || echo no-git`)
	if err != nil {
		t.Fatalf("exec on %s: %v\n%s", envAgents, err, out)
	}
	for _, want := range []string{spec.Agents[0].Version + " (Claude Code)", "/gemini\n", "/codex\n",
		"v" + spec.Node.Version, "no-git"} {
		if !strings.Contains(out, want) {
			t.Errorf("the environment with the agent layer lacks %q:\n%s", want, out)
		}
	}
}

// timedLines logs each complete line written to it with the time since
// start, and keeps everything in all.
type timedLines struct {
	t     testing.TB
	start time.Time
	all   *strings.Builder
	mu    sync.Mutex
	line  []byte
}

func (w *timedLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(p)
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.t.Logf("%7.1fs %s", time.Since(w.start).Seconds(), w.line[:i])
		w.line = w.line[i+1:]
	}
}

func (w *timedLines) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.line) > 0 {
		w.t.Logf("%7.1fs %s", time.Since(w.start).Seconds(), w.line)
		w.line = nil
	}
}
