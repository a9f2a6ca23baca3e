package agents

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/cli"
	"github.com/airlock-dev/airlock/app/cli/clitest"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/fakevendor"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// agentRound runs one round of agent's real CLI from the full image
// against srv, signed in with secret (a variable) and flags, and returns
// how it ended and its sandbox (nil when none was made).
func agentRound(t *testing.T, agent, secret string, srv *fakevendor.Server, flags ...string) (code int, out, errOut string, sb *sandbox.Sandbox) {
	t.Helper()
	h, _ := clitest.FullHome(t)
	proj := t.TempDir()
	if err := os.WriteFile(filepath.Join(proj, "README.md"), []byte("# A small project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "CODEX_API_KEY", "GEMINI_API_KEY"} {
		t.Setenv(k, "")
	}
	t.Setenv(secret, "sk-airlock-test-"+clitest.RandomHex(t, 24))
	args := append([]string{"--json", "run", "--arch", "amd64", "--project", proj, "--agent", agent, "--prompt", "Write notes/hello.txt and run the shell check."}, flags...)
	code, out, errOut = clitest.Run(t, h, []cli.Option{clitest.UpstreamHook(srv)}, args...)
	st, err := sandbox.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	list, err := st.List()
	if err != nil || len(list) == 0 {
		return code, out, errOut, nil
	}
	sb, err = st.Get(list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return code, out, errOut, sb
}

// TestAgentCLITimeLimit: a model that never answers leaves the CLI
// waiting; the run's time limit ends it, airlock exits 124, and what the
// agent wrote before is in the review.
func TestAgentCLITimeLimit(t *testing.T) {
	testenv.SkipIfShort(t)
	srv := fakevendor.Start(t, clitest.AgentScript, &fakevendor.OpenAI{})
	srv.Stall(clitest.ShellOutput) // the turn carrying the tools' results
	code, out, errOut, sb := agentRound(t, "codex", "CODEX_API_KEY", srv, "--timeout", "90s")
	if code != sandbox.TimeoutExitCode || sb == nil {
		t.Fatalf("a stalled agent: exit %d, want %d\n%s\n%s\nrequests:\n%s", code, sandbox.TimeoutExitCode, out, errOut, clitest.RequestList(srv))
	}
	cs, err := sb.Changeset(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{clitest.AgentScript.File: clitest.AgentScript.Content, "shell.out": clitest.ShellOutput + "\n"} {
		if f := cs.File(path); f == nil || string(f.NewContent()) != want {
			t.Errorf("the work before the time limit: %s is %v, want %q", path, f, want)
		}
	}
}

// TestAgentCLIVendorError: a vendor answering 429 to every model call;
// the CLI gives up (after one retry here, where it would take ten over
// minutes) and its transcript shows the vendor's error as the vendor
// sent it.
func TestAgentCLIVendorError(t *testing.T) {
	testenv.SkipIfShort(t)
	srv := fakevendor.Start(t, clitest.AgentScript, fakevendor.Anthropic{})
	const message = "the scripted vendor is rate limiting you (fake 429)"
	for range 10 {
		srv.Fail(429, message)
	}
	code, out, errOut, sb := agentRound(t, "claude", "ANTHROPIC_API_KEY", srv, "--env", "CLAUDE_CODE_MAX_RETRIES=1")
	if code == 0 || sb == nil {
		t.Fatalf("every model call failed, yet exit %d\n%s\n%s", code, out, errOut)
	}
	tr, err := sb.Transcript()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(tr), "429") || !strings.Contains(string(tr), message) {
		t.Errorf("the transcript does not show the vendor's 429 with its message %q:\n%s\nrequests:\n%s", message, tr, clitest.RequestList(srv))
	}
	t.Logf("%d requests; transcript:\n%s", len(srv.Requests()), tr)
}

// TestAgentCLIRejectedCredential: the vendor refuses the key (401). The
// CLI says so in its own words, and airlock says which credential the
// vendor rejected (not a proxy failure), even with --json.
func TestAgentCLIRejectedCredential(t *testing.T) {
	testenv.SkipIfShort(t)
	srv := fakevendor.Start(t, clitest.AgentScript, fakevendor.Anthropic{})
	const message = "invalid x-api-key (scripted)"
	for range 10 {
		srv.Fail(401, message)
	}
	// One retry (Claude Code retries a 401 ten times over minutes).
	code, out, errOut, sb := agentRound(t, "claude", "ANTHROPIC_API_KEY", srv, "--env", "CLAUDE_CODE_MAX_RETRIES=1")
	if code == 0 || sb == nil {
		t.Fatalf("a rejected key, yet exit %d\n%s\n%s", code, out, errOut)
	}
	tr, _ := sb.Transcript()
	// Claude Code words it as its own ("Invalid API key"), with the
	// vendor's status.
	if !strings.Contains(string(tr), `"api_error_status":401`) || !strings.Contains(string(tr), "Invalid API key") {
		t.Errorf("the transcript does not show the vendor's 401:\n%s", tr)
	}
	if want := "api.anthropic.com answered 401: it rejected the credential, check the value of ANTHROPIC_API_KEY"; !strings.Contains(errOut, want) {
		t.Errorf("airlock did not say %q:\n%s", want, errOut)
	}
	if strings.Contains(errOut, "502") || strings.Contains(errOut, "DENIED") {
		t.Errorf("the vendor's refusal looks like the proxy's:\n%s", errOut)
	}
}
