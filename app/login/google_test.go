package login

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/egress"
)

// googleHome writes a sign-in of Gemini CLI into a new home and returns
// the Env of that home and the file's path.
func googleHome(t *testing.T, creds map[string]any) (Env, string) {
	t.Helper()
	home := t.TempDir()
	path := filepath.Join(home, ".gemini", "oauth_creds.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(creds)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return Env{Home: home, Getenv: func(string) string { return "" }}, path
}

// creds is a sign-in as the CLI writes it, its access token ending at
// expiry.
func creds(access string, expiry time.Time) map[string]any {
	return map[string]any{
		"access_token": access, "refresh_token": "1//refresh-secret", "scope": "https://www.googleapis.com/auth/cloud-platform",
		"token_type": "Bearer", "id_token": "eyJ.old", "expiry_date": expiry.UnixMilli(),
	}
}

// tokenServer is Google's token endpoint: it hands out "ya29.new-N"
// tokens for an hour, or fails with status and body when set.
type tokenServer struct {
	*httptest.Server
	mu     sync.Mutex
	forms  []map[string][]string
	status int
	body   string
}

func newTokenServer(t *testing.T) *tokenServer {
	ts := &tokenServer{}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		ts.mu.Lock()
		defer ts.mu.Unlock()
		ts.forms = append(ts.forms, r.PostForm)
		w.Header().Set("Content-Type", "application/json")
		if ts.status != 0 {
			w.WriteHeader(ts.status)
			fmt.Fprint(w, ts.body)
			return
		}
		fmt.Fprintf(w, `{"access_token":"ya29.new-%d","expires_in":3599,"scope":"https://www.googleapis.com/auth/cloud-platform","token_type":"Bearer","id_token":"eyJ.new"}`, len(ts.forms))
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *tokenServer) calls() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.forms)
}

// withTokenURL points env's refreshes at ts.
func withTokenURL(env Env, ts *tokenServer) Env {
	env.Getenv = func(k string) string {
		if k == GoogleTokenURLEnv {
			return ts.URL
		}
		return ""
	}
	return env
}

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func readCreds(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestGoogleRegistered(t *testing.T) {
	l, ok := Lookup("google")
	if !ok || l.Name() != "google" || !strings.Contains(l.How(), "Login with Google") {
		t.Fatalf("Lookup(google) = %v, %v", l, ok)
	}
}

func TestGoogleFind(t *testing.T) {
	env, path := googleHome(t, creds("ya29.a", time.Now().Add(time.Hour)))
	if where, ok := (google{}).Find(env); !ok || where != path {
		t.Errorf("Find = %q, %v; want %s, true", where, ok, path)
	}
	// GEMINI_CLI_HOME replaces the home, as for the CLI.
	other, otherPath := googleHome(t, creds("ya29.b", time.Now().Add(time.Hour)))
	env.Getenv = func(k string) string {
		if k == "GEMINI_CLI_HOME" {
			return other.Home
		}
		return ""
	}
	if where, ok := (google{}).Find(env); !ok || where != otherPath {
		t.Errorf("Find with GEMINI_CLI_HOME = %q, %v; want %s, true", where, ok, otherPath)
	}
	if _, ok := (google{}).Find(Env{Home: t.TempDir()}); ok {
		t.Error("Find in a home without the file says found")
	}
}

// Files that are no usable sign-in: Find says no, Grant says what to do.
func TestGoogleBadFiles(t *testing.T) {
	for name, data := range map[string]string{
		"not JSON":         `{"access_token": "ya29`,
		"no refresh token": `{"access_token":"ya29.a","expiry_date":9999999999999}`,
		"ADC credentials":  `{"type":"service_account","refresh_token":"x"}`,
		"wrong types":      `{"refresh_token": 5}`,
	} {
		t.Run(name, func(t *testing.T) {
			env, path := googleHome(t, nil)
			if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, ok := (google{}).Find(env); ok {
				t.Error("Find says found")
			}
			_, err := (google{}).Grant(t.Context(), env, 0)
			if err == nil || !strings.Contains(err.Error(), "choose Login with Google") || !strings.Contains(err.Error(), path) {
				t.Errorf("Grant: %v; want what is wrong with %s and what to do", err, path)
			}
		})
	}
	_, err := (google{}).Grant(t.Context(), Env{Home: t.TempDir()}, 0)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Grant without a file: %v", err)
	}
}

// A token with more than the margin left is used as it is: no refresh,
// the file untouched. The grant puts a placeholder where the CLI reads
// the token and a secret for each host.
func TestGoogleGrantFresh(t *testing.T) {
	ts := newTokenServer(t)
	expiry := time.Now().Add(30 * time.Minute)
	env, path := googleHome(t, creds("ya29.current", expiry))
	env = withTokenURL(env, ts)
	before, _ := os.ReadFile(path)
	g, err := (google{}).Grant(t.Context(), env, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if ts.calls() != 0 {
		t.Errorf("%d refreshes of a token good for 30 minutes", ts.calls())
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("the file changed without a refresh")
	}
	ph := g.Env["GOOGLE_CLOUD_ACCESS_TOKEN"]
	if !strings.HasPrefix(ph, egress.PlaceholderPrefix) || g.Env["GOOGLE_GENAI_USE_GCA"] != "true" || len(g.Env) != 2 {
		t.Errorf("Env = %v; want the mode and a placeholder", g.Env)
	}
	if len(g.Files) != 0 {
		t.Errorf("Files = %v; the guest needs none", g.Files)
	}
	var hosts []string
	for _, s := range g.Secrets {
		hosts = append(hosts, s.Host)
		if s.Placeholder != ph || s.Header != "Authorization" || s.Name != "GOOGLE_CLOUD_ACCESS_TOKEN" || s.Value != "" || s.Source == nil {
			t.Errorf("secret %+v", s)
			continue
		}
		if err := s.Validate(); err != nil {
			t.Errorf("secret for %s: %v", s.Host, err)
		}
		if v, err := s.Source(t.Context()); err != nil || v != "ya29.current" {
			t.Errorf("the source for %s gives %q, %v; want the current token", s.Host, v, err)
		}
	}
	if want := []string{"cloudcode-pa.googleapis.com", "www.googleapis.com"}; !slices.Equal(hosts, want) {
		t.Errorf("secrets for %v, want %v", hosts, want)
	}
	if want := []string{"cloudcode-pa.googleapis.com", "www.googleapis.com (GET)"}; !slices.Equal(g.Allow, want) {
		t.Errorf("Allow = %v, want %v", g.Allow, want)
	}
	for _, r := range g.Allow {
		if _, err := egress.ParseRules(r); err != nil {
			t.Errorf("allow %q: %v", r, err)
		}
	}
	pol := &egress.Policy{Secrets: g.Secrets}
	if err := pol.Validate(); err != nil {
		t.Errorf("a policy of the grant's secrets: %v", err)
	}
	if env := pol.GuestEnv(); len(env) != 1 || env["GOOGLE_CLOUD_ACCESS_TOKEN"] != ph {
		t.Errorf("GuestEnv = %v", env)
	}
	for _, v := range g.Env {
		if strings.Contains(v, "refresh-secret") || strings.Contains(v, "ya29") {
			t.Errorf("a token in the guest's environment: %v", g.Env)
		}
	}
}

// An access token about to end is refreshed at the grant: the host's
// file gets the new token and expiry, keeps its other fields and stays
// 0600, and the source gives the new token.
func TestGoogleGrantRefreshes(t *testing.T) {
	ts := newTokenServer(t)
	clk := &clock{t: time.Now()}
	env, path := googleHome(t, creds("ya29.old", clk.now().Add(2*time.Minute)))
	cr := readCreds(t, path)
	cr["extra"] = "kept"
	data, _ := json.Marshal(cr)
	os.WriteFile(path, data, 0o600)
	env = withTokenURL(env, ts)

	g, err := (google{now: clk.now}).Grant(t.Context(), env, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ts.calls() != 1 {
		t.Fatalf("%d refreshes, want 1", ts.calls())
	}
	form := ts.forms[0]
	if form["grant_type"][0] != "refresh_token" || form["refresh_token"][0] != "1//refresh-secret" ||
		form["client_id"][0] != geminiClientID || form["client_secret"][0] != geminiClientSecret {
		t.Errorf("the refresh sent %v", form)
	}
	got := readCreds(t, path)
	want := map[string]any{
		"access_token": "ya29.new-1", "refresh_token": "1//refresh-secret", "scope": "https://www.googleapis.com/auth/cloud-platform",
		"token_type": "Bearer", "id_token": "eyJ.new", "expiry_date": float64(clk.now().Add(3599 * time.Second).UnixMilli()), "extra": "kept",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("the file's %s is %v, want %v", k, got[k], v)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the file's mode is %v (%v), want 0600", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".oauth_creds.json.airlock-") {
			t.Errorf("a temporary file is left: %s", e.Name())
		}
	}
	if v, err := g.Secrets[0].Source(t.Context()); err != nil || v != "ya29.new-1" {
		t.Errorf("the source gives %q, %v; want the new token", v, err)
	}
	if ts.calls() != 1 {
		t.Errorf("%d refreshes, want 1: the new token is good for an hour", ts.calls())
	}
}

// A run longer than the token: the source refreshes when a request finds
// it within the margin of its end, once for both hosts.
func TestGoogleSourceRefreshesMidRun(t *testing.T) {
	ts := newTokenServer(t)
	clk := &clock{t: time.Now()}
	env, path := googleHome(t, creds("ya29.first", clk.now().Add(time.Hour)))
	env = withTokenURL(env, ts)
	g, err := (google{now: clk.now}).Grant(t.Context(), env, 3*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cloud, www := g.Secrets[0].Source, g.Secrets[1].Source
	clk.add(50 * time.Minute)
	if v, _ := cloud(t.Context()); v != "ya29.first" || ts.calls() != 0 {
		t.Errorf("10 minutes before the end: %q after %d refreshes; want the first token, none", v, ts.calls())
	}
	clk.add(6 * time.Minute)
	if v, err := cloud(t.Context()); err != nil || v != "ya29.new-1" {
		t.Errorf("4 minutes before the end: %q, %v; want a new token", v, err)
	}
	if v, _ := www(t.Context()); v != "ya29.new-1" || ts.calls() != 1 {
		t.Errorf("the other host: %q after %d refreshes; want the same new token, one refresh", v, ts.calls())
	}
	if got := readCreds(t, path)["access_token"]; got != "ya29.new-1" {
		t.Errorf("the host's file has %v, want the new token", got)
	}

	// The CLI on the host refreshed the file itself: a run whose token
	// ends takes the file's instead of refreshing again.
	cr := readCreds(t, path)
	cr["access_token"], cr["expiry_date"] = "ya29.by-the-cli", clk.now().Add(2*time.Hour).UnixMilli()
	data, _ := json.Marshal(cr)
	os.WriteFile(path, data, 0o600)
	clk.add(time.Hour)
	if v, _ := cloud(t.Context()); v != "ya29.by-the-cli" || ts.calls() != 1 {
		t.Errorf("after the CLI's refresh: %q after %d refreshes; want its token, no refresh", v, ts.calls())
	}
}

// A refresh Google refuses (the sign-in was revoked) fails the grant,
// or a request during the run, saying to sign in again.
func TestGoogleRefreshFails(t *testing.T) {
	ts := newTokenServer(t)
	ts.status, ts.body = http.StatusBadRequest, `{"error":"invalid_grant","error_description":"Token has been expired or revoked."}`
	clk := &clock{t: time.Now()}
	env, path := googleHome(t, creds("ya29.old", clk.now().Add(-time.Minute)))
	env = withTokenURL(env, ts)
	before, _ := os.ReadFile(path)
	_, err := (google{now: clk.now}).Grant(t.Context(), env, 0)
	if err == nil || !strings.Contains(err.Error(), "invalid_grant") || !strings.Contains(err.Error(), "sign in again: run `gemini`") {
		t.Errorf("Grant: %v; want Google's refusal and to sign in again with gemini", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("a failed refresh changed the file")
	}

	// During the run: the source fails once the token ends.
	ts.mu.Lock()
	ts.status = 0
	ts.mu.Unlock()
	g, err := (google{now: clk.now}).Grant(t.Context(), env, 0)
	if err != nil {
		t.Fatal(err)
	}
	ts.mu.Lock()
	ts.status, ts.body = http.StatusServiceUnavailable, `<html>down</html>`
	ts.mu.Unlock()
	clk.add(time.Hour)
	if _, err := g.Secrets[0].Source(t.Context()); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "sign in again") {
		t.Errorf("the source after a failed refresh: %v", err)
	}
}
