package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/internal/ocitest"
	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// nobody is the unprivileged account the agent image is built as.
const nobody = "65534"

// TestAgentsImageByNonRootUser builds the agent image the way a Mac user
// does, as an ordinary user: the Debian base pulled from a registry (here
// the base layer made from Debian packages, on loopback), then packages,
// node, the agent CLIs and the agent user installed in a builder VM through
// the egress proxy. claude, codex, gemini, git and node answer in it, as
// the agent user.
func TestAgentsImageByNonRootUser(t *testing.T) {
	testenv.SkipIfShort(t)
	if os.Getuid() != 0 {
		testenv.Skip(t, testenv.Root, "the test switches to an unprivileged user, which needs root")
	}
	minimal := testenv.Image(t, vm.AMD64)
	reg := ocitest.NewRegistry(t)
	base := reg.Push(t, "library/debian:bookworm-slim", ocitest.Image(t, "amd64",
		[]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, ocitest.LayerFromFile(t, testenv.DebianBase(t))))

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
	copyMinimal(t, minimal, home)
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
		cmd.Env = []string{"HOME=" + dir, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR=" + dir}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	start := time.Now()
	out, err := asNobody("image", "build", "--arch", "amd64", "--base", base, "agents")
	if err != nil {
		t.Fatalf("image build agents as an unprivileged user: %v\n%s", err, out)
	}
	t.Logf("built the agent image in a VM in %s", time.Since(start).Round(time.Second))
	if !strings.Contains(out, "built the agent image agents") || !strings.Contains(out, "user agent") {
		t.Errorf("image build agents says:\n%s", out)
	}
	spec := image.FullSpec(vm.AMD64)
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
	// image (here the bare Debian base, no git, no node) gets the agent
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
	out, err = asNobody("env", "build", "--arch", "amd64", "--with-agents", proj)
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
		`claude --version; gemini --version; node --version; command -v git || echo no-git`)
	if err != nil {
		t.Fatalf("exec on %s: %v\n%s", envAgents, err, out)
	}
	for _, want := range []string{spec.Agents[0].Version + " (Claude Code)", "\n" + spec.Agents[2].Version + "\n", "v" + spec.Node.Version, "no-git"} {
		if !strings.Contains(out, want) {
			t.Errorf("the environment with the agent layer lacks %q:\n%s", want, out)
		}
	}
}

// copyMinimal puts a copy of the minimal image into home: a home of its
// own (not sharing the test images), as a new user's.
func copyMinimal(t testing.TB, minimal *image.Image, home string) {
	t.Helper()
	imgDir := image.Dir(home, image.DefaultName, vm.AMD64)
	if err := os.MkdirAll(imgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{image.KernelFile, image.InitrdFile, image.MetaFile} {
		b, err := os.ReadFile(filepath.Join(minimal.Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(imgDir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

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
	copyMinimal(t, minimal, pub)
	src := reg.Push(t, "stand-in:1", ocitest.Image(t, "amd64", []string{"PATH=/bin"}, busyboxLayers(t)...))
	if code, out, errOut := airlockCLI(t, pub, "image", "pull", "--arch", "amd64", "--name", "agents", src); code != 0 {
		t.Fatalf("pull: %d %s%s", code, out, errOut)
	}
	code, out, errOut := airlockCLI(t, pub, "image", "push", "--arch", "amd64", "agents")
	if code != 0 || !strings.Contains(out, "pushed agents as "+plan.AgentsRef(repo, vm.AMD64)) {
		t.Fatalf("image push agents: exit %d\n%s%s", code, out, errOut)
	}

	home := t.TempDir()
	copyMinimal(t, minimal, home)
	code, out, errOut = airlockCLI(t, home, "run", "--arch", "amd64", "--project", t.TempDir(), "--disk", "none", "--agent", "claude", "--prompt", "x")
	if !strings.Contains(errOut, "pulling "+plan.AgentsRef(repo, vm.AMD64)) {
		t.Errorf("the agent image was not pulled on first use: exit %d\n%s%s", code, out, errOut)
	}
	im, err := image.Load(home, plan.AgentsImage, vm.AMD64)
	if err != nil || im.Meta.OCI == nil || !strings.HasPrefix(im.Meta.OCI.Ref, repo) {
		t.Fatalf("the agent image in the new home: %v %+v", err, im)
	}
}
