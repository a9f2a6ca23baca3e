package gemini

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/cli/clitest"
	"github.com/airlock-dev/airlock/testkit/fakevendor"
)

// TestGeminiCLIGoogle: the real Gemini CLI from the full image, signed in
// with the Google account of the host's CLI (~/.gemini/oauth_creds.json,
// no API key), completes the task against the Code Assist API through
// the egress proxy. The guest holds only GOOGLE_GENAI_USE_GCA and a
// placeholder as GOOGLE_CLOUD_ACCESS_TOKEN; every request reaches the
// vendor with the host's access token as its Bearer, and neither that
// token nor the refresh token is anywhere in the sandbox.
func TestGeminiCLIGoogle(t *testing.T) {
	refresh := "1//airlock-test-refresh-" + clitest.RandomHex(t, 24)
	var credsPath string
	var written []byte
	sb, srv := clitest.AgentCLITest(t, clitest.AgentCase{
		Agent:  "gemini",
		Vendor: fakevendor.CodeAssist{},
		Login: func(t *testing.T, home, token string) {
			t.Setenv("GEMINI_CLI_HOME", "")
			credsPath = filepath.Join(home, ".gemini", "oauth_creds.json")
			data, err := json.Marshal(map[string]any{
				"access_token": token, "refresh_token": refresh, "token_type": "Bearer",
				"scope":       "https://www.googleapis.com/auth/cloud-platform https://www.googleapis.com/auth/userinfo.email openid",
				"expiry_date": time.Now().Add(time.Hour).UnixMilli(),
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(credsPath), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(credsPath, data, 0o600); err != nil {
				t.Fatal(err)
			}
			written = data
		},
		Hidden: []string{refresh},
		Credential: func(r fakevendor.Request) string {
			return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		},
		Model: func(r fakevendor.Request) bool {
			return r.Path == "/v1internal:streamGenerateContent"
		},
	})
	// A token good for an hour is used as it is: the host's file is
	// untouched.
	if got, err := os.ReadFile(credsPath); err != nil || string(got) != string(written) {
		t.Errorf("the host's sign-in changed (%v):\n%s", err, got)
	}
	hosts := map[string]bool{}
	for _, r := range srv.Requests() {
		hosts[r.Host] = true
	}
	if !hosts["cloudcode-pa.googleapis.com"] {
		t.Errorf("no request reached the Code Assist API:\n%s", clitest.RequestList(srv))
	}
	clitest.EgressRecords(t, sb)
}
