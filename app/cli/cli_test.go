package cli

import (
	"bytes"
	"encoding/json"
	"github.com/airlock-dev/airlock/app/cli/clitest/auditcheck"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
)

// run runs the command line in-process with home as AIRLOCK_HOME.
func run(t *testing.T, home string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	auditcheck.AtEnd(t, home)
	var out, errOut bytes.Buffer
	code = Main(append([]string{"--home", home}, args...), strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"exec", "--help"}, {"image", "build", "--help"}, {"doctor", "--help"}} {
		code, out, _ := run(t, t.TempDir(), "", args...)
		if code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%v: exit %d, output %q", args, code, out)
		}
	}
}

func TestImageLsEmpty(t *testing.T) {
	home := t.TempDir()
	code, out, _ := run(t, home, "", "image", "ls", "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("image ls --json on an empty home: exit %d, %q", code, out)
	}
	code, out, _ = run(t, home, "", "image", "ls")
	if code != 0 || !strings.Contains(out, "airlock image build") {
		t.Errorf("image ls on an empty home should say how to build one: exit %d, %q", code, out)
	}
}

func TestExecWithoutImage(t *testing.T) {
	code, _, errOut := run(t, t.TempDir(), "", "exec", "--", "true")
	if code != ExitError {
		t.Errorf("exit %d, want %d", code, ExitError)
	}
	if !strings.Contains(errOut, "airlock image build") {
		t.Errorf("error does not name the command that builds the image: %q", errOut)
	}
}

func TestUnknownImageName(t *testing.T) {
	code, _, errOut := run(t, t.TempDir(), "", "image", "build", "huge")
	if code != ExitError || !strings.Contains(errOut, "minimal") {
		t.Errorf("exit %d, stderr %q: want an error listing the images that can be built", code, errOut)
	}
}

func TestBadEnvFlag(t *testing.T) {
	code, _, errOut := run(t, t.TempDir(), "", "exec", "-e", "NOEQUALS", "--", "true")
	if code != ExitError || !strings.Contains(errOut, "NAME=VALUE") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// TestExecInVM runs the real command line against a real VM.
func TestExecInVM(t *testing.T) {
	testenv.SkipIfShort(t)
	testenv.Image(t, vm.AMD64)
	home := testenv.Home(t)

	t.Run("exit code passes through", func(t *testing.T) {
		code, out, errOut := run(t, home, "", "exec", "-q", "--arch", "amd64", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
		if code != 3 || out != "out\n" || errOut != "err\n" {
			t.Errorf("exit %d stdout %q stderr %q; want 3, \"out\\n\", \"err\\n\"", code, out, errOut)
		}
	})
	t.Run("json and stdin", func(t *testing.T) {
		code, out, errOut := run(t, home, "hello\n", "exec", "--json", "-i", "--arch", "amd64", "--", "tr", "a-z", "A-Z")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var res execResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("--json output %q: %v", out, err)
		}
		if res.Stdout != "HELLO\n" || res.ExitCode != 0 || res.Link == "" || res.BootMS <= 0 {
			t.Errorf("result %+v", res)
		}
	})
}
