package plan

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/egress"
)

// TestPlanGeminiGoogleLogin: without GEMINI_API_KEY, gemini signs in with
// the Google account of the host's CLI: the run's guest gets the mode and
// a placeholder, the proxy a secret per host whose value comes from the
// host's file, and no token is in the plan's environment.
func TestPlanGeminiGoogleLogin(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"HOME": home}
	pl, _ := testPlanner(t, "")
	pl.Getenv = func(k string) string { return env[k] }
	project := t.TempDir()

	_, err := pl.Run(t.Context(), Request{Project: project, Agents: []string{"gemini"}, Prompt: "x"})
	var ce *CredentialError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "the google login: a Google account: run `gemini` once") {
		t.Fatalf("plan without a sign-in: %v, want a CredentialError naming the google login", err)
	}

	creds := filepath.Join(home, ".gemini", "oauth_creds.json")
	os.MkdirAll(filepath.Dir(creds), 0o700)
	data := fmt.Sprintf(`{"access_token":"ya29.host-token","refresh_token":"1//host-refresh","expiry_date":%d}`, time.Now().Add(time.Hour).UnixMilli())
	if err := os.WriteFile(creds, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, _ := pl.Credentials("gemini"); !c.Ready || !strings.Contains(c.String(), "the google login ("+creds+")") {
		t.Errorf("credentials %+v: %s", c, c)
	}
	p, err := pl.Run(t.Context(), Request{Project: project, Agents: []string{"gemini"}, Prompt: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	n := p.Runs[0].Network
	ph := n.Env["GOOGLE_CLOUD_ACCESS_TOKEN"]
	if !strings.HasPrefix(ph, egress.PlaceholderPrefix) || n.Env["GOOGLE_GENAI_USE_GCA"] != "true" {
		t.Errorf("the run's environment %v", n.Env)
	}
	hosts := map[string]bool{}
	for _, s := range n.Policy.Secrets {
		hosts[s.Host] = true
		v, err := s.Source(t.Context())
		if s.Placeholder != ph || err != nil || v != "ya29.host-token" {
			t.Errorf("secret for %s: placeholder %v, source %q, %v", s.Host, s.Placeholder == ph, v, err)
		}
	}
	if !hosts["cloudcode-pa.googleapis.com"] || !hosts["www.googleapis.com"] || len(hosts) != 2 {
		t.Errorf("secrets for %v", hosts)
	}
	if d := n.Policy.Decide(egress.Request{Host: "www.googleapis.com", Port: 443, Method: "POST", Connect: true}); d.Allowed {
		t.Errorf("POST to www.googleapis.com is allowed (%s): the CLI only reads its user info there", d.Rule)
	}
	if d := n.Policy.Decide(egress.Request{Host: "oauth2.googleapis.com", Port: 443, Method: "CONNECT", Connect: true}); d.Allowed {
		t.Errorf("the token endpoint is reachable from the guest (%s)", d.Rule)
	}
	for k, v := range n.Policy.GuestEnv() {
		if strings.Contains(v, "ya29") || strings.Contains(v, "host-refresh") {
			t.Errorf("a token in the guest's %s", k)
		}
	}
}
