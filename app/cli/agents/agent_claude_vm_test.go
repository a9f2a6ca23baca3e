package agents

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/cli/clitest"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/fakevendor"
)

// claudeModel says whether r is a call of Claude Code's model (the
// others are its start-up requests for the organization's policy limits
// and managed settings).
func claudeModel(r fakevendor.Request) bool { return r.Path == "/v1/messages" }

// TestClaudeCLI: Claude Code from the full image, signed in with an API
// key, completes the task through the egress proxy: the key reaches
// api.anthropic.com as x-api-key on every request.
func TestClaudeCLI(t *testing.T) {
	sb, srv := clitest.AgentCLITest(t, clitest.AgentCase{
		Agent:      "claude",
		Vendor:     fakevendor.Anthropic{},
		Secret:     "ANTHROPIC_API_KEY",
		Value:      "sk-ant-api03-airlock-test-" + clitest.RandomHex(t, 24),
		Credential: func(r fakevendor.Request) string { return r.Header.Get("x-api-key") },
		Model:      claudeModel,
	})
	t.Logf("requests of the run and the reply:\n%s", clitest.RequestList(srv))
	checkClaudeEgress(t, sb)
	for _, r := range srv.Requests() {
		if a := r.Header.Get("Authorization"); a != "" {
			t.Errorf("%s %s carried Authorization %q besides the API key", r.Method, r.Path, clitest.Abbreviate(a))
		}
	}
}

// TestClaudeCLISubscription: Claude Code signed in with a subscription's
// long-lived token (claude setup-token) in CLAUDE_CODE_OAUTH_TOKEN sends
// it as "Authorization: Bearer", with the oauth beta on its model calls;
// the proxy puts the real token there, and the VM only ever has the
// placeholder.
func TestClaudeCLISubscription(t *testing.T) {
	sb, srv := clitest.AgentCLITest(t, clitest.AgentCase{
		Agent:  "claude",
		Vendor: fakevendor.Anthropic{},
		Secret: "CLAUDE_CODE_OAUTH_TOKEN",
		Value:  "sk-ant-oat01-airlock-test-" + clitest.RandomHex(t, 24),
		Credential: func(r fakevendor.Request) string {
			token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok {
				return ""
			}
			return token
		},
		Model: claudeModel,
	})
	t.Logf("requests of the run and the reply:\n%s", clitest.RequestList(srv))
	checkClaudeEgress(t, sb)
	for _, r := range srv.Requests() {
		if k := r.Header.Get("x-api-key"); k != "" {
			t.Errorf("%s %s carried x-api-key %q besides the token", r.Method, r.Path, clitest.Abbreviate(k))
		}
		if claudeModel(r) && !strings.Contains(r.Header.Get("anthropic-beta"), "oauth-2025-04-20") {
			t.Errorf("%s %s lacks the oauth beta (anthropic-beta: %q): Claude Code did not take the token as a subscription's", r.Method, r.Path, r.Header.Get("anthropic-beta"))
		}
	}
}

// checkClaudeEgress: with the preset's environment Claude Code needs no
// host but api.anthropic.com; every request the proxy saw in the run and
// the reply (its audit log) was allowed and went there.
func checkClaudeEgress(t *testing.T, sb *sandbox.Sandbox) {
	t.Helper()
	for _, rec := range clitest.EgressRecords(t, sb) {
		if !rec.Allowed || rec.Host != "api.anthropic.com" {
			t.Errorf("Claude Code asked for more than api.anthropic.com: %s (the preset's hosts or env need a look)", rec)
		}
	}
}
