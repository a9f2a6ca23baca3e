// Package clitest is the kit that app/cli's test packages share: Run,
// the command line in-process on a home of the test's; Main, the TestMain
// that lets a test binary act as airlock for the VM supervisors it spawns;
// Run's check at a test's end that every sandbox's audit log it left
// verifies (app/cli/clitest/auditcheck); and the agent CLIs' proof (AgentCLITest: a real CLI of the full image
// against its fake vendor through the egress proxy) that app/cli/agents
// and app/cli/gemini both run. It reaches app/cli through its exported API
// only; the tests that boot VMs live in app/cli's sub-packages by subject,
// so that go test runs them side by side.
//
// It is for tests only: like testkit/testenv and testkit/fakevendor,
// which it imports, no program may import it. It must not import app/gui
// or fyne (like app/cli).
package clitest

import (
	"bytes"
	"github.com/airlock-dev/airlock/app/cli/clitest/auditcheck"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/cli"
)

// AsAirlockEnv makes a re-executed test binary act as airlock itself: the
// VM supervisors that exec and run spawn (os.Executable() vmhost DIR) are
// the test binary, so it must run cli.Main for them.
const AsAirlockEnv = "AIRLOCK_CLI_TEST_AS_AIRLOCK"

// Main is the TestMain of a package whose tests run airlock in-process:
// run as a VM supervisor (AsAirlockEnv set), the binary is airlock;
// otherwise it sets AsAirlockEnv for the processes it spawns and runs
// the tests.
func Main(m *testing.M) {
	if os.Getenv(AsAirlockEnv) == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Setenv(AsAirlockEnv, "1")
	os.Exit(m.Run())
}

// Run runs airlock with args on home, no input, and opts; at the end of
// t, every sandbox's audit log in home must verify (auditcheck.AtEnd).
func Run(t testing.TB, home string, opts []cli.Option, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return RunIn(t, home, strings.NewReader(""), opts, args...)
}

// RunIn runs airlock with args on home, reading stdin, with opts.
func RunIn(t testing.TB, home string, stdin io.Reader, opts []cli.Option, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	auditcheck.AtEnd(t, home)
	var out, errOut bytes.Buffer
	code = cli.Main(append([]string{"--home", home}, args...), stdin, &out, &errOut, opts...)
	return code, out.String(), errOut.String()
}
