package pipeline

import (
	"context"
	"fmt"
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

// TestChangePolicyRegistryPreset: airlock allow ID @pypi adds the
// registry's hosts, read-only, and the policy it answers with names the
// preset; a deny with methods is refused.
func TestChangePolicyRegistryPreset(t *testing.T) {
	s := newStore(t)
	sb, err := s.Create(sandbox.Meta{Project: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	proxy := egress.New(egress.Config{}, &egress.Policy{})
	stop, err := servePolicyControl(context.Background(), sb.Path(EgressSocket), proxy, func(sandbox.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	pol, err := ChangePolicy(t.Context(), sb, PolicyChange{Allow: []string{"@pypi"}, Deny: []string{"@maven"}})
	if err != nil {
		t.Fatal(err)
	}
	allow := fmt.Sprint(pol["allow"])
	for _, want := range []string{"pypi.org:443 (GET,HEAD) [live @pypi]", "files.pythonhosted.org:443 (GET,HEAD) [live @pypi]"} {
		if !strings.Contains(allow, want) {
			t.Errorf("allow %s; want %q", allow, want)
		}
	}
	if deny := fmt.Sprint(pol["deny"]); !strings.Contains(deny, "repo1.maven.org:443 [live @maven]") {
		t.Errorf("deny %s: want @maven's hosts, whole", deny)
	}
	if d := proxy.Policy().Decide(egress.Request{Host: "files.pythonhosted.org", Port: 443, Method: "POST", Connect: true}); d.Allowed || !strings.Contains(d.Reason, "the @pypi preset (live rule") {
		t.Errorf("POST to a live @pypi host: %+v", d)
	}
	for _, bad := range []PolicyChange{{Allow: []string{"@pip"}}, {Deny: []string{"evil.example (GET)"}}} {
		if _, err := ChangePolicy(t.Context(), sb, bad); err == nil {
			t.Errorf("change %+v accepted", bad)
		}
	}
}
