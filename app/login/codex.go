package login

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/app/egress"
)

func init() { register(chatGPT{}) }

// chatGPT is Codex CLI's "Sign in with ChatGPT": `codex login` keeps
// the tokens in ~/.codex/auth.json ($CODEX_HOME/auth.json), and Codex
// sends the access token as Authorization: Bearer to chatgpt.com's
// backend API. The guest gets an auth.json of the same shape with a
// placeholder for the access token, another that no rule carries for
// the refresh token, and an unsigned id_token holding only the claims
// Codex reads (it decodes the payload, never checks a signature).
type chatGPT struct{}

const (
	// chatGPTHost is where Codex sends the access token.
	chatGPTHost = "chatgpt.com"
	// codexRefreshURL is where Codex refreshes its tokens; Codex reads
	// codexRefreshOverride to replace it, and so does the login (tests).
	codexRefreshURL      = "https://auth.openai.com/oauth/token"
	codexRefreshOverride = "CODEX_REFRESH_TOKEN_URL_OVERRIDE"
	// codexClientID is Codex CLI's OAuth client.
	codexClientID = "app_EMoamEEZ73f0CkXaXp7hrann"
	// codexAuthMax bounds auth.json (a few kilobytes in practice).
	codexAuthMax = 1 << 20
	// codexRefreshAge is how old a sign-in whose access token has no
	// expiry may be before the host refreshes it (Codex itself does at
	// 8 days).
	codexRefreshAge = 7 * 24 * time.Hour
	// codexMargin is added to the run's time limit: a token must last
	// that much longer than the run.
	codexMargin = 10 * time.Minute
	// codexLoginAgain is what to do when the sign-in cannot be used.
	codexLoginAgain = "run `codex login` on this computer to sign in again"
)

// idClaims are the id_token claims Codex reads (the email, the plan,
// the user and the account); the guest's id_token carries only these.
var (
	idClaims      = []string{"email"}
	idAuthClaims  = []string{"chatgpt_plan_type", "chatgpt_user_id", "user_id", "chatgpt_account_id", "chatgpt_account_user_id", "chatgpt_account_is_fedramp"}
	idProfileKeys = []string{"email", "email_verified"}
)

const (
	idAuthClaim    = "https://api.openai.com/auth"
	idProfileClaim = "https://api.openai.com/profile"
)

func (chatGPT) Name() string { return "chatgpt" }

func (chatGPT) How() string { return "a ChatGPT plan: run `codex login` on this computer" }

// authPath is Codex's auth.json on the host ("" when there is no home).
func (chatGPT) authPath(env Env) string {
	if d := env.getenv("CODEX_HOME"); d != "" {
		return filepath.Join(d, "auth.json")
	}
	if env.Home == "" {
		return ""
	}
	return filepath.Join(env.Home, ".codex", "auth.json")
}

func (c chatGPT) Find(env Env) (string, bool) {
	p := c.authPath(env)
	if p == "" {
		return "", false
	}
	if _, err := readCodexAuth(p); err != nil {
		return "", false
	}
	return p, true
}

func (c chatGPT) Grant(ctx context.Context, env Env, d time.Duration) (*Grant, error) {
	p := c.authPath(env)
	if p == "" {
		return nil, fmt.Errorf("no home directory to find Codex's auth.json in; %s", codexLoginAgain)
	}
	a, err := readCodexAuth(p)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if a.stale(now, d) {
		if a, err = refreshCodexAuth(ctx, env, p, d); err != nil {
			return nil, err
		}
	}
	return a.grant(now)
}

// codexAuth is the part of auth.json the login reads; raw keeps every
// field, for writing the file back.
type codexAuth struct {
	path        string
	raw         map[string]json.RawMessage
	rawTokens   map[string]json.RawMessage
	tokens      codexTokens
	lastRefresh time.Time // zero when absent
}

type codexTokens struct {
	IDToken      string `json:"id_token"`
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	AccountID    string `json:"account_id"`
}

// readCodexAuth reads and checks a ChatGPT sign-in's auth.json.
func readCodexAuth(p string) (*codexAuth, error) {
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no ChatGPT sign-in: %s does not exist; %s", p, codexLoginAgain)
		}
		return nil, fmt.Errorf("read Codex's sign-in: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, codexAuthMax+1))
	if err != nil {
		return nil, fmt.Errorf("read Codex's sign-in %s: %w", p, err)
	}
	if len(data) > codexAuthMax {
		return nil, fmt.Errorf("%s is larger than %d bytes, which no Codex sign-in is; %s", p, codexAuthMax, codexLoginAgain)
	}
	return parseCodexAuth(p, data)
}

// parseCodexAuth parses auth.json's data (p names it in errors).
func parseCodexAuth(p string, data []byte) (*codexAuth, error) {
	bad := func(what string) error {
		return fmt.Errorf("%s is not a ChatGPT sign-in of Codex: %s; %s", p, what, codexLoginAgain)
	}
	a := &codexAuth{path: p}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&a.raw); err != nil || a.raw == nil {
		return nil, bad(fmt.Sprintf("not a JSON object (%v)", err))
	}
	if dec.More() {
		return nil, bad("data after the JSON object")
	}
	var mode, apiKey *string
	if err := unmarshalField(a.raw, "auth_mode", &mode); err != nil {
		return nil, bad(err.Error())
	}
	if err := unmarshalField(a.raw, "OPENAI_API_KEY", &apiKey); err != nil {
		return nil, bad(err.Error())
	}
	switch {
	case mode != nil && *mode != "chatgpt":
		return nil, bad(fmt.Sprintf("auth_mode is %q, not \"chatgpt\"", *mode))
	case mode == nil && apiKey != nil && *apiKey != "":
		return nil, bad("it holds an API key (set CODEX_API_KEY instead, or sign in with ChatGPT)")
	}
	if err := unmarshalField(a.raw, "tokens", &a.rawTokens); err != nil {
		return nil, bad(err.Error())
	}
	if a.rawTokens == nil {
		return nil, bad("no tokens")
	}
	for k, dst := range map[string]*string{"id_token": &a.tokens.IDToken, "access_token": &a.tokens.AccessToken, "refresh_token": &a.tokens.RefreshToken, "account_id": &a.tokens.AccountID} {
		var v *string
		if err := unmarshalField(a.rawTokens, k, &v); err != nil {
			return nil, bad("tokens." + err.Error())
		}
		if v != nil {
			*dst = *v
		}
	}
	switch {
	case a.tokens.AccessToken == "":
		return nil, bad("no tokens.access_token")
	case a.tokens.RefreshToken == "":
		return nil, bad("no tokens.refresh_token")
	case a.tokens.IDToken == "":
		return nil, bad("no tokens.id_token")
	}
	var last *time.Time
	if err := unmarshalField(a.raw, "last_refresh", &last); err != nil {
		return nil, bad(err.Error())
	}
	if last != nil {
		a.lastRefresh = *last
	}
	return a, nil
}

// unmarshalField decodes m[k] into v when present; its error names k.
func unmarshalField(m map[string]json.RawMessage, k string, v any) error {
	raw, ok := m[k]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: %w", k, err)
	}
	return nil
}

// stale says whether the access token would end within d (plus a
// margin) of now: by its own expiry when it is a JWT that has one, else
// by the age of the last refresh.
func (a *codexAuth) stale(now time.Time, d time.Duration) bool {
	if exp, ok := jwtExpiry(a.tokens.AccessToken); ok {
		return !exp.After(now.Add(d + codexMargin))
	}
	return a.lastRefresh.IsZero() || now.Sub(a.lastRefresh) > codexRefreshAge
}

// jwtExpiry is a JWT's exp claim, if s is a JWT that has one.
func jwtExpiry(s string) (time.Time, bool) {
	claims, err := jwtClaims(s)
	if err != nil {
		return time.Time{}, false
	}
	var exp float64
	if raw, ok := claims["exp"]; !ok || json.Unmarshal(raw, &exp) != nil || exp <= 0 {
		return time.Time{}, false
	}
	return time.Unix(int64(exp), 0), true
}

// jwtClaims decodes a JWT's payload, checking no signature.
func jwtClaims(s string) (map[string]json.RawMessage, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return nil, errors.New("not a JWT (want three parts)")
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil, fmt.Errorf("the JWT's payload is not base64url: %w", err)
	}
	var claims map[string]json.RawMessage
	if err := json.Unmarshal(payload, &claims); err != nil || claims == nil {
		return nil, fmt.Errorf("the JWT's payload is not a JSON object (%v)", err)
	}
	return claims, nil
}

// refreshCodexAuth refreshes the sign-in at p on the host and writes it
// back, holding a lock so that two runs never spend the same refresh
// token (each is good once). It reads the file again under the lock: a
// run that waited may find it refreshed already.
func refreshCodexAuth(ctx context.Context, env Env, p string, d time.Duration) (*codexAuth, error) {
	unlock, err := lockFile(p + ".airlock-lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	a, err := readCodexAuth(p)
	if err != nil {
		return nil, err
	}
	if !a.stale(time.Now(), d) {
		return a, nil
	}
	url := codexRefreshURL
	if o := env.getenv(codexRefreshOverride); o != "" {
		url = o
	}
	tok, err := postRefresh(ctx, url, a.tokens.RefreshToken)
	if err != nil {
		return nil, fmt.Errorf("refresh the ChatGPT sign-in of %s: %w", p, err)
	}
	if err := a.update(tok, time.Now()); err != nil {
		return nil, err
	}
	if err := a.write(); err != nil {
		return nil, err
	}
	return a, nil
}

// refreshed is the token endpoint's answer; a token it leaves out stays.
type refreshed struct {
	IDToken      string `json:"id_token"`
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
}

// postRefresh asks the token endpoint at url for new tokens.
func postRefresh(ctx context.Context, url, refreshToken string) (refreshed, error) {
	body, _ := json.Marshal(map[string]string{"client_id": codexClientID, "grant_type": "refresh_token", "refresh_token": refreshToken})
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return refreshed{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return refreshed{}, fmt.Errorf("%w; check this computer's connection to %s", err, req.URL.Host)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, codexAuthMax))
	if err != nil {
		return refreshed{}, fmt.Errorf("read the answer of %s: %w", req.URL.Host, err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusForbidden:
		return refreshed{}, fmt.Errorf("%s refused the refresh token (%s%s): the sign-in has expired, was signed out or was used elsewhere; %s",
			req.URL.Host, resp.Status, oauthErrorCode(data), codexLoginAgain)
	case resp.StatusCode != http.StatusOK:
		return refreshed{}, fmt.Errorf("%s answered %s; try again later, or %s", req.URL.Host, resp.Status, codexLoginAgain)
	}
	var tok refreshed
	if err := json.Unmarshal(data, &tok); err != nil {
		return refreshed{}, fmt.Errorf("%s answered something that is not a token response (%v)", req.URL.Host, err)
	}
	if tok.AccessToken == "" {
		return refreshed{}, fmt.Errorf("%s answered no access token", req.URL.Host)
	}
	return tok, nil
}

// oauthErrorCode is ": CODE" of an OAuth error body, if it has one.
func oauthErrorCode(body []byte) string {
	var e struct {
		Error any `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	switch v := e.Error.(type) {
	case string:
		return ": " + v
	case map[string]any:
		if c, ok := v["code"].(string); ok {
			return ": " + c
		}
	}
	return ""
}

// update takes the new tokens into a, refreshed at now.
func (a *codexAuth) update(tok refreshed, now time.Time) error {
	set := func(k, v string, dst *string) {
		if v == "" {
			return
		}
		*dst = v
		a.rawTokens[k], _ = json.Marshal(v)
	}
	set("access_token", tok.AccessToken, &a.tokens.AccessToken)
	set("refresh_token", tok.RefreshToken, &a.tokens.RefreshToken)
	set("id_token", tok.IDToken, &a.tokens.IDToken)
	var err error
	if a.raw["tokens"], err = json.Marshal(a.rawTokens); err != nil {
		return err
	}
	a.lastRefresh = now.UTC()
	a.raw["last_refresh"], _ = json.Marshal(a.lastRefresh)
	return nil
}

// write replaces the file with a, atomically, readable by its owner
// only.
func (a *codexAuth) write() error {
	if err := writeFileAtomic(a.path, a.raw); err != nil {
		return fmt.Errorf("write the refreshed sign-in to %s: %w (the new refresh token is lost; %s)", a.path, err, codexLoginAgain)
	}
	return nil
}

// grant is what the guest gets for a: placeholders for the tokens and
// an id_token with only the claims Codex reads.
func (a *codexAuth) grant(now time.Time) (*Grant, error) {
	access, err := egress.NewPlaceholder()
	if err != nil {
		return nil, err
	}
	refresh, err := egress.NewPlaceholder()
	if err != nil {
		return nil, err
	}
	id, err := guestIDToken(a.tokens.IDToken)
	if err != nil {
		return nil, fmt.Errorf("the id_token of %s: %w; %s", a.path, err, codexLoginAgain)
	}
	file := map[string]any{
		"auth_mode":      "chatgpt",
		"OPENAI_API_KEY": nil,
		"tokens": map[string]any{
			"id_token":      id,
			"access_token":  access,
			"refresh_token": refresh,
			"account_id":    a.tokens.AccountID,
		},
		"last_refresh": now.UTC(),
	}
	data, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return nil, err
	}
	return &Grant{
		Secrets: []egress.Secret{{
			Host: chatGPTHost, Header: "Authorization", Name: "CODEX_CHATGPT_ACCESS_TOKEN",
			Value: a.tokens.AccessToken, Placeholder: access,
		}},
		Allow: []string{chatGPTHost},
		Files: []File{{Path: ".codex/auth.json", Mode: 0o600, Data: append(data, '\n')}},
	}, nil
}

// guestIDSignature stands for the guest's id_token's signature: Codex
// 0.169.0 refuses a JWT whose third part is empty, and checks no
// signature.
const guestIDSignature = "airlock-unsigned"

// guestIDToken is an unsigned JWT ("alg": "none") with the claims of
// the real id_token that Codex reads, and no others.
func guestIDToken(real string) (string, error) {
	claims, err := jwtClaims(real)
	if err != nil {
		return "", err
	}
	out := map[string]any{}
	for _, k := range idClaims {
		if v, ok := claims[k]; ok {
			out[k] = v
		}
	}
	for claim, keys := range map[string][]string{idAuthClaim: idAuthClaims, idProfileClaim: idProfileKeys} {
		var sub map[string]json.RawMessage
		if raw, ok := claims[claim]; ok && json.Unmarshal(raw, &sub) == nil {
			kept := map[string]json.RawMessage{}
			for _, k := range keys {
				if v, ok := sub[k]; ok {
					kept[k] = v
				}
			}
			out[claim] = kept
		}
	}
	if _, ok := out[idAuthClaim]; !ok {
		return "", fmt.Errorf("no %q claim", idAuthClaim)
	}
	payload, err := json.Marshal(out)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc.EncodeToString(payload) + "." + enc.EncodeToString([]byte(guestIDSignature)), nil
}
