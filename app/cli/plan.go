package cli

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/lockio"
	"github.com/airlock-dev/airlock/vm"
)

// openPlanner is the planner of this command's Airlock home (e.home),
// the opening every command that plans shares.
func (e *env) openPlanner(lines *lockio.Writer) (*plan.Planner, error) {
	h, err := e.home()
	if err != nil {
		return nil, err
	}
	return e.planner(h, lines)
}

// openImages is where this command's Airlock home gets its images: the
// planner's Source (its backend for builders, sized by the user's
// limits; its notes), for the image and env commands, which plan no run.
func (e *env) openImages(lines *lockio.Writer) (*images.Source, error) {
	pl, err := e.openPlanner(lines)
	if err != nil {
		return nil, err
	}
	return pl.Images(), nil
}

// planner is how every command (and the desktop app) plans a run on this
// host: the user's files, this OS's backend under a supervisor, the
// environment for secrets. Notes go to stderr; each egress request is a
// line on lines (unless --quiet), which the caller also gives the
// command's stderr.
func (e *env) planner(h string, lines *lockio.Writer) (*plan.Planner, error) {
	path, err := config.UserPath(os.Getenv)
	if err != nil {
		return nil, err
	}
	return &plan.Planner{
		Home: h, ImageRoots: home.BundleImageRoots(), UserConfig: path, Agents: loadAgents,
		Backend: func(idleTTL time.Duration) (vm.Backend, error) { return supervisedBackend(e, h, idleTTL) },
		Getenv:  os.Getenv, HostCPUs: runtime.NumCPU(), Arch: runtime.GOARCH,
		Note:        func(s string) { e.note("%s", s) },
		BuildOutput: lines,
		AgentsRepo:  os.Getenv("AIRLOCK_AGENTS_REPO"),
		SendDial:    e.sendDial, SendRootCAs: e.sendRoots,
		BuildDial: e.buildDial, BuildRootCAs: e.buildRoots,
		OnRequest: func(r egress.Record) {
			// A vendor refusing the credential is said even when quiet:
			// the agent's own message may not say why it failed.
			if !e.quiet || r.Rejected() {
				// The path and host are the guest's: shown safely, on one
				// line, as airlock logs shows them.
				fmt.Fprintf(lines, "airlock: net: %s\n", shownLine(e.stderr, r.String()))
			}
		},
	}, nil
}

// request is the limits the flags give; zero fields are not given.
func (l *limitFlags) request(b *bootFlags) config.Limits {
	return config.Limits{
		CPUs: b.cpus, Memory: b.memory.Size, Disk: l.disk, Timeout: l.timeout,
		MaxPullBytes: l.maxPullBytes, MaxFiles: l.maxFiles, MaxFileSize: l.maxFileSize,
	}
}

// cliError adds to an error of planning or of the sandbox what to do
// about it on the command line; every command's error goes through it.
func cliError(err error) error {
	var untrusted *plan.UntrustedError
	var untrustedEnv *images.UntrustedEnvironmentError
	switch {
	case errors.As(err, &untrusted), errors.As(err, &untrustedEnv):
		return fmt.Errorf("%w\n(or run again with --trust-project)", err)
	case errors.Is(err, sandbox.ErrRunning):
		return fmt.Errorf("%w: stop it first (airlock stop), or use --force", err)
	case errors.Is(err, sandbox.ErrNoVM):
		return fmt.Errorf("%w (keep a sandbox's VM running with airlock run --keep)", err)
	case errors.Is(err, pipeline.ErrNoUser):
		return fmt.Errorf("%w; the minimal image has no user but root, the full image has agent (--image full)", err)
	}
	return err
}
