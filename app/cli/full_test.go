package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// fullHome is an Airlock home of its own that shares the test images,
// with the full image built.
func fullHome(t testing.TB) (string, *image.Image) {
	t.Helper()
	im := testenv.FullImage(t, vm.AMD64)
	return testenv.VMHome(t), im
}

// TestFullImageTools boots the full image and runs the agent CLIs and the
// tools in it as the agent user.
func TestFullImageTools(t *testing.T) {
	testenv.SkipIfShort(t)
	home, im := fullHome(t)
	code, out, errOut := airlockCLI(t, home, "exec", "--arch", "amd64", "--image", "full", "--",
		"sh", "-c", `set -e
echo "user=$(id -un) uid=$(id -u) home=$HOME pwd=$(pwd)"
echo "root=$(stat -c %U /workspace)"
claude --version
codex --version
command -v gemini
git --version
node --version
npm --version
python3 --version
rg --version | head -n1
gcc --version | head -n1
readlink /init`)
	if code != 0 {
		t.Fatalf("exec on the full image: exit %d\n%s%s", code, out, errOut)
	}
	spec := image.FullSpec(vm.AMD64)
	for _, want := range []string{
		"user=agent uid=1000 home=/home/agent pwd=/home/agent", "root=agent",
		spec.Agents[0].Version + " (Claude Code)", "codex-cli " + spec.Agents[1].Version, "/gemini\n",
		"git version 2.", "v" + strings.TrimPrefix(im.Meta.Rootfs.Node, "v"), "\n" + spec.NPM.Version + "\n",
		"Python 3.11", "ripgrep ", "gcc (Debian 12", "/run/airlock-guest/init",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s%s", want, out, errOut)
		}
	}
	// gemini's --version takes a minute under QEMU without KVM: the
	// Gemini CLI tests run it on this image, and its version is the one
	// the build installed.
	if !slices.Contains(im.Meta.Rootfs.Npm, spec.Agents[2]) {
		t.Errorf("the full image's npm packages lack %s: %v", spec.Agents[2], im.Meta.Rootfs.Npm)
	}
	// image ls shows the full image with its root disk.
	code, out, _ = airlockCLI(t, home, "image", "ls")
	if code != 0 || !strings.Contains(out, "full") || !strings.Contains(out, "root disk") {
		t.Errorf("image ls: exit %d\n%s", code, out)
	}
}

// TestFullImageDemoLoop runs the demo agent's whole loop on the full
// image (as the agent user, with the workspace disk), checks that the
// sandbox booted a copy-on-write clone of the root disk that lives with
// the sandbox, that the agent's own state in its home survived into the
// reply round (the same clone booted again), and that rm removes it.
func TestFullImageDemoLoop(t *testing.T) {
	testenv.SkipIfShort(t)
	home, im := fullHome(t)
	sb, replyOut := demoAgentLoop(t, home, "--image", "full")
	if !strings.Contains(replyOut, "continuing a conversation of 1 earlier rounds") {
		t.Errorf("the agent's conversation in /home/agent did not survive the first round:\n%s", replyOut)
	}
	clone := sb.Path(pipeline.RootDiskFile)
	cfi, err := os.Stat(clone)
	if err != nil {
		t.Fatalf("the sandbox's root disk clone: %v", err)
	}
	ifi, err := os.Stat(im.Rootfs)
	if err != nil {
		t.Fatal(err)
	}
	cloneBytes := cfi.Sys().(*syscall.Stat_t).Blocks * 512
	imageBytes := ifi.Sys().(*syscall.Stat_t).Blocks * 512
	t.Logf("root disk: image %d MiB allocated; the sandbox's clone %d MiB allocated after two rounds", imageBytes>>20, cloneBytes>>20)
	if cloneBytes*5 > imageBytes {
		t.Errorf("the clone takes %d bytes of the host's disk, the image %d: not copy-on-write", cloneBytes, imageBytes)
	}
	if code, out, errOut := airlockCLI(t, home, "rm", sb.ID); code != 0 {
		t.Fatalf("rm: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Dir(clone)); !os.IsNotExist(err) {
		t.Errorf("rm left the sandbox's directory with its clone: %v", err)
	}
}

// TestFullImageCheckpointRollback: on the full image the root disk is
// written too (the agent's home), so a checkpoint keeps it with the
// workspace disk and a rollback puts both back, with the processes.
func TestFullImageCheckpointRollback(t *testing.T) {
	testenv.SkipIfShort(t)
	home, _ := fullHome(t)
	proj := t.TempDir()
	if err := os.WriteFile(filepath.Join(proj, "a.txt"), []byte("v0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := airlockCLI(t, home, "--json", "run", "--image", "full", "--keep", "--project", proj, "--", "sh", "-c", "echo v1 > a.txt; echo h1 > ~/note.txt")
	var res struct {
		Sandbox string `json:"sandbox"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Sandbox == "" {
		t.Fatalf("run --keep: exit %d\n%s\n%s", code, out, errOut)
	}
	id := res.Sandbox
	t.Cleanup(func() { airlockCLI(t, home, "stop", "--kill", id) })
	sh := shellIn(t, home, id)
	sh("setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > ~/sleep.pid")
	if code, out, errOut := airlockCLI(t, home, "checkpoint", id, "before"); code != 0 {
		t.Fatalf("checkpoint: exit %d\n%s\n%s", code, out, errOut)
	}
	sh("kill $(cat ~/sleep.pid); echo v2 > a.txt; echo h2 > ~/note.txt; sync")
	if code, out, errOut := airlockCLI(t, home, "rollback", id, "before"); code != 0 {
		t.Fatalf("rollback: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := sh("cat a.txt ~/note.txt; kill -0 $(cat ~/sleep.pid) && echo alive; whoami"); got != "v1\nh1\nalive\nagent" {
		t.Errorf("after the rollback: %q, want a.txt v1, ~/note.txt h1, the sleep alive, as agent", got)
	}
}
