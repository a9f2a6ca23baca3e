package pipeline

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/sandbox"
)

// TestChangePolicyWhileRunning: airlock allow reaches the running
// sandbox's proxy through the control socket; the change is audited and
// bad rules are refused, changing nothing.
func TestChangePolicyWhileRunning(t *testing.T) {
	s := newStore(t)
	sb, err := s.Create(sandbox.Meta{Project: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	proxy := egress.New(egress.Config{}, &egress.Policy{Allow: []egress.Rule{{Host: "github.com", Source: "user"}}})
	var mu sync.Mutex
	var audited []sandbox.Event
	stop, err := servePolicyControl(context.Background(), sb.Path(EgressSocket), proxy, func(ev sandbox.Event) {
		mu.Lock()
		audited = append(audited, ev)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	decide := func(host string) bool {
		return proxy.Policy().Decide(egress.Request{Host: host, Port: 443, Method: "CONNECT", Connect: true}).Allowed
	}
	if decide("pypi.org") {
		t.Fatal("allowed before the change")
	}
	pol, err := ChangePolicy(t.Context(), sb, PolicyChange{Allow: []string{"pypi.org"}, Deny: []string{"evil.github.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if !decide("pypi.org") || !decide("github.com") {
		t.Errorf("after allow: policy %v", pol)
	}
	if _, err := ChangePolicy(t.Context(), sb, PolicyChange{Allow: []string{"a b", "ok.example"}}); err == nil || !strings.Contains(err.Error(), "a b") {
		t.Errorf("a bad rule: %v", err)
	}
	if decide("ok.example") {
		t.Error("a refused change was partly applied")
	}
	mu.Lock()
	if len(audited) != 1 || audited[0].Event != EventEgressPolicy {
		t.Errorf("audited: %+v", audited)
	}
	mu.Unlock()
	stop()
	if _, err := ChangePolicy(t.Context(), sb, PolicyChange{Allow: []string{"x.example"}}); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("after the run: %v", err)
	}
}
