package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/pkg/sftp"

	"github.com/airlock-dev/airlock/app/launch"
	"github.com/airlock-dev/airlock/guest"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/vm"
)

// LaunchBoot returns a RunOptions.Boot that boots a VM with launch.Boot,
// named after the sandbox (its run directory is run/<id>, where airlock ls
// and airlock stop find its supervisor). Shares are added to the machine's
// spec, and the guest agent is told on the kernel command line
// (guest.VirtiofsArg) where to mount them; Boot checks they are mounted
// before it returns.
func LaunchBoot(o launch.Options) func(ctx context.Context, id string, shares []Share) (Machine, error) {
	return func(ctx context.Context, id string, shares []Share) (Machine, error) {
		o.Name = id
		if len(shares) > 0 {
			if o.Backend == nil {
				return nil, fmt.Errorf("launch: no backend")
			}
			o.Backend = sharingBackend{Backend: o.Backend, shares: shares}
		}
		g, err := launch.Boot(ctx, o)
		if err != nil {
			return nil, err
		}
		m := guestMachine{g}
		if err := checkMounts(ctx, m, shares); err != nil {
			g.Kill()
			return nil, err
		}
		return m, nil
	}
}

// sharingBackend adds shares to every machine it starts, with the kernel
// arguments that have the guest agent mount them.
type sharingBackend struct {
	vm.Backend
	shares []Share
}

func (b sharingBackend) with(spec vm.Spec) vm.Spec {
	spec.Shares = append([]vm.Share(nil), spec.Shares...)
	args := []string{spec.Cmdline}
	for _, sh := range b.shares {
		spec.Shares = append(spec.Shares, sh.Share)
		args = append(args, guest.VirtiofsArg+"="+sh.Tag+":"+sh.Mount)
	}
	spec.Cmdline = strings.TrimSpace(strings.Join(args, " "))
	return spec
}

func (b sharingBackend) Validate(ctx context.Context, spec vm.Spec) error {
	return b.Backend.Validate(ctx, b.with(spec))
}

func (b sharingBackend) Start(ctx context.Context, spec vm.Spec) (vm.Machine, error) {
	return b.Backend.Start(ctx, b.with(spec))
}

// checkMounts makes sure each share is mounted in the guest as virtiofs:
// a command must never run in an empty directory where the project
// should be.
func checkMounts(ctx context.Context, m Machine, shares []Share) error {
	for _, sh := range shares {
		var out, stderr bytes.Buffer
		if err := m.Exec(ctx, "cat /proc/mounts", nil, &out, &stderr); err != nil {
			return fmt.Errorf("check the %s share: %w (%s)", sh.Tag, err, strings.TrimSpace(stderr.String()))
		}
		if !mounted(out.String(), sh.Tag, sh.Mount) {
			return fmt.Errorf("the virtio-fs share %s is not mounted on %s in the guest (the guest kernel may lack the virtiofs module; its console log says why)", sh.Tag, sh.Mount)
		}
	}
	return nil
}

// mounted reports whether /proc/mounts text has tag mounted on dir as
// virtiofs.
func mounted(procMounts, tag, dir string) bool {
	for _, l := range strings.Split(procMounts, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == tag && f[1] == dir && f[2] == "virtiofs" {
			return true
		}
	}
	return false
}

// GuestMachine is a booted guest as a Machine (a Forwarder too), for
// commands that boot with launch themselves (airlock exec).
func GuestMachine(g *launch.Guest) Machine { return guestMachine{g} }

// guestMachine adapts a booted *launch.Guest to Machine.
type guestMachine struct{ g *launch.Guest }

var _ Machine = guestMachine{}

func (m guestMachine) SFTP(opts ...sftp.ClientOption) (*sftp.Client, error) {
	return m.g.Client.SFTP(opts...)
}

func (m guestMachine) Exec(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error {
	return m.g.Client.Run(ctx, client.Command{Script: script, Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

func (m guestMachine) Run(ctx context.Context, cmd client.Command) error {
	return m.g.Client.Run(ctx, cmd)
}

func (m guestMachine) Shutdown(ctx context.Context) error { return m.g.Shutdown(ctx) }
