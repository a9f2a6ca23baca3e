package agents

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/cli/clitest"
	"github.com/airlock-dev/airlock/testkit/fakevendor"
)

// TestCodexCLI: the real Codex CLI from the full image completes the
// task through the egress proxy against the Responses API's fake, its
// CODEX_API_KEY injected as Authorization: Bearer.
func TestCodexCLI(t *testing.T) {
	_, srv := clitest.AgentCLITest(t, clitest.AgentCase{
		Agent:  "codex",
		Vendor: &fakevendor.OpenAI{},
		Secret: "CODEX_API_KEY",
		Credential: func(r fakevendor.Request) string {
			return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		},
		Model: func(r fakevendor.Request) bool { return r.Method == http.MethodPost && r.Path == "/v1/responses" },
	})
	// Each round: Codex's request for a WebSocket, refused, then the
	// model over HTTPS with the tools it declares; the answers carry the
	// CLI's own apply_patch and shell tools (the first request of a
	// round asks for them, the next carries their output).
	t.Logf("requests of both rounds:\n%s", clitest.RequestList(srv))
	sawPatch := false
	for _, r := range srv.Requests() {
		if ua := r.Header.Get("User-Agent"); !strings.HasPrefix(ua, "codex_exec/") {
			t.Errorf("%s %s%s came from %q, want codex exec", r.Method, r.Host, r.Path, ua)
		}
		if r.Method == http.MethodPost && bytes.Contains(r.Body, []byte(`*** Add File: `+clitest.AgentScript.File)) {
			sawPatch = true
		}
	}
	if !sawPatch {
		t.Errorf("no model request carried the apply_patch call back:\n%s", clitest.RequestList(srv))
	}
}
