package docker

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/cli"
	"github.com/airlock-dev/airlock/app/cli/clitest"
	"github.com/airlock-dev/airlock/testkit/fakevendor"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// TestDockerfileEnvironment builds a project's devcontainer.json in the
// Dockerfile form: the build runs in a builder VM with Docker (on the
// Debian base with the engine installed, so nothing is installed for
// the builder), its FROM pulled from Docker Hub through Airlock's proxy
// (the test's registry under Docker Hub's name), a build argument and a
// COPY of the context used, and a RUN step fetching through a host the
// environment allows; the run boots the image Docker made, with its ENV
// and WORKDIR. The second run builds nothing and fetches nothing. A
// Dockerfile whose ADD fetches a URL that is not allowed fails the
// build with the proxy's refusal, and a secret file of the context never
// reaches the builder.
func TestDockerfileEnvironment(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	builder, hub := dockerRegistries(t)
	if code, out, errOut := clitest.Run(t, home, nil, "image", "pull", "--insecure", "--arch", "amd64", "--name", "dockerbase", builder); code != 0 {
		t.Fatalf("pull the builder's base: exit %d\n%s%s", code, out, errOut)
	}
	files := startFiles(t)
	opts := []cli.Option{cli.WithBuildNetwork(files.dial(hub), hub.RootCAs, "dockerbase")}

	proj := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		p := filepath.Join(proj, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".devcontainer/devcontainer.json", `{
  // the Dockerfile form, its context the project
  "build": {"dockerfile": "Dockerfile", "context": "..", "args": {"GREETING": "hello-from-build-args"}},
}`)
	write(".devcontainer/Dockerfile", `FROM airlock-test/bb:1
ARG GREETING
RUN echo "$GREETING" > /greeting && wget -q -O /fetched http://files.airlock.test/file
COPY hello.txt /hello.txt
RUN if [ -e /ctx/.env ]; then echo the-secret-reached-the-builder; exit 1; fi
ENV FROM_DOCKERFILE=yes
WORKDIR /srv
`)
	// The images are shared between test homes: a context of its own
	// makes this test's build its own.
	write("hello.txt", "copied-from-the-context\n")
	write("nonce", fmt.Sprint(time.Now().UnixNano()))
	write(".env", "TOKEN=never-in-a-vm\n")

	// The run's --allow is the build's too: the RUN step's host.
	// The command runs in the workspace, as always; the image's WORKDIR
	// was made by the build.
	script := "cat /greeting /fetched /hello.txt; echo env=$FROM_DOCKERFILE; pwd; test -d /srv && echo srv-made"
	start := time.Now()
	code, out, errOut := clitest.Run(t, home, opts, "run", "--arch", "amd64", "--trust-project", "--allow", "files.airlock.test", "--project", proj, "--", "sh", "-c", script)
	t.Logf("first run (builder made, Dockerfile built) in %s", time.Since(start).Round(time.Second))
	logPhases(t, errOut)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"hello-from-build-args", "files-served /file", "copied-from-the-context", "env=yes", "/workspace", "srv-made"} {
		if !strings.Contains(out, want) {
			t.Errorf("the run's output lacks %q:\n%s\n%s", want, out, errOut)
		}
	}
	if !strings.Contains(errOut, "leaves out 1 file Airlock treats as secrets (.env)") {
		t.Errorf("the secret left out of the context is not said:\n%s", errOut)
	}
	if files.count() != 1 {
		t.Errorf("the RUN step fetched %d times, want once", files.count())
	}

	// Again: nothing is built or fetched.
	before := len(hub.Requests())
	start = time.Now()
	code, out, errOut = clitest.Run(t, home, opts, "run", "--arch", "amd64", "--allow", "files.airlock.test", "--project", proj, "--", "sh", "-c", script)
	t.Logf("second run in %s", time.Since(start).Round(time.Second))
	if code != 0 || !strings.Contains(out, "copied-from-the-context") {
		t.Fatalf("second run: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(errOut, "builder") || len(hub.Requests()) != before || files.count() != 1 {
		t.Errorf("the second run built or fetched again (%d registry requests, %d fetches):\n%s", len(hub.Requests())-before, files.count(), errOut)
	}

	// An ADD of a URL the environment does not allow: the proxy refuses
	// it, and the build fails saying so.
	write(".devcontainer/Dockerfile", "FROM airlock-test/bb:1\nADD http://blocked.airlock.test/payload /payload\n")
	start = time.Now()
	code, out, errOut = clitest.Run(t, home, opts, "run", "--arch", "amd64", "--trust-project", "--allow", "files.airlock.test", "--project", proj, "--", "true")
	t.Logf("the refused build in %s", time.Since(start).Round(time.Second))
	if code == 0 || !strings.Contains(errOut, "403") || !strings.Contains(errOut, "docker build .devcontainer/Dockerfile") {
		t.Errorf("an ADD of a URL not allowed: exit %d\n%s%s", code, out, errOut)
	}
	if files.count() != 1 {
		t.Errorf("the refused URL was fetched (%d fetches in all):\n%s", files.count(), errOut)
	}
}

// logPhases logs where a build's time went (its ### lines).
func logPhases(t *testing.T, errOut string) {
	for _, l := range strings.Split(errOut, "\n") {
		if strings.HasPrefix(l, "###") || strings.Contains(l, "cold boot") {
			t.Logf("  %s", l)
		}
	}
}

// files is a plain-HTTP server the tests' containers and builds fetch
// from through Airlock's proxy, as files.airlock.test (and, to see that
// nothing reaches it, blocked.airlock.test): it answers "files-served
// PATH" and counts the requests.
type files struct {
	srv *httptest.Server
	n   atomic.Int32
}

func startFiles(t *testing.T) *files {
	f := &files{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.n.Add(1)
		fmt.Fprintln(w, "files-served", r.URL.Path)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *files) count() int32 { return f.n.Load() }

// dial is the proxy's upstream: the file server's names to it, the rest
// to hub.
func (f *files) dial(hub *fakevendor.Server) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		switch host, _, _ := net.SplitHostPort(addr); host {
		case "files.airlock.test", "blocked.airlock.test", "not-allowed.airlock.test":
			var d net.Dialer
			return d.DialContext(ctx, network, f.srv.Listener.Addr().String())
		}
		return hub.Dial(ctx, network, addr)
	}
}
