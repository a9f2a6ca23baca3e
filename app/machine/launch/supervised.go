package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/airlock-dev/airlock/app/machine/vmhost"
	"github.com/airlock-dev/airlock/vm"
)

// Supervised is the machine a supervisor keeps running in a run directory
// (a kept sandbox's, airlock run --keep) as its checkpoints need it:
// paused, its state saved, and run on. It holds no connection; each call
// is one request to the supervisor.
type Supervised struct {
	c *vmhost.Client
}

var (
	_ vm.Pauser      = (*Supervised)(nil)
	_ vm.Snapshotter = (*Supervised)(nil)
)

// DialSupervised reaches the supervisor of run directory dir. When none
// answers, the error wraps vmhost.ErrNoSupervisor.
func DialSupervised(ctx context.Context, dir string) (*Supervised, error) {
	c, err := vmhost.Dial(ctx, dir)
	if err != nil {
		return nil, err
	}
	return &Supervised{c: c}, nil
}

// CanSave returns nil when the machine's backend can save it, else an
// error wrapping vm.ErrNotSupported that names the backend.
func (s *Supervised) CanSave(ctx context.Context) error {
	st, err := s.c.State(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(st.Can, vmhost.OpSave) {
		return fmt.Errorf("the %s backend cannot save this machine: %w", st.Backend, vm.ErrNotSupported)
	}
	return nil
}

// Pause stops the machine's vCPUs; an error wraps vm.ErrNotSupported when
// its backend cannot.
func (s *Supervised) Pause(ctx context.Context) error { return s.c.Pause(ctx) }

// Resume runs a paused machine again.
func (s *Supervised) Resume(ctx context.Context) error { return s.c.Resume(ctx) }

// Save saves the machine's state to path, beside which the backend may
// write more files (path plus a suffix).
func (s *Supervised) Save(ctx context.Context, path string) error { return s.c.Save(ctx, path) }

// Kill forces off the machine a supervisor runs in run directory dir and
// returns once it is gone. A supervisor that does not answer, or is gone
// by the time it is asked, is not an error: there is nothing to kill.
func Kill(ctx context.Context, dir string) error {
	c, err := vmhost.Dial(ctx, dir)
	if err != nil {
		return nil
	}
	if _, err := c.Kill(ctx); err != nil && !errors.Is(err, vmhost.ErrNoSupervisor) {
		return err
	}
	return nil
}

// ReadSpec reads the machine spec the supervisor of run directory dir was
// started with. When there is none to read, the error is os.ReadFile's
// (an *fs.PathError).
func ReadSpec(dir string) (vm.Spec, error) {
	var spec vm.Spec
	path := filepath.Join(dir, vmhost.SpecFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return spec, err
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		return spec, fmt.Errorf("machine spec %s: %w", path, err)
	}
	return spec, nil
}
