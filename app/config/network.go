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
//
//	[[network.stage]]           # held for review, sent by the host when approved
//	host = "api.github.com"
//	methods = ["POST", "PATCH"] # default POST, PUT, PATCH, DELETE
//	paths = ["/repos/*/*/issues/**"]
//	reply = { status = 201, body = '{"id": {{id}}}' }
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
	// Stage lists the requests held for review instead of sent.
	Stage []StageRule `toml:"stage"`
}

// StageRule is a [[network.stage]] entry: the matching requests to Host
// are answered with Reply by the proxy and held as actions of the
// sandbox, sent from the host only once approved.
type StageRule struct {
	// Host is HOST or HOST:PORT (443 for HTTPS, 80 for plain HTTP by
	// default), or *.domain.
	Host string `toml:"host" json:"host"`
	// Methods are the methods held; empty means POST, PUT, PATCH and
	// DELETE.
	Methods []string `toml:"methods" json:"methods,omitempty"`
	// Paths, if given, are the only URL paths held: * matches within a
	// segment, ** any number of segments.
	Paths []string `toml:"paths" json:"paths,omitempty"`
	// MaxBody is the largest body held ("1MiB" by default); a larger
	// request is refused.
	MaxBody Size `toml:"max_body" json:"max_body,omitempty"`
	// Reply is what the agent gets; by default 202 with a JSON body
	// saying the request is held.
	Reply StageReply `toml:"reply" json:"reply"`
}

// StageReply is the reply table of a [[network.stage]] entry.
type StageReply struct {
	// Status is a 2xx status; 0 means 202.
	Status int `toml:"status" json:"status,omitempty"`
	// Headers are added to the reply.
	Headers map[string]string `toml:"headers" json:"headers,omitempty"`
	// Body is the reply's body, with {{id}} standing for the action's
	// number.
	Body string `toml:"body" json:"body,omitempty"`
}

// stage returns the egress.Stage r describes.
func (r StageRule) stage(source string) (egress.Stage, error) {
	rule, err := egress.ParseRule(r.Host)
	if err != nil {
		return egress.Stage{}, err
	}
	if len(rule.Methods) > 0 {
		return egress.Stage{}, fmt.Errorf("%q: give the methods in methods = [...], not in the host", r.Host)
	}
	if rule.Port == egress.AnyPort {
		return egress.Stage{}, fmt.Errorf("%q: a stage holds requests to one port", r.Host)
	}
	if r.MaxBody < 0 {
		return egress.Stage{}, fmt.Errorf("%q: max_body none: a stage holds bodies up to a limit, since it keeps them whole; give one of at most %s, or leave it out for %s", r.Host, Size(egress.MaxStageBody), Size(egress.DefaultStageMaxBody))
	}
	st := egress.Stage{Host: rule.Host, Port: rule.Port, Methods: upper(r.Methods), Paths: r.Paths, MaxBody: int64(r.MaxBody), Source: source,
		Reply: egress.Reply{Status: r.Reply.Status, Header: r.Reply.Headers, Body: r.Reply.Body}}
	if len(st.Methods) == 0 {
		st.Methods = nil
	}
	if err := st.Validate(); err != nil {
		return egress.Stage{}, fmt.Errorf("%q: %w", r.Host, err)
	}
	return st, nil
}

// String names the entry for people: "stage api.github.com (POST)".
func (r StageRule) String() string {
	st, err := r.stage("")
	if err != nil {
		return "stage " + r.Host
	}
	return "stage " + st.String()
}

// Stages returns the stage entries, tagged with source.
func (n Network) Stages(source string) ([]egress.Stage, error) {
	var out []egress.Stage
	var errs []error
	for i, r := range n.Stage {
		st, err := r.stage(source)
		if err != nil {
			errs = append(errs, fmt.Errorf("network.stage %d: %w", i+1, err))
			continue
		}
		out = append(out, st)
	}
	return out, errors.Join(errs...)
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

// Secret returns the egress.Secret a rule describes, without value or
// placeholder.
func (s SecretRule) Secret() (egress.Secret, error) {
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
	_, err3 := n.Stages("")
	errs := []error{err1, err2, err3}
	for i, s := range n.Secret {
		sec, err := s.Secret()
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
	stages, _ := project.Stages("project")
	for _, st := range stages {
		if !stageCovered(have, st) {
			out = append(out, "stage "+st.String())
		}
	}
	return out
}

// stageCovered says whether what st holds would be allowed anyway by one
// of rules: holding it for review then only narrows.
func stageCovered(rules []egress.Rule, st egress.Stage) bool {
	want := egress.Rule{Host: st.Host, Port: st.Port, Methods: st.StageMethods()}
	return slices.ContainsFunc(rules, func(h egress.Rule) bool { return h.Covers(want) })
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
	// Stages: the user's; the project's when trusted, or, untrusted,
	// those that hold only what the user allows anyway (they narrow).
	userStages, err := in.User.Network.Stages("user")
	errs = append(errs, err)
	pol.Stage = userStages
	projStages, err := in.Project.Network.Stages("project")
	errs = append(errs, err)
	for _, st := range projStages {
		if in.ProjectTrusted || stageCovered(pol.Allow, st) {
			pol.Stage = append(pol.Stage, st)
		}
	}
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
		sec, err := s.Secret()
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
