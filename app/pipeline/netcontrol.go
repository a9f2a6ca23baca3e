package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/sandbox"
)

// EgressSocket is the unix socket, in a running sandbox's directory, on
// which the process running it (airlock run) takes changes to the network
// policy while the command runs: airlock allow ID HOST.
const EgressSocket = "egress.sock"

// PolicyChange widens or narrows a running sandbox's policy.
type PolicyChange struct {
	// Allow and Deny are added, as egress.ParseRules reads them (deny
	// entries without methods).
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

type policyReply struct {
	Error  string         `json:"error,omitempty"`
	Policy map[string]any `json:"policy,omitempty"`
}

// maxControlLine caps one request on the control socket.
const maxControlLine = 64 << 10

// servePolicyControl serves PolicyChange requests (one JSON line each,
// answered with one) on path for proxy until ctx ends. Only the user can
// connect: the socket is 0600 in the user's own sandbox directory.
func servePolicyControl(ctx context.Context, path string, proxy *egress.Proxy, audit func(sandbox.Event)) (stop func(), err error) {
	_ = os.Remove(path) // a stale socket of a crashed run
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("network control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("network control socket: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex // one change at a time
	var wg sync.WaitGroup
	context.AfterFunc(ctx, func() { l.Close() })
	wg.Go(func() {
		var conns sync.WaitGroup
		defer conns.Wait()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			stopConn := context.AfterFunc(ctx, func() { c.Close() })
			conns.Go(func() {
				defer stopConn()
				defer c.Close()
				sc := bufio.NewScanner(c)
				sc.Buffer(make([]byte, 4096), maxControlLine)
				for sc.Scan() {
					var ch PolicyChange
					var reply policyReply
					if err := json.Unmarshal(sc.Bytes(), &ch); err != nil {
						reply.Error = "bad request: " + err.Error()
					} else {
						mu.Lock()
						pol, err := applyChange(proxy.Policy(), ch)
						if err != nil {
							reply.Error = err.Error()
						} else {
							proxy.SetPolicy(pol)
							reply.Policy = policySummary(pol)
							audit(sandbox.Event{Event: EventEgressPolicy, Data: map[string]any{"change": ch, "policy": reply.Policy}})
						}
						mu.Unlock()
					}
					b, _ := json.Marshal(reply)
					if _, err := c.Write(append(b, '\n')); err != nil {
						return
					}
				}
			})
		}
	})
	return func() { cancel(); wg.Wait(); os.Remove(path) }, nil
}

// applyChange returns a copy of pol with ch's rules added.
func applyChange(pol *egress.Policy, ch PolicyChange) (*egress.Policy, error) {
	next := *pol
	next.Allow = slices.Clone(pol.Allow)
	next.Deny = slices.Clone(pol.Deny)
	var errs []error
	for _, s := range ch.Allow {
		rs, err := egress.ParseRules(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range rs {
			r.Source = "live"
			next.Allow = append(next.Allow, r)
		}
	}
	for _, s := range ch.Deny {
		if strings.Contains(s, "(") {
			errs = append(errs, fmt.Errorf("deny %q: a deny rule refuses a host whole; drop the methods", s))
			continue
		}
		rs, err := egress.ParseRules(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range rs {
			r.Methods, r.Source = nil, "live"
			next.Deny = append(next.Deny, r)
		}
	}
	if len(ch.Allow)+len(ch.Deny) == 0 {
		errs = append(errs, errors.New("no rule to add"))
	}
	return &next, errors.Join(errs...)
}

// ChangePolicy asks the process running the sandbox to change its
// network policy now, and returns the policy in force after it.
func ChangePolicy(ctx context.Context, sb *sandbox.Sandbox, ch PolicyChange) (map[string]any, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sb.Path(EgressSocket))
	if err != nil {
		return nil, fmt.Errorf("sandbox %s is not running a command with a network (no %s): %w", sb.ID, EgressSocket, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	b, _ := json.Marshal(ch)
	if _, err := c.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("change the network policy of %s: %w", sb.ID, err)
	}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 4096), maxControlLine)
	if !sc.Scan() {
		return nil, fmt.Errorf("change the network policy of %s: no answer (%v)", sb.ID, sc.Err())
	}
	var reply policyReply
	if err := json.Unmarshal(sc.Bytes(), &reply); err != nil {
		return nil, fmt.Errorf("change the network policy of %s: %w", sb.ID, err)
	}
	if reply.Error != "" {
		return nil, fmt.Errorf("change the network policy of %s: %s", sb.ID, reply.Error)
	}
	return reply.Policy, nil
}
