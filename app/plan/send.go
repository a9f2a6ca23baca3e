package plan

import (
	"context"
	"fmt"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/sandbox"
)

// Sender returns how an apply sends a sandbox's approved actions from
// this computer: through an egress proxy that does not serve (its
// address guard and verified TLS; the user's allow rules count only for
// addresses they spell out), with the value of the secret an action
// carried looked up as a run looks it up (Keychain on macOS, [secrets]
// of config.toml, the environment) and put where its placeholder was.
// Only the user's [[network.secret]] entries are used: a secret goes to
// the one host the user configured it for, or the action is refused. A
// host the user's deny rules name now is refused too.
func (pl *Planner) Sender() (sandbox.SendFunc, error) {
	user, err := pl.user()
	if err != nil {
		return nil, err
	}
	allow, err := user.Network.Rules("user")
	if err != nil {
		return nil, err
	}
	deny, err := user.Network.DenyRules("user")
	if err != nil {
		return nil, err
	}
	pol := &egress.Policy{Allow: allow, Deny: deny}
	proxy := egress.New(egress.Config{Dial: pl.SendDial, RootCAs: pl.SendRootCAs}, pol)
	return func(ctx context.Context, a sandbox.Action) (egress.Sent, error) {
		if r := pol.Denied(a.Host, a.Port, a.Scheme == "https"); r != nil {
			// Nothing left: the action may be sent once the rule goes.
			return egress.Sent{}, fmt.Errorf("%s is denied by your configuration now (deny %q): not sent", a.Target(), r.String())
		}
		var secret *egress.Secret
		if a.Secret != nil {
			for _, r := range user.Network.Secret {
				if r.Env != a.Secret.Name {
					continue
				}
				s, err := r.Secret()
				if err != nil {
					return egress.Sent{}, fmt.Errorf("action %d: %w", a.ID, err)
				}
				name := r.Env
				s.Source = func(context.Context) (string, error) {
					v, _, err := egress.LookupSecret(name, user.Secrets, pl.getenv)
					return v, err
				}
				secret = &s
				break
			}
		}
		return proxy.Send(ctx, a.Held, secret)
	}, nil
}
