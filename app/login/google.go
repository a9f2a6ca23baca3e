package login

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/app/egress"
)

func init() { register(google{}) }

// Gemini CLI's sign-in with a Google account ("Login with Google"): the
// CLI keeps its OAuth tokens in ~/.gemini/oauth_creds.json (under
// $GEMINI_CLI_HOME instead of the home when that is set), an access token
// good for about an hour and the refresh token that makes new ones.
//
// The guest gets neither: GOOGLE_GENAI_USE_GCA=true selects the mode and
// GOOGLE_CLOUD_ACCESS_TOKEN holds a placeholder, which the CLI sends as
// "Authorization: Bearer" to the Code Assist API and to the user-info
// endpoint; the proxy puts the current access token in its place. The
// token is refreshed here, on the host, when it has less than
// googleMargin left (at the start of the run or during it), and written
// back to the CLI's file so the CLI on the host goes on with it.
const (
	googleCredsFile = "oauth_creds.json"
	// googleTokenURL is Google's OAuth token endpoint, where a refresh
	// token buys an access token.
	googleTokenURL = "https://oauth2.googleapis.com/token"
	// GoogleTokenURLEnv replaces googleTokenURL when set: a hook for
	// tests, which refresh against a server of their own.
	GoogleTokenURLEnv = "AIRLOCK_GOOGLE_TOKEN_URL"
	// Gemini CLI's OAuth client: an installed application's, whose
	// "secret" is public (it is in the CLI's source); Google refreshes a
	// token only for the client it was issued to.
	geminiClientID     = "681255809395-oo8ft2oprdrnp9e3aqf6av3hmdib135j.apps.googleusercontent.com"
	geminiClientSecret = "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"
	// googleMargin is how long an access token must still last to be
	// used: a request sent with it must reach Google before it ends.
	googleMargin = 5 * time.Minute
	// googleTokenEnv holds the access token's placeholder in the guest.
	googleTokenEnv = "GOOGLE_CLOUD_ACCESS_TOKEN"
)

// googleHosts are where the CLI sends the access token: the Code Assist
// API (every model call, the account's setup, quota and metrics) and the
// user info it reads the account's address from, with the methods the
// CLI uses there.
var googleHosts = []struct{ host, rule string }{
	{"cloudcode-pa.googleapis.com", "cloudcode-pa.googleapis.com"},
	{"www.googleapis.com", "www.googleapis.com (GET)"},
}

// google is the "google" login. now is the clock (nil: time.Now).
type google struct {
	now func() time.Time
}

func (google) Name() string { return "google" }

func (google) How() string {
	return "a Google account: run `gemini` once on this computer and choose Login with Google"
}

// googleCredsPath is where Gemini CLI keeps its sign-in.
func googleCredsPath(env Env) string {
	home := env.getenv("GEMINI_CLI_HOME")
	if home == "" {
		home = env.Home
	}
	return filepath.Join(home, ".gemini", googleCredsFile)
}

func (g google) Find(env Env) (string, bool) {
	path := googleCredsPath(env)
	_, err := readGoogleCreds(path)
	return path, err == nil
}

// Grant checks that the sign-in gives an access token now (refreshing it
// if needed), and hands the proxy a source of current tokens. d does not
// matter: a token lasts an hour at most, and the source refreshes it
// whenever a request finds it about to end, for as long as the run goes.
func (g google) Grant(ctx context.Context, env Env, d time.Duration) (*Grant, error) {
	src := &googleSource{path: googleCredsPath(env), tokenURL: googleTokenURL, now: g.now, client: &http.Client{Timeout: 30 * time.Second}}
	if u := env.getenv(GoogleTokenURLEnv); u != "" {
		src.tokenURL = u
	}
	if src.now == nil {
		src.now = time.Now
	}
	if _, err := readGoogleCreds(src.path); err != nil {
		return nil, err
	}
	if _, err := src.token(ctx); err != nil {
		return nil, err
	}
	ph, err := egress.NewPlaceholder()
	if err != nil {
		return nil, err
	}
	gr := &Grant{Env: map[string]string{"GOOGLE_GENAI_USE_GCA": "true", googleTokenEnv: ph}}
	for _, h := range googleHosts {
		gr.Secrets = append(gr.Secrets, egress.Secret{Host: h.host, Header: "Authorization", Name: googleTokenEnv, Placeholder: ph, Source: src.token})
		gr.Allow = append(gr.Allow, h.rule)
	}
	return gr, nil
}

// googleCreds is Gemini CLI's oauth_creds.json: the fields Airlock reads,
// and every field as it was, so that a rewrite keeps what it does not
// know.
type googleCreds struct {
	AccessToken  string
	RefreshToken string
	Expiry       time.Time // zero when unknown
	raw          map[string]json.RawMessage
}

// readGoogleCreds reads the sign-in at path; it must have a refresh
// token.
func readGoogleCreds(path string) (*googleCreds, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no Google sign-in of Gemini CLI on this computer (%s does not exist): run `gemini` on this computer and choose Login with Google", path)
	}
	if err != nil {
		return nil, fmt.Errorf("read the Google sign-in: %w", err)
	}
	c := &googleCreds{}
	var f struct {
		AccessToken  string   `json:"access_token"`
		RefreshToken string   `json:"refresh_token"`
		ExpiryDate   *float64 `json:"expiry_date"`
		Type         string   `json:"type"`
	}
	if err := json.Unmarshal(data, &c.raw); err != nil {
		return nil, fmt.Errorf("%s is not Gemini CLI's sign-in (%w): run `gemini` on this computer and choose Login with Google", path, err)
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s is not Gemini CLI's sign-in (%w): run `gemini` on this computer and choose Login with Google", path, err)
	}
	if f.Type != "" && f.Type != "authorized_user" {
		return nil, fmt.Errorf("%s holds %s credentials, not a Google account's sign-in: run `gemini` on this computer and choose Login with Google", path, f.Type)
	}
	if f.RefreshToken == "" {
		return nil, fmt.Errorf("%s has no refresh token: run `gemini` on this computer and choose Login with Google", path)
	}
	c.AccessToken, c.RefreshToken = f.AccessToken, f.RefreshToken
	if f.ExpiryDate != nil {
		c.Expiry = time.UnixMilli(int64(*f.ExpiryDate))
	}
	return c, nil
}

// googleSource gives the current access token of the sign-in at path,
// refreshing it there when it has less than googleMargin left.
type googleSource struct {
	path, tokenURL string
	now            func() time.Time
	client         *http.Client

	mu     sync.Mutex
	access string
	expiry time.Time
}

// token is the proxy's egress.Secret.Source: the token in hand while it
// lasts, else the file's (the CLI on the host, or another run, may have
// refreshed it), else a new one.
func (s *googleSource) token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.access != "" && s.now().Add(googleMargin).Before(s.expiry) {
		return s.access, nil
	}
	unlock, err := lockFile(s.path + ".airlock-lock")
	if err != nil {
		return "", fmt.Errorf("lock the Google sign-in: %w", err)
	}
	defer unlock()
	c, err := readGoogleCreds(s.path)
	if err != nil {
		return "", err
	}
	if c.AccessToken == "" || !s.now().Add(googleMargin).Before(c.Expiry) {
		if err := s.refresh(ctx, c); err != nil {
			return "", err
		}
	}
	s.access, s.expiry = c.AccessToken, c.Expiry
	return s.access, nil
}

// googleTokenResponse is the token endpoint's answer.
type googleTokenResponse struct {
	AccessToken      string `json:"access_token"`
	ExpiresIn        int64  `json:"expires_in"`
	Scope            string `json:"scope"`
	TokenType        string `json:"token_type"`
	IDToken          string `json:"id_token"`
	RefreshToken     string `json:"refresh_token"`
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

// refresh buys a new access token with c's refresh token and writes it
// into c and the file.
func (s *googleSource) refresh(ctx context.Context, c *googleCreds) error {
	const again = "sign in again: run `gemini` on this computer and choose Login with Google"
	form := url.Values{
		"grant_type":    {"refresh_token"},
		"refresh_token": {c.RefreshToken},
		"client_id":     {geminiClientID},
		"client_secret": {geminiClientSecret},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("refresh the Google sign-in: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("refresh the Google sign-in of %s (its access token has ended): %w", s.path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("refresh the Google sign-in: read the answer: %w", err)
	}
	var tr googleTokenResponse
	jsonErr := json.Unmarshal(body, &tr)
	switch {
	case resp.StatusCode != http.StatusOK && tr.Error != "":
		return fmt.Errorf("refresh the Google sign-in of %s: Google refused (%d %s: %s): %s", s.path, resp.StatusCode, tr.Error, tr.ErrorDescription, again)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("refresh the Google sign-in of %s: Google's token endpoint answered %s; if it keeps failing, %s", s.path, resp.Status, again)
	case jsonErr != nil || tr.AccessToken == "" || tr.ExpiresIn <= 0:
		return fmt.Errorf("refresh the Google sign-in of %s: Google's token endpoint gave no access token with a lifetime; if it keeps failing, %s", s.path, again)
	}
	c.AccessToken, c.Expiry = tr.AccessToken, s.now().Add(time.Duration(tr.ExpiresIn)*time.Second)
	set := func(k, v string) {
		if v != "" {
			c.raw[k], _ = json.Marshal(v)
		}
	}
	set("access_token", tr.AccessToken)
	set("scope", tr.Scope)
	set("token_type", tr.TokenType)
	set("id_token", tr.IDToken)
	set("refresh_token", tr.RefreshToken) // Google may rotate it
	c.raw["expiry_date"], _ = json.Marshal(c.Expiry.UnixMilli())
	if err := writeFileAtomic(s.path, c.raw); err != nil {
		return fmt.Errorf("keep the refreshed Google sign-in: %w", err)
	}
	return nil
}
