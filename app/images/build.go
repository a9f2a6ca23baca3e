package images

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
	"github.com/airlock-dev/airlock/vm/oci"
)

// BuildRequest asks for an image made of a base and provisioning steps.
type BuildRequest struct {
	// Name is the image to make; Base the image it starts from (one made
	// from an OCI image); Arch the guest's (empty: the Source's).
	Name, Base, Arch string
	// Key identifies the inputs and Label says what the image is for,
	// both recorded in the image (empty: none).
	Key, Label string
	// Apt are Debian packages installed first; Steps run after, in order.
	Apt   []string
	Steps []SetupStep
	Env   map[string]string
	// User is the image's user for commands (empty: root).
	User string
	// Allow are the hosts the steps may reach (egress.ParseRules
	// patterns and registry presets); an apt step adds @debian.
	Allow []string
	// Source names where the request came from for the rules'
	// provenance ("image build", "environment .devcontainer/…").
	Source string
	// CPUs and MemoryMiB size the builder (zero: the Source's Limits).
	CPUs      int
	MemoryMiB int
	Link      vm.LinkKind
	// BootTimeout bounds the builder's boot (zero: launch's default).
	BootTimeout time.Duration
}

// Build prepares the provisioning of an image: the builder VM on this host's
// backend, the network its steps may use, where the build's record goes.
func (src *Source) Build(req BuildRequest) (Provision, error) {
	arch := vm.Arch(src.arch(req.Arch))
	base, err := image.Find(src.imageRoots(), req.Base, arch)
	if err != nil {
		return Provision{}, err
	}
	if base.Meta.OCI == nil {
		return Provision{}, fmt.Errorf("image %s is not made from an OCI image: provisioning starts from one (airlock image pull REF)", req.Base)
	}
	boot, err := image.Find(src.imageRoots(), image.DefaultName, arch)
	if err != nil {
		return Provision{}, fmt.Errorf("the minimal image boots provisioned images: %w", err)
	}
	allow := req.Allow
	var steps []SetupStep
	if len(req.Apt) > 0 {
		allow = append([]string{"@debian"}, allow...)
		steps = append(steps, AptStep(req.Apt))
	}
	steps = append(steps, req.Steps...)
	pol := &egress.Policy{}
	for _, a := range allow {
		rules, err := egress.ParseRules(a)
		if err != nil {
			return Provision{}, fmt.Errorf("%s: allow %q: %w", req.Source, a, err)
		}
		for i := range rules {
			if rules[i].Source == "" {
				rules[i].Source = req.Source
			}
		}
		pol.Allow = append(pol.Allow, rules...)
	}
	lim, err := src.limits()
	if err != nil {
		return Provision{}, err
	}
	cpus, mem := lim.CPUs, lim.Memory.MiB()
	if req.CPUs > 0 {
		cpus = req.CPUs
	}
	if req.MemoryMiB > 0 {
		mem = req.MemoryMiB
	}
	backend, err := src.backend()
	if err != nil {
		return Provision{}, err
	}
	timeout := req.BootTimeout
	if timeout <= 0 {
		timeout = launch.DefaultBootTimeout
	}
	return Provision{
		Launch: launch.Options{Home: src.Home, ImageRoots: src.ImageRoots, Arch: arch, CPUs: cpus, MemoryMiB: mem,
			Link: req.Link, Network: vm.NetworkNone, Backend: backend, BootTimeout: timeout,
			Progress: func(launch.Event) {}, Notice: func(s string) { src.note("%s", s) }},
		Base: base, Boot: boot, Name: req.Name, Key: req.Key, Label: req.Label, User: req.User, Steps: steps, Env: req.Env, Policy: pol,
		Store: oci.Store{Dir: home.Layout{Root: src.Home}.OCI()},
		Dir:   filepath.Join(home.Layout{Root: src.Home}.Builds(), req.Name),
		Dial:  src.BuildDial, RootCAs: src.BuildRootCAs,
	}, nil
}
