// Package egress is the host side of a sandbox's network: the proxy that
// every connection out of the guest reaches (through the guest agent's
// forward of guest.ProxyAddr over the SSH link), and the policy it
// enforces. The guest has no network device; this package decides what
// may leave: an allow-list of host[:port] patterns with optional method
// limits, deny by default with a 403 that says how to allow it, DNS
// resolved on the host, secrets substituted for placeholders on the way
// out (TLS terminated with a per-sandbox CA for those hosts only), a
// placeholder leaving for any other host blocked, and a Record of every
// request for the audit log.
//
// It must not import anything of Airlock's (app/sandbox, app/config and
// the rest are its callers: they hand it a Policy), fyne or vz.
package egress

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Default ports of a rule that names none: a CONNECT tunnel is for TLS
// (443), a plain proxied request is HTTP (80).
const (
	DefaultTLSPort  = 443
	DefaultHTTPPort = 80
)

// AnyPort in Rule.Port allows every port ("host:*").
const AnyPort = -1

// Rule is one allow-list (or deny-list) entry.
type Rule struct {
	// Host is an exact host name or IP address ("api.github.com",
	// "10.1.2.3", "::1"), or "*." and a domain for any name under it at
	// any depth ("*.github.com" matches "api.github.com" and
	// "a.b.github.com", not "github.com"). Matching ignores case and a
	// trailing dot.
	Host string `json:"host"`
	// Port is the port allowed; 0 means the default for the kind of
	// request (DefaultTLSPort for CONNECT, DefaultHTTPPort for plain
	// HTTP), AnyPort every port.
	Port int `json:"port,omitempty"`
	// Methods, if not empty, are the only HTTP methods allowed. They are
	// seen in plain HTTP requests and inside TLS the proxy terminates: a
	// proxy with a CA terminates the TLS of a tunnel that only rules with
	// Methods allow (Request.Inspect), and decides each request in it;
	// without a CA such a tunnel is refused, its methods being unseen.
	Methods []string `json:"methods,omitempty"`
	// Source says where the rule came from, for people and the audit
	// log: "user", "project", "flag", "preset" (an agent's), "secret".
	Source string `json:"source,omitempty"`
	// Registry is the registry preset the rule came from ("npm" for
	// @npm), if any.
	Registry string `json:"registry,omitempty"`
}

// describe names the rule for a reason: `the user rule "x.com (GET)"`,
// `the @npm preset (user rule "registry.npmjs.org:443 (GET,HEAD)")`.
func (r Rule) describe() string {
	rule := "the rule"
	if r.Source != "" {
		rule = "the " + r.Source + " rule"
	}
	if r.Registry != "" {
		return fmt.Sprintf("the @%s preset (%s %q)", r.Registry, strings.TrimPrefix(rule, "the "), r.String())
	}
	return fmt.Sprintf("%s %q", rule, r.String())
}

// Label is the rule with the registry preset it came from, if any:
// "@npm registry.npmjs.org:443 (GET,HEAD)". Decisions and records name
// rules so.
func (r Rule) Label() string {
	if r.Registry != "" {
		return "@" + r.Registry + " " + r.String()
	}
	return r.String()
}

// Origin says where the rule came from, for listings: its Source and
// registry preset ("user @npm"), or "" when unknown.
func (r Rule) Origin() string {
	if r.Registry == "" {
		return r.Source
	}
	return strings.TrimSpace(r.Source + " @" + r.Registry)
}

// ParseRule parses HOST, HOST:PORT or HOST:* (IPv6 addresses in brackets
// when a port follows), optionally followed by the only methods allowed:
// "api.github.com (GET,HEAD)". A registry preset ("@npm") stands for
// several rules: ParseRules reads it.
func ParseRule(s string) (Rule, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Rule{}, errors.New("empty host")
	}
	if strings.HasPrefix(s, "@") {
		return Rule{}, fmt.Errorf("%q is a registry preset, which stands for several hosts: name one host here", s)
	}
	hostPort, methods, err := cutMethods(s)
	if err != nil {
		return Rule{}, fmt.Errorf("%q: %w", s, err)
	}
	r, err := parseHostPort(hostPort)
	if err != nil {
		return Rule{}, err
	}
	r.Methods = methods
	return r, nil
}

// cutMethods splits "X (GET,HEAD)" into X and the methods, upper-cased;
// without a list, methods is nil.
func cutMethods(s string) (rest string, methods []string, err error) {
	s = strings.TrimSpace(s)
	open := strings.LastIndex(s, "(")
	if open < 0 {
		if strings.Contains(s, ")") {
			return "", nil, errors.New("a ) without its (: want HOST (GET,HEAD)")
		}
		return s, nil, nil
	}
	if !strings.HasSuffix(s, ")") {
		return "", nil, errors.New("want the methods last, in parentheses: HOST (GET,HEAD)")
	}
	rest = strings.TrimSpace(s[:open])
	for _, m := range strings.Split(s[open+1:len(s)-1], ",") {
		m = strings.ToUpper(strings.TrimSpace(m))
		if !validMethod(m) {
			return "", nil, fmt.Errorf("method %q: want HTTP methods such as GET, separated by commas", m)
		}
		methods = append(methods, m)
	}
	if rest == "" {
		return "", nil, errors.New("methods without a host")
	}
	return rest, methods, nil
}

// parseHostPort parses HOST, HOST:PORT or HOST:*.
func parseHostPort(s string) (Rule, error) {
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return Rule{}, fmt.Errorf("%q: missing ]", s)
		}
		host, port = s[1:end], strings.TrimPrefix(s[end+1:], ":")
		if s[end+1:] != "" && !strings.HasPrefix(s[end+1:], ":") {
			return Rule{}, fmt.Errorf("%q: want [ADDRESS]:PORT", s)
		}
	} else if i := strings.LastIndex(s, ":"); i >= 0 {
		if strings.Count(s, ":") > 1 {
			// A bare IPv6 address.
			host = s
		} else {
			host, port = s[:i], s[i+1:]
		}
	}
	r := Rule{Host: normHost(host)}
	if err := checkHostPattern(r.Host); err != nil {
		return Rule{}, fmt.Errorf("%q: %w", s, err)
	}
	switch port {
	case "":
	case "*":
		r.Port = AnyPort
	default:
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return Rule{}, fmt.Errorf("%q: port %q is not a number from 1 to 65535 or *", s, port)
		}
		r.Port = n
	}
	return r, nil
}

// String is the rule as ParseRule reads it, with its methods.
func (r Rule) String() string {
	h := r.Host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	switch r.Port {
	case 0:
	case AnyPort:
		h += ":*"
	default:
		h += ":" + strconv.Itoa(r.Port)
	}
	if len(r.Methods) > 0 {
		h += " (" + strings.Join(r.Methods, ",") + ")"
	}
	return h
}

// Validate checks a rule built as data (from a configuration file).
func (r Rule) Validate() error {
	var errs []error
	if err := checkHostPattern(normHost(r.Host)); err != nil {
		errs = append(errs, fmt.Errorf("host %q: %w", r.Host, err))
	}
	if r.Port != AnyPort && (r.Port < 0 || r.Port > 65535) {
		errs = append(errs, fmt.Errorf("port %d: want 1 to 65535", r.Port))
	}
	for _, m := range r.Methods {
		if !validMethod(m) {
			errs = append(errs, fmt.Errorf("method %q: want an HTTP method such as GET", m))
		}
	}
	return errors.Join(errs...)
}

func validMethod(m string) bool {
	if m == "" || m == "CONNECT" {
		return false
	}
	for _, c := range m {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

func normHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}

// checkHostPattern accepts a host name, an IP address, or *.domain.
func checkHostPattern(h string) error {
	if h == "" {
		return errors.New("empty host")
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return nil
	}
	name := strings.TrimPrefix(h, "*.")
	if strings.Contains(name, "*") {
		return errors.New("a wildcard is only allowed as a whole first label (*.example.com)")
	}
	if !strings.Contains(name, ".") && strings.HasPrefix(h, "*.") {
		return errors.New("a wildcard needs a domain of at least two labels (*.example.com, not *.com)")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%q is not a valid host name", h)
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("%q is not a valid host name", h)
			}
		}
	}
	return nil
}

// matchHost reports whether host (normalised) matches the pattern.
func matchHost(pattern, host string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(host, "."+suffix)
	}
	if a, err := netip.ParseAddr(pattern); err == nil {
		b, err := netip.ParseAddr(host)
		return err == nil && a.Unmap() == b.Unmap()
	}
	return pattern == host
}

func (r Rule) matchPort(port int, connect bool) bool {
	switch r.Port {
	case AnyPort:
		return true
	case 0:
		if connect {
			return port == DefaultTLSPort
		}
		return port == DefaultHTTPPort
	}
	return r.Port == port
}

// Covers reports whether r allows everything o allows: a project rule
// that some user rule covers widens nothing.
func (r Rule) Covers(o Rule) bool {
	rh, oh := normHost(r.Host), normHost(o.Host)
	switch {
	case rh == oh:
	case strings.HasPrefix(rh, "*."):
		// *.a.com covers x.a.com and *.x.a.com.
		if !matchHost(rh, strings.TrimPrefix(oh, "*.")) {
			return false
		}
	default:
		return false
	}
	if r.Port != AnyPort && r.Port != o.Port {
		return false
	}
	if len(r.Methods) == 0 {
		return true
	}
	if len(o.Methods) == 0 {
		return false
	}
	for _, m := range o.Methods {
		if !slices.Contains(r.Methods, m) {
			return false
		}
	}
	return true
}

// Policy is what a sandbox may reach. The zero Policy denies everything.
// A Policy is not changed once handed to a Proxy: Proxy.SetPolicy swaps
// in a new one.
type Policy struct {
	// Allow lists what may be reached; a request must match one.
	Allow []Rule `json:"allow,omitempty"`
	// Deny wins over Allow (a project narrowing what the user allows).
	// Its Methods are ignored: a denied host is denied whole.
	Deny []Rule `json:"deny,omitempty"`
	// Secrets are substituted for their placeholders on the way to their
	// hosts (over TLS). A secret's host needs no Allow rule of its own,
	// but the Allow rules that match it still apply to the requests sent
	// to it: their method limits hold, with or without the secret.
	Secrets []Secret `json:"-"`
	// Credentials are sign-ins the proxy adds to requests to their
	// hosts (a registry's, from the host's Docker configuration): over
	// TLS only, to a request without an Authorization of its own, and
	// only where Allow lets the request through.
	Credentials []Credential `json:"-"`
	// Stage holds the requests it matches for review instead of sending
	// them (Config.Hold): the agent gets the stage's Reply. Deny still
	// wins; a staged host needs no Allow rule for what is held, and the
	// requests to it that are not held are decided as any other.
	Stage []Stage `json:"stage,omitempty"`
}

// Decision is the policy's answer for one request.
type Decision struct {
	Allowed bool
	// Rule is the rule that decided, as text, or why nothing allowed it.
	Rule string
	// Reason, when denied, says why in words for the agent and the user.
	Reason string
	// MethodLimit is true when a rule matched the host and port but not
	// the method: allowing the host again would not help, its rule's
	// methods would have to change.
	MethodLimit bool
	// Intercept, on an allowed CONNECT, says that the proxy must
	// terminate the tunnel's TLS and decide each request inside: the host
	// has a secret, or only rules with methods allow it.
	Intercept bool
	// allow, if set, is the host to suggest allowing instead of the
	// request's (the address a name led to).
	allow string
	// registry, if set, is the registry preset whose method limit
	// refused the request.
	registry string
	// Stage, when set, is the stage that holds the request: it is
	// answered with the stage's reply and kept, not sent.
	Stage *Stage
}

// Request is what the policy sees of a request: the target and, except
// for an opaque tunnel, the method.
type Request struct {
	Host string
	Port int
	// Method is the HTTP method, or "CONNECT" for a tunnel whose content
	// the proxy cannot see.
	Method string
	// Connect is true for requests that came through a CONNECT tunnel
	// (opaque or intercepted): default ports are TLS's.
	Connect bool
	// Inspect, on a CONNECT, says that the proxy can terminate the
	// tunnel's TLS (it has a CA the guest trusts): a rule with methods
	// then allows the tunnel, and each request in it is decided with its
	// method.
	Inspect bool
	// Path is the URL path of a request the proxy sees (not a tunnel's).
	Path string
}

// Decide applies the policy to a request.
func (p *Policy) Decide(req Request) Decision {
	host := normHost(req.Host)
	target := net.JoinHostPort(host, strconv.Itoa(req.Port))
	for _, r := range p.Deny {
		if matchHost(normHost(r.Host), host) && r.matchPort(req.Port, req.Connect) {
			return Decision{Rule: "deny " + r.Label(), Reason: fmt.Sprintf("%s is denied by %s", target, r.describe())}
		}
	}
	// A secret means "intercept and substitute", not "allow everything":
	// the CONNECT to its host is allowed so that the proxy can terminate
	// its TLS and see each request, and each request inside is decided
	// below with its method, like any other. Only over TLS: plain HTTP to
	// the host gets no substitution and needs a rule of its own.
	var secret *Secret
	if req.Connect {
		secret = p.secretFor(host, req.Port)
	}
	if secret != nil && req.Method == "CONNECT" {
		return Decision{Allowed: true, Rule: "secret " + secret.Name + " for " + secret.Host, Intercept: true}
	}
	if req.Method == "CONNECT" {
		if st := p.staged(host, req.Port, true); st != nil {
			return Decision{Allowed: true, Rule: "stage " + st.String(), Intercept: true}
		}
	} else if st := p.stageFor(req); st != nil {
		return Decision{Allowed: true, Rule: "stage " + st.String(), Stage: st}
	}
	var methodMiss *Rule
	for i, r := range p.Allow {
		if !matchHost(normHost(r.Host), host) || !r.matchPort(req.Port, req.Connect) {
			continue
		}
		if len(r.Methods) == 0 {
			return Decision{Allowed: true, Rule: r.Label()}
		}
		if req.Method != "CONNECT" && slices.Contains(r.Methods, req.Method) {
			return Decision{Allowed: true, Rule: r.Label()}
		}
		if methodMiss == nil {
			methodMiss = &p.Allow[i]
		}
	}
	if methodMiss != nil {
		if req.Method == "CONNECT" {
			if req.Inspect {
				return Decision{Allowed: true, Rule: methodMiss.Label(), Intercept: true}
			}
			return Decision{Rule: methodMiss.Label(), Reason: fmt.Sprintf("%s is allowed by %s for %s only, and methods cannot be seen inside an HTTPS tunnel this proxy does not terminate", target, methodMiss.describe(), strings.Join(methodMiss.Methods, ", ")), MethodLimit: true, registry: methodMiss.Registry}
		}
		reason := fmt.Sprintf("%s %s is not allowed: %s allows %s only", req.Method, target, methodMiss.describe(), strings.Join(methodMiss.Methods, ", "))
		if secret != nil {
			reason += fmt.Sprintf(" (the secret %s is sent to this host, but a secret does not lift its method limits)", secret.Name)
		}
		return Decision{Rule: methodMiss.Label(), Reason: reason, MethodLimit: true, registry: methodMiss.Registry}
	}
	if secret != nil {
		return Decision{Allowed: true, Rule: "secret " + secret.Name + " for " + secret.Host}
	}
	return Decision{Rule: "default deny", Reason: fmt.Sprintf("%s is not on this sandbox's network allow-list", target)}
}

// Denied returns the deny rule that refuses host:port, if any (connect:
// the port defaults are HTTPS's).
func (p *Policy) Denied(host string, port int, connect bool) *Rule {
	host = normHost(host)
	for i, r := range p.Deny {
		if matchHost(normHost(r.Host), host) && r.matchPort(port, connect) {
			return &p.Deny[i]
		}
	}
	return nil
}

// Inspects reports whether the proxy enforcing the policy must see
// inside some HTTPS: a host has a secret or a stage, or an allow rule
// has methods.
// The sandbox then needs a CA (Config.CA) its guest trusts.
func (p *Policy) Inspects() bool {
	return len(p.Secrets) > 0 || len(p.Stage) > 0 || slices.ContainsFunc(p.Allow, func(r Rule) bool { return len(r.Methods) > 0 })
}

// guard says why what p checks on req's host and port would be lost on a
// connection switched to another protocol, or in a request a server
// reads as another method: a stage covers it, own (its secret) is sent to
// it, or a rule with methods allows it. "" when none does, or when a rule
// for it names UPGRADE.
func (p *Policy) guard(req Request, own *Secret) string {
	host := normHost(req.Host)
	var why []string
	limit, every := "", false
	for _, r := range p.Allow {
		if !matchHost(normHost(r.Host), host) || !r.matchPort(req.Port, req.Connect) {
			continue
		}
		switch {
		case slices.Contains(r.Methods, "UPGRADE"):
			return ""
		case len(r.Methods) == 0:
			every = true
		case limit == "":
			limit = fmt.Sprintf("%s allows %s only", r.describe(), strings.Join(r.Methods, ", "))
		}
	}
	if limit != "" && !every {
		why = append(why, limit)
	}
	if st := p.staged(host, req.Port, req.Connect); st != nil {
		why = append(why, "the stage "+st.String()+" holds requests to it")
	}
	if own != nil {
		why = append(why, "the secret "+own.Name+" is sent to it")
	}
	return strings.Join(why, "; ")
}

// secretFor returns the secret configured for host:port, if any.
func (p *Policy) secretFor(host string, port int) *Secret {
	for i := range p.Secrets {
		s := &p.Secrets[i]
		if normHost(s.Host) == host && s.port() == port {
			return s
		}
	}
	return nil
}

// Credential is a sign-in the proxy adds to the requests to its hosts
// that carry no Authorization header: a registry's user and password,
// which never enter the VM (Docker's daemon there asks the registry's
// token service anonymously, and gets a token for what the user may
// pull). A request that brings an Authorization of its own (the token,
// then) is left as it is.
type Credential struct {
	// Hosts are the exact host names it is sent to (a registry's API and
	// its token service); Port is their TLS port, 0 for 443.
	Hosts []string
	Port  int
	// Authorization is the header's whole value ("Basic …").
	Authorization string
	// Name is what records say was added ("registry credentials for
	// ghcr.io").
	Name string
}

// credentialFor is the credential for host:port over TLS, or nil.
func (p *Policy) credentialFor(host string, port int) *Credential {
	for i := range p.Credentials {
		c := &p.Credentials[i]
		want := c.Port
		if want == 0 {
			want = DefaultTLSPort
		}
		if want != port {
			continue
		}
		for _, h := range c.Hosts {
			if normHost(h) == host {
				return c
			}
		}
	}
	return nil
}

// addTo sets c as h's Authorization when h has none, and records it; a
// nil c adds nothing.
func (c *Credential) addTo(h http.Header, rec *Record) {
	if c != nil && h.Get("Authorization") == "" {
		h.Set("Authorization", c.Authorization)
		rec.Secret = c.Name
	}
}

// Validate reports every problem of the policy at once.
func (p *Policy) Validate() error {
	var errs []error
	for _, r := range append(slices.Clip(p.Allow), p.Deny...) {
		if err := r.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("rule %s: %w", r.String(), err))
		}
	}
	for _, s := range p.Secrets {
		if err := s.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("secret %s for %s: %w", s.Name, s.Host, err))
		}
	}
	for _, s := range p.Stage {
		if err := s.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("stage %s: %w", s.String(), err))
		}
	}
	return errors.Join(errs...)
}
