package images

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/testkit/ocitest"
	"github.com/airlock-dev/airlock/vm"
)

// TestBuildPrepares: Build makes a request a builder's provisioning
// without booting anything: the apt step first with @debian allowed, the
// rules named after the request, the builder sized by the Source's limits
// unless the request sizes it, its record under builds/; without a
// backend it says this airlock cannot boot machines.
func TestBuildPrepares(t *testing.T) {
	src, _ := testSource(t)
	pushedAgents(t, src, ocitest.NewRegistry(t))
	src.Limits = func() (config.Limits, error) { return config.Limits{CPUs: 3, Memory: config.GiB}, nil }
	src.Backend = func() (vm.Backend, error) { return nil, nil }
	req := BuildRequest{Name: "go", Base: AgentsImage, Apt: []string{"golang-go"}, Allow: []string{"proxy.golang.org"},
		Steps: []SetupStep{{Name: "run 1", Shell: "go version"}}, Source: "image build"}
	prov, err := src.Build(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(prov.Steps) != 2 || prov.Steps[0].Name != "apt" || !strings.Contains(prov.Steps[0].Shell, "golang-go") || prov.Steps[1].Name != "run 1" {
		t.Errorf("steps %+v", prov.Steps)
	}
	var hosts []string
	for _, r := range prov.Policy.Allow {
		hosts = append(hosts, r.Host)
		if r.Source != "image build" {
			t.Errorf("rule %+v: want it named after the request", r)
		}
	}
	if !strings.Contains(strings.Join(hosts, " "), "debian.org") || hosts[len(hosts)-1] != "proxy.golang.org" {
		t.Errorf("allowed hosts %q: want @debian's, then the request's", hosts)
	}
	if prov.Launch.CPUs != 3 || prov.Launch.MemoryMiB != 1024 || prov.Launch.Network != vm.NetworkNone {
		t.Errorf("builder %+v: want the Source's limits and no network device", prov.Launch)
	}
	if want := filepath.Join(home.Layout{Root: src.Home}.Builds(), "go"); prov.Dir != want || prov.Base.Name != AgentsImage {
		t.Errorf("record in %s, base %s", prov.Dir, prov.Base.Name)
	}
	req.CPUs, req.MemoryMiB = 1, 512
	if prov, err := src.Build(req); err != nil || prov.Launch.CPUs != 1 || prov.Launch.MemoryMiB != 512 {
		t.Errorf("a request's own size: %+v %v", prov.Launch, err)
	}

	src.Backend = nil
	if _, err := src.Build(req); err == nil || !strings.Contains(err.Error(), "cannot boot machines") {
		t.Errorf("no backend: %v", err)
	}
	if _, err := src.Build(BuildRequest{Name: "x", Base: "minimal"}); err == nil || !strings.Contains(err.Error(), "not made from an OCI image") {
		t.Errorf("a base not made from an OCI image: %v", err)
	}
}
