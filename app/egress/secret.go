package egress

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
)

// PlaceholderPrefix begins every placeholder, so that one is easy to
// recognise in a log or a bug report.
const PlaceholderPrefix = "airlock-placeholder-"

// Secret is a credential that stays on the host: the guest sees
// Placeholder in its environment (as Name), and the proxy puts Value (or
// what Source gives) in its place in Header on requests to Host over TLS,
// and nowhere else. Several secrets may share a Name and Placeholder: one
// credential sent to several hosts.
type Secret struct {
	// Host is the one host (an exact name) the secret is sent to.
	Host string
	// Port is the TLS port; 0 means 443.
	Port int
	// Header carries the secret: "x-api-key", or "Authorization" for
	// "Bearer <placeholder>". Only the placeholder in it is replaced, so
	// any scheme around it is kept.
	Header string
	// Name is the environment variable that holds the placeholder in the
	// guest (and, usually, the secret on the host): ANTHROPIC_API_KEY.
	Name string
	// Value is the real secret. It never enters the VM.
	Value string
	// Source, when set, gives the real secret at each request instead of
	// Value: a token that the host refreshes while the run goes on. It is
	// called only for requests that carry the placeholder, and must
	// return quickly when its value is current. When it fails, the
	// request is not sent: the guest gets a 502 with the error.
	Source func(ctx context.Context) (string, error)
	// Placeholder is what the guest sees instead (NewPlaceholder).
	Placeholder string
}

func (s Secret) port() int {
	if s.Port == 0 {
		return DefaultTLSPort
	}
	return s.Port
}

// NewPlaceholder returns a fresh random placeholder.
func NewPlaceholder() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make placeholder: %w", err)
	}
	return PlaceholderPrefix + hex.EncodeToString(b[:]), nil
}

// Validate reports every problem of the secret at once.
func (s Secret) Validate() error {
	var errs []error
	h := normHost(s.Host)
	if strings.HasPrefix(h, "*.") {
		errs = append(errs, errors.New("a secret goes to one exact host, not a wildcard"))
	} else if err := checkHostPattern(h); err != nil {
		errs = append(errs, fmt.Errorf("host %q: %w", s.Host, err))
	}
	if s.Port < 0 || s.Port > 65535 {
		errs = append(errs, fmt.Errorf("port %d: want 1 to 65535", s.Port))
	}
	if !validToken(s.Header) {
		errs = append(errs, fmt.Errorf("header %q is not a valid header name", s.Header))
	}
	if !ValidEnvName(s.Name) {
		errs = append(errs, fmt.Errorf("env %q is not a valid environment variable name", s.Name))
	}
	if s.Value == "" && s.Source == nil {
		errs = append(errs, errors.New("no value"))
	}
	if len(s.Placeholder) < len(PlaceholderPrefix)+16 {
		errs = append(errs, errors.New("placeholder missing or too short to be unique"))
	}
	if s.Value != "" && strings.Contains(s.Placeholder, s.Value) {
		errs = append(errs, errors.New("the placeholder contains the secret"))
	}
	return errors.Join(errs...)
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// ValidEnvName reports whether s can name a secret: an environment
// variable name (letters, digits and _, not starting with a digit).
func ValidEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// GuestEnv is the environment that stands for the secrets in the guest:
// each Name set to its placeholder.
func (p *Policy) GuestEnv() map[string]string {
	env := map[string]string{}
	for _, s := range p.Secrets {
		env[s.Name] = s.Placeholder
	}
	return env
}

// value is the real secret for one request: what Source gives, else
// Value.
func (s *Secret) value(ctx context.Context) (string, error) {
	if s.Source == nil {
		return s.Value, nil
	}
	v, err := s.Source(ctx)
	if err == nil && v == "" {
		err = errors.New("it gave an empty value")
	}
	if err != nil {
		return "", fmt.Errorf("get the secret %s for %s: %w", s.Name, s.Host, err)
	}
	return v, nil
}

// carries says whether h holds s's placeholder in s.Header: the request
// the secret is substituted into.
func carries(h http.Header, s *Secret) bool {
	for _, v := range h[textproto.CanonicalMIMEHeaderKey(s.Header)] {
		if strings.Contains(v, s.Placeholder) {
			return true
		}
	}
	return false
}

// substitute replaces s's placeholder with value in s.Header of h, and
// reports whether it did.
func substitute(h http.Header, s *Secret, value string) bool {
	key := textproto.CanonicalMIMEHeaderKey(s.Header)
	done := false
	for i, v := range h[key] {
		if strings.Contains(v, s.Placeholder) {
			h[key][i] = strings.ReplaceAll(v, s.Placeholder, value)
			done = true
		}
	}
	return done
}

// foreign returns the secrets whose placeholders must not go with a
// request for own's host (own is that host's secret, or nil): all the
// others.
func (p *Policy) foreign(own *Secret) []*Secret {
	var out []*Secret
	for i := range p.Secrets {
		if own == nil || p.Secrets[i].Placeholder != own.Placeholder {
			out = append(out, &p.Secrets[i])
		}
	}
	return out
}

// leak returns the first secret whose placeholder appears in the
// request's target or headers while the request is not going to that
// secret's own host over TLS (own is that secret, or nil). The body is
// searched as it streams (placeholderScanner).
func (p *Policy) leak(own *Secret, r *http.Request) *Secret {
	for _, s := range p.foreign(own) {
		if strings.Contains(r.URL.String(), s.Placeholder) || strings.Contains(r.Host, s.Placeholder) {
			return s
		}
		for k, vs := range r.Header {
			if strings.Contains(k, s.Placeholder) {
				return s
			}
			for _, v := range vs {
				if strings.Contains(v, s.Placeholder) {
					return s
				}
			}
		}
		for _, vs := range r.Trailer {
			for _, v := range vs {
				if strings.Contains(v, s.Placeholder) {
					return s
				}
			}
		}
	}
	return nil
}
