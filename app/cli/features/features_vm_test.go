package features

import (
	"archive/tar"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/cli/clitest"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/ocitest"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// helloInstall is the test feature's install.sh: it writes its options
// (one with a default, one given) and the user it is told of into a
// file, and puts a program on the PATH its containerEnv extends.
const helloInstall = `#!/bin/sh
set -e
mkdir -p /opt/hello/bin
printf 'greeting=%s\nfarewell=%s\nremote=%s home=%s\n' "$GREETING" "$FAREWELL" "$_REMOTE_USER" "$_REMOTE_USER_HOME" > /usr/local/share/hello.txt
cp ./hello /opt/hello/bin/hello
echo "hello feature installed"
`

const helloMeta = `{
  "id": "hello", "version": "1.0.0", "name": "Hello",
  "options": {
    "greeting": {"type": "string", "default": "hi"},
    "farewell": {"type": "string", "default": "bye"}
  },
  "containerEnv": {"HELLO_FILE": "/usr/local/share/hello.txt", "PATH": "/opt/hello/bin:${PATH}"}
}`

// TestFeatureInstalled builds a devcontainer.json environment on Debian
// with a feature served by the test's registry: refused, and nothing
// fetched, until confirmed (the prompt names the feature); then its
// install.sh runs in the builder VM with its options as variables (a
// value full of shell metacharacters reaches it as a value, never as
// shell text) and the run sees what it wrote and its containerEnv.
func TestFeatureInstalled(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	reg := ocitest.NewRegistry(t)
	base := reg.Push(t, "library/debian:bookworm-env", ocitest.Image(t, "amd64",
		[]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, ocitest.LayerFromFile(t, testenv.DebianEnv(t))))
	feat := reg.Push(t, "features/hello:1", ocitest.Feature(t, ocitest.Tar(t,
		ocitest.Entry{Name: "./", Type: tar.TypeDir},
		ocitest.Entry{Name: "./devcontainer-feature.json", Body: helloMeta},
		ocitest.Entry{Name: "./install.sh", Mode: 0o755, Body: helloInstall},
		ocitest.Entry{Name: "./hello", Mode: 0o755, Body: "#!/bin/sh\necho hello from the feature\n"})))

	proj := t.TempDir()
	dc, err := json.Marshal(map[string]any{
		"image":      base,
		"remoteUser": "root",
		"features":   map[string]any{feat: map[string]string{"greeting": `$(touch /pwned); "it's" ` + "`id`"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(proj, ".devcontainer"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, ".devcontainer", "devcontainer.json"), dc, 0o644); err != nil {
		t.Fatal(err)
	}

	// Unconfirmed: refused, the prompt names the feature and where its
	// install may reach, and nothing was fetched.
	before := reg.Requests()
	code, out, errOut := clitest.Run(t, home, nil, "run", "--arch", "amd64", "--project", proj, "--", "true")
	if code == 0 || !strings.Contains(errOut, "feature: "+feat+" (its install.sh run as root in the builder VM; it may reach @debian and the hosts below)") {
		t.Fatalf("an unconfirmed environment with a feature ran, or its prompt does not name the feature: exit %d\n%s%s", code, out, errOut)
	}
	if n := reg.Requests(); n != before {
		t.Errorf("the registry got %d requests before the environment was confirmed", n-before)
	}

	script := `cat "$HELLO_FILE"; echo "path=$PATH"; hello; if [ -e /pwned ]; then echo pwned; fi`
	start := time.Now()
	code, out, errOut = clitest.Run(t, home, nil, "run", "--arch", "amd64", "--json", "--trust-project", "--allow", "feature-downloads.example", "--project", proj, "--", "sh", "-c", script)
	t.Logf("run (feature fetched, environment built) in %s", time.Since(start).Round(time.Second))
	if code != 0 {
		t.Fatalf("run with a feature: exit %d\n%s%s", code, out, errOut)
	}
	var res struct {
		Sandbox string `json:"sandbox"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("run --json: %v\n%s", err, out)
	}
	st, err := sandbox.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := st.Get(res.Sandbox)
	if err != nil {
		t.Fatal(err)
	}
	transcript, err := os.ReadFile(sb.Path(sandbox.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"greeting=$(touch /pwned); \"it's\" `id`\n", // the option, as a value
		"farewell=bye\n", // the default from devcontainer-feature.json
		"remote=root home=/root\n",
		"path=/opt/hello/bin:/usr/local/sbin:", // containerEnv, ${PATH} expanded
		"hello from the feature",
	} {
		if !strings.Contains(string(transcript), want) {
			t.Errorf("the run's transcript lacks %q:\n%s", want, transcript)
		}
	}
	if strings.Contains(string(transcript), "pwned\n") {
		t.Errorf("an option's value ran as shell text:\n%s", transcript)
	}
	if !strings.Contains(errOut, "hello feature installed") {
		t.Errorf("the build's output lacks the install's:\n%s", errOut)
	}
	// The build's network: @debian for the feature, and the host the
	// user allowed on the command line.
	audits, _ := filepath.Glob(filepath.Join(home, "builds", "env-*", "audit.jsonl"))
	if len(audits) != 1 {
		t.Fatalf("builds: %v", audits)
	}
	audit, err := os.ReadFile(audits[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"deb.debian.org", "feature-downloads.example"} {
		if !strings.Contains(string(audit), want) {
			t.Errorf("the build's policy does not allow %s:\n%s", want, audit)
		}
	}
}
