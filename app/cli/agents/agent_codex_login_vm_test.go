package agents

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/cli/clitest"
	"github.com/airlock-dev/airlock/testkit/fakevendor"
)

// TestCodexCLIChatGPT: the real Codex CLI from the full image, signed
// in with a ChatGPT plan on the host (its ~/.codex/auth.json), completes
// the task against chatgpt.com's backend through the egress proxy. The
// proxy puts the access token on every request; the refresh token and
// the real id_token never reach the guest, and the host's sign-in, fresh
// enough for the run, is not refreshed.
func TestCodexCLIChatGPT(t *testing.T) {
	const account = "acct-airlock-test"
	refresh := "rt-airlock-test-" + clitest.RandomHex(t, 24)
	idSignature := "sig-airlock-test-" + clitest.RandomHex(t, 24)
	idSubject := "sub-airlock-test-" + clitest.RandomHex(t, 12)
	enc := base64.RawURLEncoding
	claims, _ := json.Marshal(map[string]any{
		"email": "ada@example.com", "sub": idSubject,
		"https://api.openai.com/auth": map[string]any{"chatgpt_plan_type": "plus", "chatgpt_user_id": "user-airlock-test", "chatgpt_account_id": account},
	})
	idToken := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString(claims) + "." + idSignature

	// The host must not refresh a sign-in refreshed just now.
	tokenURL := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the host refreshed a fresh sign-in: %s %s", r.Method, r.URL)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer tokenURL.Close()
	t.Setenv("CODEX_REFRESH_TOKEN_URL_OVERRIDE", tokenURL.URL)
	t.Setenv("CODEX_HOME", "")

	var authFile string
	var authData []byte
	_, srv := clitest.AgentCLITest(t, clitest.AgentCase{
		Agent:  "codex",
		Vendor: &fakevendor.ChatGPT{},
		Login: func(t *testing.T, home, token string) {
			authFile = filepath.Join(home, ".codex", "auth.json")
			var err error
			authData, err = json.Marshal(map[string]any{
				"auth_mode": "chatgpt", "OPENAI_API_KEY": nil,
				"tokens":       map[string]any{"id_token": idToken, "access_token": token, "refresh_token": refresh, "account_id": account},
				"last_refresh": time.Now().UTC(),
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(authFile), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(authFile, authData, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		Credential: func(r fakevendor.Request) string {
			return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		},
		Hidden: []string{refresh, idToken, idSignature, idSubject},
		Model: func(r fakevendor.Request) bool {
			return r.Method == http.MethodPost && r.Path == "/backend-api/codex/responses"
		},
	})
	t.Logf("requests of both rounds:\n%s", clitest.RequestList(srv))
	for _, r := range srv.Requests() {
		if got := r.Header.Get("ChatGPT-Account-ID"); got != account {
			t.Errorf("%s %s%s carried ChatGPT-Account-ID %q, want %q", r.Method, r.Host, r.Path, got, account)
		}
		for _, s := range []string{refresh, idSignature, idSubject} {
			var all bytes.Buffer
			r.Header.Write(&all)
			all.Write(r.Body)
			if bytes.Contains(all.Bytes(), []byte(s)) {
				t.Errorf("%s %s%s carried a token that stays on the host", r.Method, r.Host, r.Path)
			}
		}
	}
	if after, err := os.ReadFile(authFile); err != nil || !bytes.Equal(after, authData) {
		t.Errorf("the host's %s changed during the run (%v)", authFile, err)
	}
}
