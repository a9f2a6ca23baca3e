package gemini

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/cli/clitest"
	"github.com/airlock-dev/airlock/testkit/fakevendor"
)

// TestGeminiCLI: the real Gemini CLI from the full image completes the
// task through the egress proxy with its API key injected as the
// x-goog-api-key header (the CLI's default; never ?key= in the URL). The
// CLI reaches the proxy by HTTPS_PROXY itself: it hands the variable to
// its own fetch dispatcher (packages/core setGlobalProxy).
func TestGeminiCLI(t *testing.T) {
	sb, srv := clitest.AgentCLITest(t, clitest.AgentCase{
		Agent:  "gemini",
		Vendor: fakevendor.Gemini{},
		Secret: "GEMINI_API_KEY",
		Credential: func(r fakevendor.Request) string {
			if strings.Contains(r.Query, "key=") {
				return "a key in the URL's query: " + r.Query
			}
			return r.Header.Get("x-goog-api-key")
		},
		Model: func(r fakevendor.Request) bool {
			return strings.HasSuffix(r.Path, ":streamGenerateContent")
		},
	})
	// What the CLI sent, both rounds, and what the proxy let through or
	// refused (its usage statistics go to play.googleapis.com).
	t.Logf("requests of both rounds:\n%s", clitest.RequestList(srv))
	clitest.EgressRecords(t, sb)
}
