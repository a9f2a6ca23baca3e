package plan

import (
	"context"
	"maps"
	"time"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// ExecRequest is a command to run in a fresh VM, or in a kept sandbox's
// VM (airlock exec). Zero fields are not given.
type ExecRequest struct {
	// Sandbox, when set, is a kept sandbox whose running VM runs the
	// command; the boot and network fields do not apply to it.
	Sandbox string
	Image   string
	Arch    string
	Env     map[string]string
	// Limits are the request's own (CPUs, Memory, Timeout).
	Limits      config.Limits
	OpenNetwork bool
	Allow       []string
	Link        vm.LinkKind
	BootTimeout time.Duration
	Cold        bool
}

// ExecPlan is how to run one command.
type ExecPlan struct {
	// Launch boots the fresh VM, or (with Sandbox) attaches to the kept
	// one.
	Launch launch.Options
	// Sandbox is the kept sandbox the command runs in, if any; Image is
	// the image it booted (its default user runs the command), nil when
	// it cannot be found any more.
	Sandbox *sandbox.Sandbox
	Image   *image.Image
	// Network is the fresh VM's way out (nil: an open network, or a kept
	// sandbox's VM, whose proxy ended with its run).
	Network *pipeline.Network
	// Env is the command's environment (the network's variables are added
	// once it runs).
	Env map[string]string
	// Timeout ends the command; zero means none.
	Timeout     time.Duration
	Limits      config.Limits
	OpenNetwork bool
}

// Exec plans a command: the limits as for a run (without a project, or
// with the kept sandbox's), the network of the user's configuration and
// the request's allow rules.
func (pl *Planner) Exec(ctx context.Context, req ExecRequest) (*ExecPlan, error) {
	user, err := pl.user()
	if err != nil {
		return nil, err
	}
	var proj config.Project
	p := &ExecPlan{Env: maps.Clone(req.Env)}
	if req.Sandbox != "" {
		store, err := sandbox.Open(pl.Home)
		if err != nil {
			return nil, err
		}
		store.HostExec = pl.HostExec
		if p.Sandbox, err = store.Get(req.Sandbox); err != nil {
			return nil, err
		}
		m, err := p.Sandbox.Meta()
		if err != nil {
			return nil, err
		}
		if proj, err = config.Load(m.Project); err != nil {
			return nil, err
		}
		req.Image, req.Arch = m.Image, m.Arch
		if req.Image != "" {
			p.Image, _ = pl.Images().Find(req.Image, req.Arch)
		}
	}
	eff, err := pl.limits(user, proj, req.Limits, req.OpenNetwork && req.Sandbox == "")
	if err != nil {
		return nil, err
	}
	p.Limits, p.Timeout = eff.Limits, eff.Limits.Timeout.Std()
	if req.Sandbox != "" {
		p.Launch = launch.Options{Home: pl.Home, Name: p.Sandbox.ID, BootTimeout: req.BootTimeout}
		if p.Launch.BootTimeout <= 0 {
			p.Launch.BootTimeout = launch.DefaultBootTimeout
		}
		return p, nil
	}
	p.OpenNetwork = eff.OpenNetwork
	backend, err := pl.Backend(eff.Limits.IdleTTL.Std())
	if err != nil {
		return nil, err
	}
	if req.Image == "" {
		req.Image = "minimal"
	}
	p.Launch = pl.launchOptions(Request{Link: req.Link, BootTimeout: req.BootTimeout, Cold: req.Cold}, eff, backend, req.Image, pl.arch(req.Arch))
	if !eff.OpenNetwork {
		run := &Plan{OpenNetwork: false}
		if p.Network, err = pl.network(ctx, user, config.Project{}, run, nil, nil, Request{Allow: req.Allow}); err != nil {
			return nil, err
		}
	}
	return p, nil
}
