package login

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/egress"
)

// testJWT is a JWT with claims and a signature nobody checks.
func testJWT(t *testing.T, claims map[string]any) string {
	t.Helper()
	p, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString(p) + ".c2lnbmF0dXJl"
}

// testIDClaims are a real-looking id_token's claims: those Codex reads
// and others the guest must not get.
var testIDClaims = map[string]any{
	"email": "ada@example.com",
	"sub":   "auth0|secret-subject",
	"iss":   "https://auth.openai.com",
	"exp":   time.Now().Add(time.Hour).Unix(),
	"https://api.openai.com/auth": map[string]any{
		"chatgpt_plan_type":  "plus",
		"chatgpt_user_id":    "user-123",
		"chatgpt_account_id": "acct-456",
		"organizations":      []any{map[string]any{"id": "org-secret"}},
	},
	"https://api.openai.com/profile": map[string]any{"email": "ada@example.com", "email_verified": true, "phone": "+1555"},
}

// codexHome writes a ChatGPT sign-in's auth.json under a new home and
// returns the home and the file.
func codexHome(t *testing.T, access, refresh string, lastRefresh time.Time) (Env, string) {
	t.Helper()
	home := t.TempDir()
	p := filepath.Join(home, ".codex", "auth.json")
	writeAuth(t, p, map[string]any{
		"auth_mode":      "chatgpt",
		"OPENAI_API_KEY": nil,
		"tokens": map[string]any{
			"id_token":      testJWT(t, testIDClaims),
			"access_token":  access,
			"refresh_token": refresh,
			"account_id":    "acct-456",
		},
		"last_refresh": lastRefresh,
		"kept_field":   "kept",
	})
	return Env{Home: home, Getenv: func(string) string { return "" }}, p
}

func writeAuth(t *testing.T, p string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, p, data)
}

func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func chatGPTLogin(t *testing.T) Login {
	t.Helper()
	l, ok := Lookup("chatgpt")
	if !ok {
		t.Fatalf("no chatgpt login among %v", Names())
	}
	return l
}

func TestChatGPTFind(t *testing.T) {
	l := chatGPTLogin(t)
	env, p := codexHome(t, "access", "refresh", time.Now())
	if where, ok := l.Find(env); !ok || where != p {
		t.Errorf("Find = %q, %v; want %q, true", where, ok, p)
	}

	// CODEX_HOME replaces ~/.codex.
	other := t.TempDir()
	withHome := Env{Home: env.Home, Getenv: func(k string) string {
		if k == "CODEX_HOME" {
			return other
		}
		return ""
	}}
	if where, ok := l.Find(withHome); ok {
		t.Errorf("Find with an empty CODEX_HOME = %q, true; want nothing", where)
	}
	data, _ := os.ReadFile(p)
	writeFile(t, filepath.Join(other, "auth.json"), data)
	if where, ok := l.Find(withHome); !ok || where != filepath.Join(other, "auth.json") {
		t.Errorf("Find with CODEX_HOME = %q, %v; want its auth.json", where, ok)
	}

	if where, ok := l.Find(Env{Home: t.TempDir()}); ok {
		t.Errorf("Find on a home without Codex = %q, true", where)
	}
	if where, ok := l.Find(Env{}); ok {
		t.Errorf("Find without a home = %q, true", where)
	}

	// An API key's auth.json is not this login.
	writeAuth(t, p, map[string]any{"auth_mode": "apikey", "OPENAI_API_KEY": "sk-test", "tokens": nil})
	if where, ok := l.Find(env); ok {
		t.Errorf("Find on an API key's auth.json = %q, true", where)
	}
}

// checkGuestFile: the guest's auth.json has the placeholders, none of
// the real tokens, and an unsigned id_token with only Codex's claims.
func checkGuestFile(t *testing.T, g *Grant, real ...string) {
	t.Helper()
	if len(g.Secrets) != 1 {
		t.Fatalf("secrets: %+v, want one", g.Secrets)
	}
	s := g.Secrets[0]
	if err := s.Validate(); err != nil {
		t.Errorf("the secret: %v", err)
	}
	if s.Host != "chatgpt.com" || s.Header != "Authorization" {
		t.Errorf("the secret goes to %s in %s, want chatgpt.com in Authorization", s.Host, s.Header)
	}
	if diff := cmp.Diff([]string{"chatgpt.com"}, g.Allow); diff != "" {
		t.Errorf("allow (-want +got):\n%s", diff)
	}
	if len(g.Files) != 1 || g.Files[0].Path != ".codex/auth.json" || g.Files[0].Mode != 0o600 {
		t.Fatalf("files: %+v, want .codex/auth.json 0600", g.Files)
	}
	f := g.Files[0]
	if err := f.Validate(); err != nil {
		t.Error(err)
	}
	for _, r := range real {
		if bytes.Contains(f.Data, []byte(r)) {
			t.Errorf("the guest's auth.json holds a real token %q:\n%s", r, f.Data)
		}
	}
	var got struct {
		AuthMode string  `json:"auth_mode"`
		APIKey   *string `json:"OPENAI_API_KEY"`
		Tokens   struct {
			IDToken, AccessToken, RefreshToken, AccountID string
		} `json:"tokens"`
		LastRefresh time.Time `json:"last_refresh"`
	}
	dec := json.NewDecoder(bytes.NewReader(f.Data))
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("the guest's auth.json: %v\n%s", err, f.Data)
	}
	var tokens map[string]string
	var raw struct{ Tokens json.RawMessage }
	json.Unmarshal(f.Data, &raw)
	json.Unmarshal(raw.Tokens, &tokens)
	if got.AuthMode != "chatgpt" || got.APIKey != nil {
		t.Errorf("auth_mode %q, OPENAI_API_KEY %v; want chatgpt, null", got.AuthMode, got.APIKey)
	}
	if tokens["access_token"] != s.Placeholder {
		t.Errorf("access_token %q, want the secret's placeholder %q", tokens["access_token"], s.Placeholder)
	}
	rt := tokens["refresh_token"]
	if !strings.HasPrefix(rt, egress.PlaceholderPrefix) || rt == s.Placeholder {
		t.Errorf("refresh_token %q: want a placeholder of its own, not the access token's %q", rt, s.Placeholder)
	}
	if tokens["account_id"] != "acct-456" {
		t.Errorf("account_id %q, want acct-456", tokens["account_id"])
	}
	if time.Since(got.LastRefresh) > time.Minute {
		t.Errorf("last_refresh %v, want now", got.LastRefresh)
	}
	parts := strings.Split(tokens["id_token"], ".")
	if len(parts) != 3 || parts[2] != base64.RawURLEncoding.EncodeToString([]byte(guestIDSignature)) {
		t.Fatalf("id_token %q: want an unsigned JWT", tokens["id_token"])
	}
	var header, claims map[string]any
	for i, v := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil || json.Unmarshal(b, v) != nil {
			t.Fatalf("id_token part %d: %q (%v)", i, b, err)
		}
	}
	if header["alg"] != "none" {
		t.Errorf("id_token header %v, want alg none", header)
	}
	want := map[string]any{
		"email":                          "ada@example.com",
		"https://api.openai.com/auth":    map[string]any{"chatgpt_plan_type": "plus", "chatgpt_user_id": "user-123", "chatgpt_account_id": "acct-456"},
		"https://api.openai.com/profile": map[string]any{"email": "ada@example.com", "email_verified": true},
	}
	if diff := cmp.Diff(want, claims); diff != "" {
		t.Errorf("id_token claims (-want +got):\n%s", diff)
	}
}

func TestChatGPTGrant(t *testing.T) {
	l := chatGPTLogin(t)
	access := testJWT(t, map[string]any{"exp": time.Now().Add(48 * time.Hour).Unix(), "scp": "openid"})
	env, p := codexHome(t, access, "rt-real-refresh", time.Now().Add(-time.Hour))
	env.Getenv = func(k string) string {
		if k == codexRefreshOverride {
			return "http://127.0.0.1:1/must-not-be-asked"
		}
		return ""
	}
	before, _ := os.ReadFile(p)
	g, err := l.Grant(t.Context(), env, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if g.Secrets[0].Value != access {
		t.Errorf("the secret's value is not the access token")
	}
	realID := testJWT(t, testIDClaims)
	checkGuestFile(t, g, access, "rt-real-refresh", realID, "secret-subject", "org-secret", "+1555")
	if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
		t.Errorf("a grant without refresh changed %s", p)
	}

	// A second grant has placeholders of its own.
	g2, err := l.Grant(t.Context(), env, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if g2.Secrets[0].Placeholder == g.Secrets[0].Placeholder {
		t.Error("two grants share a placeholder")
	}
}

// tokenEndpoint is a fake of auth.openai.com's token endpoint: it
// takes refresh token from and gives new tokens (or fails with status).
func tokenEndpoint(t *testing.T, from string, status int, answer any) (url string, calls *atomic.Int32) {
	t.Helper()
	calls = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req map[string]string
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&req) != nil {
			t.Errorf("refresh request: %s %s %s", r.Method, r.URL, r.Header.Get("Content-Type"))
		}
		want := map[string]string{"client_id": codexClientID, "grant_type": "refresh_token", "refresh_token": from}
		if diff := cmp.Diff(want, req); diff != "" {
			t.Errorf("refresh request (-want +got):\n%s", diff)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(answer)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/oauth/token", calls
}

func withRefreshURL(env Env, url string) Env {
	env.Getenv = func(k string) string {
		if k == codexRefreshOverride {
			return url
		}
		return ""
	}
	return env
}

func TestChatGPTGrantRefreshes(t *testing.T) {
	l := chatGPTLogin(t)
	newAccess := testJWT(t, map[string]any{"exp": time.Now().Add(10 * 24 * time.Hour).Unix()})
	newID := testJWT(t, testIDClaims)
	tests := []struct {
		name        string
		access      string
		lastRefresh time.Time
		limit       time.Duration
	}{
		{"expires during the run", testJWT(t, map[string]any{"exp": time.Now().Add(30 * time.Minute).Unix()}), time.Now(), time.Hour},
		{"expired", testJWT(t, map[string]any{"exp": time.Now().Add(-time.Minute).Unix()}), time.Now(), 0},
		{"opaque and old", "opaque-access", time.Now().Add(-8 * 24 * time.Hour), time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, p := codexHome(t, tt.access, "rt-old", tt.lastRefresh)
			url, calls := tokenEndpoint(t, "rt-old", http.StatusOK, map[string]any{
				"id_token": newID, "access_token": newAccess, "refresh_token": "rt-new", "expires_in": 864000,
			})
			env = withRefreshURL(env, url)
			g, err := l.Grant(t.Context(), env, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if calls.Load() != 1 {
				t.Errorf("the token endpoint was asked %d times, want once", calls.Load())
			}
			if g.Secrets[0].Value != newAccess {
				t.Errorf("the secret is not the new access token")
			}
			checkGuestFile(t, g, newAccess, "rt-new", "rt-old", tt.access, newID)

			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s has mode %v after the refresh, want 0600", p, fi.Mode().Perm())
			}
			var host map[string]any
			data, _ := os.ReadFile(p)
			if err := json.Unmarshal(data, &host); err != nil {
				t.Fatal(err)
			}
			tokens, _ := host["tokens"].(map[string]any)
			want := map[string]any{"id_token": newID, "access_token": newAccess, "refresh_token": "rt-new", "account_id": "acct-456"}
			if diff := cmp.Diff(want, tokens); diff != "" {
				t.Errorf("the host's tokens after the refresh (-want +got):\n%s", diff)
			}
			if host["kept_field"] != "kept" || host["auth_mode"] != "chatgpt" {
				t.Errorf("the refresh lost fields of the host's file:\n%s", data)
			}
			last, _ := time.Parse(time.RFC3339, host["last_refresh"].(string))
			if time.Since(last) > time.Minute {
				t.Errorf("last_refresh %v after the refresh, want now", host["last_refresh"])
			}
			entries, _ := os.ReadDir(filepath.Dir(p))
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".auth.json.airlock-") {
					t.Errorf("a temporary file is left: %s", e.Name())
				}
			}

			// The refreshed sign-in lasts: the next run does not refresh.
			if _, err := l.Grant(t.Context(), env, tt.limit); err != nil {
				t.Fatal(err)
			}
			if calls.Load() != 1 {
				t.Errorf("the second grant refreshed again (%d calls)", calls.Load())
			}
		})
	}
}

func TestChatGPTRefreshFails(t *testing.T) {
	l := chatGPTLogin(t)
	env, p := codexHome(t, testJWT(t, map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}), "rt-spent", time.Now())
	url, _ := tokenEndpoint(t, "rt-spent", http.StatusUnauthorized, map[string]any{
		"error": map[string]any{"message": "Your refresh token has already been used", "code": "refresh_token_reused"},
	})
	before, _ := os.ReadFile(p)
	_, err := l.Grant(t.Context(), withRefreshURL(env, url), time.Hour)
	if err == nil {
		t.Fatal("a refused refresh granted")
	}
	for _, want := range []string{p, "refresh_token_reused", "run `codex login`"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
		t.Errorf("a refused refresh changed %s", p)
	}
}

func TestChatGPTBadFiles(t *testing.T) {
	l := chatGPTLogin(t)
	id := testJWT(t, testIDClaims)
	tokens := func(m map[string]any) map[string]any {
		out := map[string]any{"id_token": id, "access_token": "a", "refresh_token": "r", "account_id": "acct"}
		for k, v := range m {
			if v == nil {
				delete(out, k)
			} else {
				out[k] = v
			}
		}
		return out
	}
	obj := func(v any) []byte { b, _ := json.Marshal(v); return b }
	tests := []struct {
		name, want string
		data       []byte
	}{
		{"not JSON", "not a JSON object", []byte("access_token=abc\n")},
		{"an array", "not a JSON object", []byte(`[1, 2]`)},
		{"null", "not a JSON object", []byte(`null`)},
		{"trailing data", "data after", append(obj(map[string]any{"auth_mode": "chatgpt", "tokens": tokens(nil)}), []byte(`{"x":1}`)...)},
		{"huge", "larger than", append([]byte(`{"auth_mode":"chatgpt","pad":"`), append(bytes.Repeat([]byte("x"), codexAuthMax), []byte(`"}`)...)...)},
		{"no tokens", "no tokens", obj(map[string]any{"auth_mode": "chatgpt", "OPENAI_API_KEY": nil})},
		{"null tokens", "no tokens", obj(map[string]any{"auth_mode": "chatgpt", "tokens": nil})},
		{"tokens not an object", "tokens", obj(map[string]any{"auth_mode": "chatgpt", "tokens": "abc"})},
		{"no access token", "no tokens.access_token", obj(map[string]any{"auth_mode": "chatgpt", "tokens": tokens(map[string]any{"access_token": nil})})},
		{"no refresh token", "no tokens.refresh_token", obj(map[string]any{"auth_mode": "chatgpt", "tokens": tokens(map[string]any{"refresh_token": nil})})},
		{"access token a number", "tokens.access_token", obj(map[string]any{"auth_mode": "chatgpt", "tokens": tokens(map[string]any{"access_token": 42})})},
		{"an API key", `auth_mode is "apikey"`, obj(map[string]any{"auth_mode": "apikey", "OPENAI_API_KEY": "sk-x", "tokens": nil})},
		{"an older API key file", "holds an API key", obj(map[string]any{"OPENAI_API_KEY": "sk-x", "tokens": tokens(nil)})},
		{"last_refresh not a time", "last_refresh", obj(map[string]any{"auth_mode": "chatgpt", "tokens": tokens(nil), "last_refresh": "yesterday"})},
		{"id_token not a JWT", "id_token", obj(map[string]any{"auth_mode": "chatgpt", "tokens": tokens(map[string]any{"id_token": "opaque"}), "last_refresh": time.Now()})},
		{"id_token without the auth claim", "https://api.openai.com/auth", obj(map[string]any{"auth_mode": "chatgpt", "tokens": tokens(map[string]any{"id_token": testJWT(t, map[string]any{"email": "a@b"})}), "last_refresh": time.Now()})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			p := filepath.Join(home, ".codex", "auth.json")
			writeFile(t, p, tt.data)
			env := Env{Home: home, Getenv: func(k string) string {
				if k == codexRefreshOverride {
					return "http://127.0.0.1:1/must-not-be-asked"
				}
				return ""
			}}
			_, err := l.Grant(t.Context(), env, time.Hour)
			if err == nil {
				t.Fatalf("Grant took %s", tt.data[:min(len(tt.data), 200)])
			}
			for _, want := range []string{p, tt.want, "codex login"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
