package cli

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/testkit/ocitest"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// busyboxLayers are the layers of a small image made from Debian's
// busybox-static package (the one the minimal image was built from): the
// package's files as they are, then the applet links and an /etc. The
// test does not run the image's programs on the host.
func busyboxLayers(t testing.TB) []v1.Layer {
	t.Helper()
	debs, _ := filepath.Glob(filepath.Join(testenv.Home(t), "cache", "debs", "busybox-static_*_amd64.deb"))
	if len(debs) == 0 {
		t.Fatal("no busybox-static package in the test home's cache: the minimal image build fetches it")
	}
	pkg, err := exec.Command("dpkg-deb", "--fsys-tarfile", debs[0]).Output()
	if err != nil {
		t.Fatalf("dpkg-deb --fsys-tarfile %s: %v", debs[0], err)
	}
	links := []ocitest.Entry{
		{Name: "etc/", Type: tar.TypeDir}, {Name: "tmp/", Type: tar.TypeDir, Mode: 0o1777},
		{Name: "root/", Type: tar.TypeDir, Mode: 0o700},
		{Name: "etc/passwd", Body: "root:x:0:0:root:/root:/bin/sh\n"},
		{Name: "etc/group", Body: "root:x:0:\n"},
	}
	for _, a := range []string{"sh", "cat", "ls", "echo", "id", "grep", "stat", "rm", "mkdir", "touch", "test", "[", "wget"} {
		links = append(links, ocitest.Entry{Name: "bin/" + a, Type: tar.TypeSymlink, Linkname: "busybox"})
	}
	return []v1.Layer{ocitest.LayerFromTar(t, pkg), ocitest.Layer(t, links...)}
}

// TestPulledImageBootsAsOverlay pulls an image of three layers (the
// Debian package, links, and a layer whose whiteout deletes a lower file
// and whose opaque directory hides a lower one) from a registry on
// loopback, boots it, and runs commands in it: the root is an overlay of
// the image's read-only disk and the sandbox's own, the whiteouts hold,
// the root is writable, and a second sandbox starts warm.
func TestPulledImageBootsAsOverlay(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	reg := ocitest.NewRegistry(t)
	layers := busyboxLayers(t)
	layers = append(layers,
		ocitest.Layer(t,
			ocitest.Entry{Name: "etc/keep", Body: "kept\n"},
			ocitest.Entry{Name: "etc/gone", Body: "whited out\n"},
			ocitest.Entry{Name: "opt/tool/", Type: tar.TypeDir},
			ocitest.Entry{Name: "opt/tool/old", Body: "hidden\n"}),
		ocitest.Layer(t,
			ocitest.Entry{Name: "etc/.wh.gone"},
			ocitest.Entry{Name: "opt/tool/", Type: tar.TypeDir},
			ocitest.Entry{Name: "opt/tool/.wh..wh..opq"},
			ocitest.Entry{Name: "opt/tool/new", Body: "on top\n"}))
	ref := reg.Push(t, "team/busybox:test", ocitest.Image(t, "amd64", []string{"PATH=/bin"}, layers...))
	name := "t-oci-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))[len("Test"):]

	code, out, errOut := airlockCLI(t, home, "image", "pull", "--arch", "amd64", "--insecure", "--name", name, ref)
	if code != 0 {
		t.Fatalf("image pull: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "pulled "+ref+" as image "+name) || !strings.Contains(out, "digest  sha256:") {
		t.Errorf("image pull says:\n%s", out)
	}
	if !strings.Contains(errOut, "has no glibc loader") {
		t.Errorf("a busybox-only image is not called out as lacking glibc:\n%s", errOut)
	}

	script := `cat /etc/keep
ls /etc /opt/tool
grep ' / ' /proc/mounts
echo written > /etc/new && cat /etc/new
id -u`
	for round, warm := range []bool{false, true} {
		code, out, errOut = airlockCLI(t, home, "exec", "--arch", "amd64", "--image", name, "--", "sh", "-c", script)
		if code != 0 {
			t.Fatalf("exec %d on the pulled image: exit %d\n%s%s", round, code, out, errOut)
		}
		for _, want := range []string{"kept\n", "new\n", "overlay / overlay", "written\n", "\n0\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("exec %d: output lacks %q:\n%s%s", round, want, out, errOut)
			}
		}
		for _, gone := range []string{"gone", "old", ".wh."} {
			if strings.Contains(out, gone) {
				t.Errorf("exec %d: %q survived the whiteouts:\n%s", round, gone, out)
			}
		}
		if warm && !strings.Contains(errOut, "warm") {
			t.Logf("second exec's notices:\n%s", errOut)
		}
	}

	code, out, _ = airlockCLI(t, home, "image", "ls", "--json")
	if code != 0 {
		t.Fatalf("image ls: exit %d", code)
	}
	var infos []imageInfo
	if err := json.Unmarshal([]byte(out), &infos); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, i := range infos {
		if i.Name == name && i.Arch == vm.AMD64 {
			found = true
			if i.OCI == nil || i.OCI.Ref != ref || !strings.HasPrefix(i.OCI.Digest, "sha256:") || i.OCI.Layers != 4 || i.OCI.Platform != "linux/amd64" {
				t.Errorf("image ls: %+v", i.OCI)
			}
		}
	}
	if !found {
		t.Errorf("image ls does not list %s:\n%s", name, out)
	}
}

// pullBusybox pushes the busybox image to a registry on loopback and
// pulls it as image name into home.
func pullBusybox(t *testing.T, home, name string, extra ...v1.Layer) string {
	return pullBusyboxB(t, home, name, extra...)
}

func pullBusyboxB(t testing.TB, home, name string, extra ...v1.Layer) string {
	t.Helper()
	reg := ocitest.NewRegistry(t)
	ref := reg.Push(t, "team/busybox:"+name, ocitest.Image(t, "amd64", []string{"PATH=/bin"}, append(busyboxLayers(t), extra...)...))
	var out, errOut bytes.Buffer
	if code := Main([]string{"--home", home, "image", "pull", "--arch", "amd64", "--name", name, ref}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("image pull: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	return ref
}

// TestProvisionedImage builds an image from a pulled one and a setup step
// run in a builder VM: the step's files, and its deletion of a file of the
// base, are in the new image; a step that reaches for a host nobody
// allowed fails with the proxy's 403 in its output, and nothing is kept.
func TestProvisionedImage(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	base := "t-prov-base"
	pullBusybox(t, home, base, ocitest.Layer(t, ocitest.Entry{Name: "etc/keep", Body: "kept\n"}))

	name := "t-prov-built"
	code, out, errOut := airlockCLI(t, home, "image", "build", "--arch", "amd64", name, "--from", base,
		"--run", "echo provisioned > /etc/provisioned && rm /etc/keep && mkdir -p /opt/built && echo $STEP_VAR > /opt/built/f",
		"--run", "echo second step")
	if code != 0 {
		t.Fatalf("image build --from: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "built image "+name) || !strings.Contains(errOut, "second step") {
		t.Errorf("image build says:\n%s%s", out, errOut)
	}
	code, out, errOut = airlockCLI(t, home, "exec", "--arch", "amd64", "--image", name, "--", "sh", "-c",
		"cat /etc/provisioned; ls /etc; ls /opt/built")
	if code != 0 {
		t.Fatalf("exec on the built image: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "provisioned\n") || strings.Contains(out, "keep") || !strings.Contains(out, "f\n") {
		t.Errorf("the built image lacks the step's changes:\n%s", out)
	}
	record := filepath.Join(home, "builds", name)
	if b, err := os.ReadFile(filepath.Join(record, "output.log")); err != nil || !strings.Contains(string(b), "second step") {
		t.Errorf("build output.log: %v %q", err, b)
	}

	bad := "t-prov-denied"
	code, out, errOut = airlockCLI(t, home, "image", "build", "--arch", "amd64", bad, "--from", base,
		"--run", "wget -O- http://deb.debian.org/debian/")
	if code == 0 {
		t.Fatalf("a step reaching a host nobody allowed succeeded:\n%s%s", out, errOut)
	}
	if !strings.Contains(errOut, "403") || !strings.Contains(errOut, "provisioning step 1") || !strings.Contains(errOut, "nothing was kept") {
		t.Errorf("the failed step's message:\n%s", errOut)
	}
	if _, err := os.Stat(filepath.Join(home, "images", bad)); err == nil {
		t.Error("a failed build left an image")
	}
	audit, _ := os.ReadFile(filepath.Join(home, "builds", bad, "audit.jsonl"))
	if !strings.Contains(string(audit), "deb.debian.org") {
		t.Errorf("the denied request is not in the build's audit log:\n%s", audit)
	}
}

// TestProjectEnvironment runs a project whose .devcontainer/devcontainer.json
// names an image (from a registry on loopback) and a postCreateCommand:
// the first run asks for confirmation (naming its start commands and
// /etc/hosts entries too), then builds the environment once in a VM and
// runs in it (the environment's variables set, its postStartCommand and
// postAttachCommand run before the command, in the agent's jail, its
// runArgs --add-host names resolving in the VM, host-gateway to the VM
// itself, its verify command passing there); the second run reuses the
// image, starts warm, and runs the start commands again.
func TestProjectEnvironment(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	reg := ocitest.NewRegistry(t)
	ref := reg.Push(t, "team/env:1", ocitest.Image(t, "amd64", []string{"PATH=/bin"}, busyboxLayers(t)...))
	proj := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proj, ".devcontainer"), 0o755); err != nil {
		t.Fatal(err)
	}
	dc := `{
  // the project's own environment
  "image": "` + ref + `",
  "containerEnv": {"PROJECT_ENV": "from-devcontainer"},
  "postCreateCommand": ["sh", "-c", "echo built-in-vm > /etc/envfile"],
  // run in every sandbox before its command, in the agent's jail
  "postStartCommand": "echo started-$PROJECT_ENV >> started.log",
  "postAttachCommand": ["sh", "-c", "echo attached >> started.log; if touch /etc/unjailed 2>/dev/null; then echo NOT-JAILED; fi"],
  "runArgs": ["--add-host", "db.internal:192.0.2.10", "--add-host=host.docker.internal:host-gateway"],
  "forwardPorts": [3000], /* not for Airlock */
}`
	if err := os.WriteFile(filepath.Join(proj, ".devcontainer", "devcontainer.json"), []byte(dc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The busybox image has no resolver of its own (its static libc
	// cannot load NSS modules): Go's, in the guest agent, dials the name,
	// and says the address it resolved.
	resolve := func(name string) string {
		return "HTTP_PROXY= AIRLOCK_DEMO_API=http://" + name + ":9 /init demo-agent -p x 2>&1 | grep -o 'dial tcp [0-9.]*:9'; "
	}
	args := []string{"run", "--arch", "amd64", "--project", proj, "--disk", "none", "--verify", "test -f /etc/envfile",
		"--", "sh", "-c", "cat /etc/envfile; echo env=$PROJECT_ENV; cat started.log; " + resolve("db.internal") + resolve("host.docker.internal")}
	code, out, errOut := airlockCLI(t, home, args...)
	if code == 0 || !strings.Contains(errOut, "airlock trust "+proj) || !strings.Contains(errOut, "postCreateCommand: sh -c") ||
		!strings.Contains(errOut, "postStartCommand: echo started-$PROJECT_ENV >> started.log (in every sandbox") ||
		!strings.Contains(errOut, "/etc/hosts in every sandbox: 192.0.2.10 db.internal") {
		t.Fatalf("an unconfirmed environment's setup ran, or the refusal does not say how to confirm: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "forwardPorts") {
		t.Errorf("the unsupported key is not named in a warning:\n%s", errOut)
	}
	code, out, errOut = airlockCLI(t, home, "trust", proj)
	if code != 0 || !strings.Contains(out, "Trusted the environment of .devcontainer/devcontainer.json") {
		t.Fatalf("trust: exit %d\n%s%s", code, out, errOut)
	}
	for round := range 2 {
		code, out, errOut = airlockCLI(t, home, args...)
		if code != 0 {
			t.Fatalf("run %d: exit %d\n%s%s", round, code, out, errOut)
		}
		all := out + errOut
		for _, want := range []string{"built-in-vm", "env=from-devcontainer", "environment: .devcontainer/devcontainer.json, image env-",
			"verify test -f /etc/envfile: passed", "\nstarted-from-devcontainer\nattached\n",
			"dial tcp 192.0.2.10:9", "dial tcp 127.0.0.1:9"} {
			if !strings.Contains(all, want) {
				t.Errorf("run %d lacks %q:\n%s", round, want, all)
			}
		}
		if strings.Count(out, "started-") != 1 || strings.Contains(out, "NOT-JAILED") {
			t.Errorf("run %d: the start commands ran other than once each, in the agent's jail:\n%s", round, out)
		}
		built := strings.Contains(errOut, "building the environment")
		if round == 0 && !built || round == 1 && built {
			t.Errorf("run %d: built the environment: %v\n%s", round, built, errOut)
		}
		if round == 1 && strings.Contains(errOut, "cold boot") {
			t.Errorf("the second sandbox of the environment booted cold:\n%s", errOut)
		}
	}
	code, out, _ = airlockCLI(t, home, "env", "ls")
	if code != 0 || !strings.Contains(out, proj+" .devcontainer/devcontainer.json") {
		t.Errorf("env ls: exit %d\n%s", code, out)
	}
}

// TestGoProjectEnvironment is a Go project whose tests need Go: its
// airlock.toml [environment] names a Debian image (a layer made from
// Debian packages, served on loopback) and packages, which a builder VM
// installs through the egress proxy (@debian). The project's verify, go
// test ./..., passes in its environment and fails on the agent image,
// which has no Go. The image has Go already (golang-go is apt's to find
// installed): unpacking the toolchain in a builder VM took 15 minutes
// under QEMU without KVM; hello, a small package, is what apt installs
// there, and the verify runs it.
func TestGoProjectEnvironment(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	full := testenv.FullImage(t, vm.AMD64)
	reg := ocitest.NewRegistry(t)
	ref := reg.Push(t, "library/golang:bookworm", ocitest.Image(t, "amd64",
		[]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, ocitest.LayerFromFile(t, testenv.DebianEnv(t))))
	proj := t.TempDir()
	for name, body := range map[string]string{
		"airlock.toml": "[environment]\nimage = \"" + ref + "\"\napt = [\"golang-go\", \"hello\"]\n",
		"go.mod":       "module example.com/sum\n\ngo 1.19\n",
		"sum.go":       "package sum\n\nfunc Sum(a, b int) int { return a + b }\n",
		"sum_test.go":  "package sum\n\nimport \"testing\"\n\nfunc TestSum(t *testing.T) {\n\tif Sum(2, 3) != 5 {\n\t\tt.Fatal(\"2+3\")\n\t}\n}\n",
	} {
		if err := os.WriteFile(filepath.Join(proj, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	code, out, errOut := airlockCLI(t, home, "env", "build", "--arch", "amd64", "--trust-project", proj)
	if code != 0 {
		t.Fatalf("env build: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("pulled and built the Go environment in %s", time.Since(start).Round(time.Second))
	if !strings.Contains(errOut, "deb.debian.org") {
		t.Errorf("apt's requests through the proxy are not shown:\n%s", errOut)
	}
	verify := func(cmd string) []string {
		return []string{"--arch", "amd64", "--project", proj, "--verify", cmd, "--", "true"}
	}
	code, out, errOut = airlockCLI(t, home, append([]string{"run"}, verify("hello && go test ./...")...)...)
	if code != 0 || !strings.Contains(out+errOut, "verify hello && go test ./...: passed") {
		t.Errorf("hello and go test in the project's environment: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = airlockCLI(t, home, append([]string{"run", "--image", full.Name}, verify("go test ./...")...)...)
	if !strings.Contains(out+errOut, "verify go test ./...: FAILED") {
		t.Errorf("go test passed on the agent image, which has no Go: exit %d\n%s%s", code, out, errOut)
	}
}
