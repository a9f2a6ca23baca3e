package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/app/egress"
)

// Network is the [network] section of the user's config.toml and of a
// project's airlock.toml.
//
//	[network]
//	allow = ["github.com", "*.githubusercontent.com", "pypi.org:443", "@npm"]
//	deny  = ["gist.github.com"]
//
//	[[network.host]]            # an allow entry with a method limit
//	host = "api.github.com"
//	methods = ["GET", "HEAD"]
//
// "@npm" is a registry preset (egress.Registries): the registry's hosts,
// GET and HEAD only unless methods are given ("@npm (GET,HEAD,PUT)", or
// a [[network.host]] entry with host = "@npm" and methods).
//
//	[[network.secret]]          # the value stays on the host
//	host = "api.anthropic.com"
//	header = "x-api-key"
//	env = "ANTHROPIC_API_KEY"
type Network struct {
	// Allow lists HOST, HOST:PORT or HOST:*, each optionally followed by
	// its methods, "(GET,HEAD)", and registry presets, "@npm"
	// (egress.ParseRules). Without a port, HTTPS (CONNECT) is allowed on
	// 443 and plain HTTP on 80.
	Allow []string `toml:"allow"`
	// Deny lists hosts never reached, whatever allows them: patterns
	// without methods, or registry presets (all their hosts).
	Deny []string `toml:"deny"`
	// Host lists allow entries with a method limit.
	Host []HostRule `toml:"host"`
	// Secret lists credentials substituted on their way to one host.
	Secret []SecretRule `toml:"secret"`
}

// HostRule is a [[network.host]] entry.
type HostRule struct {
	// Host is HOST, HOST:PORT, HOST:* or a registry preset ("@npm").
	Host string `toml:"host"`
	// Methods are the only HTTP methods allowed (a preset's default is
	// GET and HEAD). The proxy terminates the TLS of such a host to see
	// them.
	Methods []string `toml:"methods"`
}

// SecretRule is a [[network.secret]] entry: the guest sees a placeholder
// in Env; the proxy puts the real value in Header on requests to Host.
type SecretRule struct {
	// Host is the exact host (HOST or HOST:PORT, 443 by default).
	Host string `toml:"host" json:"host"`
	// Header is the header that carries it: "x-api-key", or
	// "Authorization" with "Bearer <placeholder>".
	Header string `toml:"header" json:"header"`
	// Env is the secret's name: the guest's environment variable holding
	// the placeholder, and where the value is looked up on the host
	// (Keychain on macOS, [secrets] of the user's config.toml, the
	// environment of airlock).
	Env string `toml:"env" json:"env"`
}

func (s SecretRule) String() string {
	return fmt.Sprintf("secret %s in header %s to %s", s.Env, s.Header, s.Host)
}

// Rules returns the allow rules (Allow and Host), tagged with source.
func (n Network) Rules(source string) ([]egress.Rule, error) {
	var out []egress.Rule
	var errs []error
	for _, a := range n.Allow {
		rs, err := egress.ParseRules(a)
		if err != nil {
			errs = append(errs, fmt.Errorf("network.allow: %w", err))
			continue
		}
		for _, r := range rs {
			r.Source = source
			out = append(out, r)
		}
	}
	for _, h := range n.Host {
		rs, err := egress.ParseRules(h.Host)
		if err != nil {
			errs = append(errs, fmt.Errorf("network.host: %w", err))
			continue
		}
		if len(h.Methods) > 0 && strings.Contains(h.Host, "(") {
			errs = append(errs, fmt.Errorf("network.host %q: methods both in host and in methods; keep them in methods", h.Host))
			continue
		}
		for _, r := range rs {
			if len(h.Methods) > 0 {
				r.Methods = upper(h.Methods)
			}
			r.Source = source
			if err := r.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("network.host %q: %w", h.Host, err))
				break
			}
			out = append(out, r)
		}
	}
	return out, errors.Join(errs...)
}

// DenyRules returns the deny rules, tagged with source.
func (n Network) DenyRules(source string) ([]egress.Rule, error) {
	var out []egress.Rule
	var errs []error
	for _, d := range n.Deny {
		if strings.Contains(d, "(") {
			errs = append(errs, fmt.Errorf("network.deny: %q: a deny rule refuses a host whole; drop the methods", d))
			continue
		}
		rs, err := egress.ParseRules(d)
		if err != nil {
			errs = append(errs, fmt.Errorf("network.deny: %w", err))
			continue
		}
		for _, r := range rs {
			r.Methods, r.Source = nil, source
			out = append(out, r)
		}
	}
	return out, errors.Join(errs...)
}

func upper(ms []string) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = strings.ToUpper(strings.TrimSpace(m))
	}
	return out
}

// secret returns the egress.Secret a rule describes, without value or
// placeholder.
func (s SecretRule) secret() (egress.Secret, error) {
	r, err := egress.ParseRule(s.Host)
	if err != nil {
		return egress.Secret{}, err
	}
	if r.Port == egress.AnyPort {
		return egress.Secret{}, fmt.Errorf("%q: a secret goes to one port", s.Host)
	}
	if len(r.Methods) > 0 {
		return egress.Secret{}, fmt.Errorf("%q: a secret's host takes no methods; limit them with a [[network.host]] entry for the host", s.Host)
	}
	return egress.Secret{Host: r.Host, Port: r.Port, Header: s.Header, Name: s.Env}, nil
}

// Validate reports every problem of the section at once.
func (n Network) Validate() error {
	_, err1 := n.Rules("")
	_, err2 := n.DenyRules("")
	errs := []error{err1, err2}
	for i, s := range n.Secret {
		sec, err := s.secret()
		if err != nil {
			errs = append(errs, fmt.Errorf("network.secret %d: %w", i+1, err))
			continue
		}
		// Value and placeholder are filled in later; check the rest.
		sec.Value, sec.Placeholder = "x", egress.PlaceholderPrefix+"0000000000000000"
		if err := sec.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("network.secret %d (%s): %w", i+1, s.Host, err))
		}
	}
	return errors.Join(errs...)
}

// Widening lists, for people, what a project's network section asks
// for beyond what the user already allows (user rules and --allow
// flags): hosts no user rule covers, and every secret the user has not
// configured the same way. Deny rules only narrow and are never listed.
func Widening(user Network, project Network, flags []egress.Rule) []string {
	have, _ := user.Rules("user")
	have = append(have, flags...)
	want, _ := project.Rules("project")
	var out []string
	for _, w := range want {
		covered := slices.ContainsFunc(have, func(h egress.Rule) bool { return h.Covers(w) })
		if !covered {
			out = append(out, "allow "+w.Label())
		}
	}
	for _, s := range project.Secret {
		if !slices.Contains(user.Secret, s) {
			out = append(out, s.String())
		}
	}
	return out
}

// PolicyInput is every source of a sandbox's network policy.
type PolicyInput struct {
	// Preset is the agent's own allow-list (an agent CLI's API host,
	// app/agent).
	Preset []egress.Rule
	// PresetSecrets are the agent's own API keys (app/agent).
	PresetSecrets []SecretRule
	User          User
	// Project is the project's airlock.toml; its allow and secret
	// entries count only when ProjectTrusted (its deny entries always).
	Project        Project
	ProjectTrusted bool
	// Flags are the --allow rules of the command line.
	Flags []egress.Rule
	// Lookup finds a secret's value on the host; nil looks only in the
	// user's [secrets].
	Lookup func(name string) (string, error)
}

// Policy merges the sources: allow = preset, user, flags and (when
// trusted) project; deny = user and project; secrets = preset (unless
// the user has one of the same name), user and (when trusted) project, each with its value looked up and a fresh
// placeholder. It reports every problem at once.
func Policy(in PolicyInput) (*egress.Policy, error) {
	var errs []error
	pol := &egress.Policy{Allow: slices.Clone(in.Preset)}
	add := func(rules []egress.Rule, err error) []egress.Rule {
		if err != nil {
			errs = append(errs, err)
		}
		return rules
	}
	pol.Allow = append(pol.Allow, add(in.User.Network.Rules("user"))...)
	pol.Allow = append(pol.Allow, in.Flags...)
	// A user's secret of the same name replaces the preset's.
	var secrets []SecretRule
	for _, s := range in.PresetSecrets {
		if !slices.ContainsFunc(in.User.Network.Secret, func(u SecretRule) bool { return u.Env == s.Env }) && !slices.Contains(secrets, s) {
			secrets = append(secrets, s)
		}
	}
	secrets = append(secrets, in.User.Network.Secret...)
	if in.ProjectTrusted {
		pol.Allow = append(pol.Allow, add(in.Project.Network.Rules("project"))...)
		for _, s := range in.Project.Network.Secret {
			if !slices.Contains(secrets, s) {
				secrets = append(secrets, s)
			}
		}
	}
	pol.Deny = append(add(in.User.Network.DenyRules("user")), add(in.Project.Network.DenyRules("project"))...)
	lookup := in.Lookup
	if lookup == nil {
		lookup = func(name string) (string, error) {
			if v := in.User.Secrets[name]; v != "" {
				return v, nil
			}
			return "", fmt.Errorf("secret %s not found under [secrets] in the user configuration", name)
		}
	}
	for _, s := range secrets {
		sec, err := s.secret()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if sec.Value, err = lookup(s.Env); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s, err))
			continue
		}
		if sec.Placeholder, err = egress.NewPlaceholder(); err != nil {
			errs = append(errs, err)
			continue
		}
		pol.Secrets = append(pol.Secrets, sec)
	}
	if err := pol.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("network policy: %w", err)
	}
	return pol, nil
}
