package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/app/agent"
	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/login"
)

// Credential is one way an agent signs in, and whether this host has it.
type Credential struct {
	// Env is the secret's name, or Login the subscription sign-in's
	// (app/login); How says what it is and how to get it.
	Env   string `json:"env,omitempty"`
	Login string `json:"login,omitempty"`
	How   string `json:"how,omitempty"`
	// Host is where a secret is sent (only there).
	Host string `json:"host,omitempty"`
	// Store is where it was found ("environment", or a login's file),
	// empty when it was not.
	Store egress.Store `json:"found_in,omitempty"`
}

// name is the credential for people: its variable, or "the NAME login".
func (w Credential) name() string {
	if w.Login != "" {
		return "the " + w.Login + " login"
	}
	return w.Env
}

// Credentials says whether an agent can sign in on this host: ready
// when it needs no credential or one of its ways is found.
type Credentials struct {
	Agent string       `json:"agent"`
	Ready bool         `json:"ready"`
	Ways  []Credential `json:"ways,omitempty"`
}

// String is the agent's state for people, one line.
func (c Credentials) String() string {
	if len(c.Ways) == 0 {
		return "ready (no credential needed)"
	}
	var found, unset, logins []string
	for _, w := range c.Ways {
		switch {
		case w.Store != "":
			found = append(found, fmt.Sprintf("%s (%s)", w.name(), w.Store))
		case w.Login != "":
			logins = append(logins, w.name())
		default:
			unset = append(unset, w.Env)
		}
	}
	if c.Ready {
		return "ready: signs in with " + strings.Join(found, ", ")
	}
	var ways []string
	if len(unset) > 0 {
		ways = append(ways, "set "+strings.Join(unset, " or "))
	}
	if len(logins) > 0 {
		ways = append(ways, "sign in with "+strings.Join(logins, " or "))
	}
	return "not signed in: " + strings.Join(ways, ", or ")
}

// Help says, in a few lines for a window, what to set for an agent
// that cannot sign in ("" when it can).
func (c Credentials) Help() string {
	if c.Ready {
		return ""
	}
	var vars, logins []string
	for _, w := range c.Ways {
		if w.Login != "" {
			logins = append(logins, fmt.Sprintf("%s (%s)", w.name(), w.How))
		} else {
			vars = append(vars, fmt.Sprintf("%s (%s)", w.Env, w.How))
		}
	}
	var out []string
	if len(vars) > 0 {
		out = append(out, "Set "+strings.Join(vars, " or ")+" "+egress.Stores()+".")
	}
	if len(logins) > 0 {
		out = append(out, "Or sign in with "+strings.Join(logins, " or ")+".")
	}
	return strings.Join(out, " ")
}

// CredentialError is a run of an agent none of whose credentials is on
// this host; nothing was started.
type CredentialError struct{ Credentials }

func (e *CredentialError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agent %s cannot sign in: none of its credentials is set on this computer. Set one of:\n", e.Agent)
	for _, w := range e.Ways {
		fmt.Fprintf(&b, "  %s: %s\n", w.name(), w.How)
	}
	fmt.Fprintf(&b, "Set one %s.\n", egress.WhereToSet("NAME"))
	var hosts []string
	for _, w := range e.Ways {
		if w.Host != "" && !slices.Contains(hosts, w.Host) {
			hosts = append(hosts, w.Host)
		}
	}
	fmt.Fprintf(&b, "The value stays on this computer: the VM sees only a placeholder, and Airlock's proxy puts the real one on the agent's requests to %s. Nothing was run.", strings.Join(hosts, ", "))
	return b.String()
}

// Credentials says whether the agent preset name can sign in here (the
// app's run dialog shows it).
func (pl *Planner) Credentials(name string) (Credentials, error) {
	all, err := pl.loadAgents()
	if err != nil {
		return Credentials{}, err
	}
	ps, ok := all[name]
	if !ok {
		return Credentials{}, fmt.Errorf("no agent %q", name)
	}
	user, err := pl.user()
	if err != nil {
		return Credentials{}, err
	}
	c, _ := pl.credentials(user, ps)
	return c, nil
}

// credentials looks each of ps's secrets up on the host, and returns
// the values found by name.
func (pl *Planner) credentials(user config.User, ps agent.Preset) (Credentials, map[string]string) {
	c := Credentials{Agent: ps.Name, Ready: len(ps.Secret) == 0}
	values := map[string]string{}
	for _, s := range ps.Secret {
		w := Credential{Env: s.Env, How: s.How, Host: s.Host}
		if v, store, err := egress.LookupSecret(s.Env, user.Secrets, pl.getenv); err == nil {
			w.Store, c.Ready = store, true
			values[s.Env] = v
		}
		c.Ways = append(c.Ways, w)
	}
	if l, ok := login.Lookup(ps.Login); ok {
		w := Credential{Login: l.Name(), How: l.How()}
		if where, found := l.Find(pl.loginEnv()); found {
			w.Store, c.Ready = egress.Store(where), true
		}
		c.Ways = append(c.Ways, w)
	}
	return c, values
}

// loginEnv is where logins look: the user's home and environment.
func (pl *Planner) loginEnv() login.Env {
	return login.Env{Home: pl.getenv("HOME"), Getenv: pl.getenv}
}

// signedIn is how an agent signs in on this host, looked up once per
// plan: its secrets found with their values, else its login.
type signedIn struct {
	secrets []config.SecretRule
	values  map[string]string // by name
	login   login.Login
}

// signIn returns how the preset signs in on this host, or a
// CredentialError when it cannot.
func (pl *Planner) signIn(user config.User, ps agent.Preset) (*signedIn, error) {
	c, values := pl.credentials(user, ps)
	if !c.Ready {
		return nil, &CredentialError{c}
	}
	si := &signedIn{values: values}
	for i, w := range c.Ways {
		if w.Store != "" && w.Login == "" {
			si.secrets = append(si.secrets, ps.Secret[i].SecretRule)
		}
	}
	if len(si.secrets) == 0 {
		si.login, _ = login.Lookup(ps.Login)
	}
	return si, nil
}
