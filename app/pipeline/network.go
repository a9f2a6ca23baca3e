package pipeline

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"strings"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/login"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/guest"
	"github.com/airlock-dev/airlock/guest/client"
)

// Network is a sandbox's way out: the guest has no network device, and
// its agent forwards guest.ProxyAddr over the SSH link to an egress.Proxy
// on the host that enforces Policy and records every request in the audit
// log (EventEgress).
type Network struct {
	// Policy says what may be reached; nil denies everything.
	Policy *egress.Policy
	// OnRequest, if set, also receives every request as it ends (the
	// CLI's live line). It is called from the proxy's goroutines.
	OnRequest func(egress.Record)
	// OnProxy, if set, is given the running proxy, whose policy may be
	// swapped while the command runs (Proxy.SetPolicy).
	OnProxy func(*egress.Proxy)
	// Control, if set, is a unix socket path on which the policy can be
	// changed while the command runs (PolicyChange); airlock run uses the
	// sandbox's EgressSocket.
	Control string
	// Builder keeps the CA out of the guest's files (a builder VM, whose
	// changes become an image's layer): egress.InstallBuildCA.
	Builder bool
	// Env is added to the command's environment (a login's placeholders
	// and mode).
	Env map[string]string
	// Files are written into the home of the run's user before the
	// command, as that user (a subscription's sign-in with placeholders:
	// app/login).
	Files []login.File
	// Hold keeps a request a [[network.stage]] entry holds
	// (egress.Config.Hold); a run sets it to its sandbox's HoldAction.
	// Nil refuses such requests.
	Hold func(egress.Held) (int, error)
	// Dial and RootCAs replace the host's DNS and roots (tests).
	Dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	RootCAs *x509.CertPool
}

// Forwarder is the optional capability of a Machine that can carry the
// guest's connections to the host (SSH remote forwarding).
type Forwarder interface {
	Listen(network, addr string) (net.Listener, error)
}

func (m guestMachine) Listen(network, addr string) (net.Listener, error) {
	return m.g.Client.SSH().Listen(network, addr)
}

var _ Forwarder = guestMachine{}

// Audit events of the network.
const (
	EventEgressPolicy sandbox.EventKind = "egress-policy" // the policy the run started with (secret names and hosts, never values)
	EventEgress       sandbox.EventKind = "egress"        // one request through the proxy, allowed or denied (an egress.Record)
)

// StartNetwork serves n for the guest of m until the returned stop is
// called (or ctx ends): it installs the sandbox's CA in the guest when the
// proxy must see inside HTTPS (secrets, or rules with methods such as a
// registry preset's: egress.Policy.Inspects; rules with methods added
// later by a live change are enforced without a CA over plain HTTP only),
// has the guest forward guest.ProxyAddr, and runs the
// proxy. It returns the environment the command needs (placeholders and
// CA variables; the agent adds the proxy variables itself). audit, if
// not nil, receives every event.
func StartNetwork(ctx context.Context, m Machine, n *Network, name string, audit func(sandbox.Event)) (env map[string]string, stop func(), err error) {
	f, ok := m.(Forwarder)
	if !ok {
		return nil, nil, errors.New("network: this machine cannot carry the guest's connections")
	}
	pol := n.Policy
	if pol == nil {
		pol = &egress.Policy{}
	}
	if audit == nil {
		audit = func(sandbox.Event) {}
	}
	env = pol.GuestEnv()
	maps.Copy(env, n.Env)
	var ca *egress.CA
	if pol.Inspects() {
		if ca, err = egress.NewCA(name); err != nil {
			return nil, nil, err
		}
		install, caEnv := egress.InstallCA, egress.CAEnv
		if n.Builder {
			install, caEnv = egress.InstallBuildCA, egress.BuildCAEnv
		}
		if err := install(ctx, m.Exec, ca); err != nil {
			return nil, nil, err
		}
		maps.Copy(env, caEnv())
	}
	audit(sandbox.Event{Event: EventEgressPolicy, Data: policySummary(pol)})
	l, err := f.Listen("tcp", guest.ProxyAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("network: forward the guest's %s to the egress proxy: %w", guest.ProxyAddr, err)
	}
	proxy := egress.New(egress.Config{
		Dial: n.Dial, RootCAs: n.RootCAs, CA: ca, Hold: n.Hold,
		Record: func(rec egress.Record) {
			audit(sandbox.Event{Event: EventEgress, Data: rec})
			if n.OnRequest != nil {
				n.OnRequest(rec)
			}
		},
	}, pol)
	if n.OnProxy != nil {
		n.OnProxy(proxy)
	}
	stopControl := func() {}
	if n.Control != "" {
		if stopControl, err = servePolicyControl(ctx, n.Control, proxy, audit); err != nil {
			// The run goes on with the policy it has; only live changes
			// are lost.
			audit(sandbox.Event{Event: EventEgressPolicy, Data: map[string]any{"control_error": err.Error()}})
			stopControl = func() {}
		}
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = proxy.Serve(pctx, l)
	}()
	return env, func() { stopControl(); cancel(); <-done }, nil
}

// policySummary is the policy as the audit log keeps it: rules, and each
// secret's name, host and header (never its value or placeholder).
func policySummary(p *egress.Policy) map[string]any {
	rules := func(rs []egress.Rule) []string {
		out := make([]string, 0, len(rs))
		for _, r := range rs {
			s := r.String()
			if o := r.Origin(); o != "" {
				s += " [" + o + "]"
			}
			out = append(out, s)
		}
		return out
	}
	secrets := make([]map[string]any, 0, len(p.Secrets))
	for _, s := range p.Secrets {
		secrets = append(secrets, map[string]any{"name": s.Name, "host": s.Host, "port": s.Port, "header": s.Header})
	}
	out := map[string]any{"allow": rules(p.Allow), "deny": rules(p.Deny), "secrets": secrets}
	if len(p.Stage) > 0 {
		stage := make([]string, 0, len(p.Stage))
		for _, s := range p.Stage {
			stage = append(stage, s.String()+" ["+s.Source+"]")
		}
		out["stage"] = stage
	}
	return out
}

// writeFiles writes files into user's home in the guest, as user (so a
// link the agent left in its home leads nowhere it could not write
// itself); each replaces what was there.
func writeFiles(ctx context.Context, m Machine, user string, files []login.File) error {
	for _, f := range files {
		if err := f.Validate(); err != nil {
			return err
		}
		script := fmt.Sprintf(`set -e
umask 077
f="$HOME/$1"
mkdir -p "$(dirname "$f")"
cat > "$f.airlock-new"
chmod %o "$f.airlock-new"
mv -f "$f.airlock-new" "$f"`, f.Mode.Perm())
		var stderr bytes.Buffer
		if err := m.Run(ctx, client.Command{Args: []string{"sh", "-c", script, "airlock-login", f.Path}, User: user, Stdin: bytes.NewReader(f.Data), Stderr: &stderr}); err != nil {
			return fmt.Errorf("write ~/%s in the guest: %w (%s)", f.Path, err, strings.TrimSpace(stderr.String()))
		}
	}
	return nil
}
