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
// named after the sandbox (its run directory is run/<a.ID>, where airlock
// ls and airlock stop find its supervisor). Shares and disks are added to
// the machine's spec, and the guest agent is told on the kernel command
// line (guest.VirtiofsArg, guest.DiskArg) where to mount them; Boot checks
// they are mounted before it returns.
func LaunchBoot(o launch.Options) func(ctx context.Context, a Attach) (Machine, error) {
	return func(ctx context.Context, a Attach) (Machine, error) {
		// Each machine its own options: fan-out boots several at once,
		// and a backend wrapped for one machine's disks must not wrap
		// the next one's too.
		o := o
		o.Name = a.ID
		if a.Root != "" {
			o.RootDisk = a.Root
		}
		if len(a.Shares) > 0 || len(a.Disks) > 0 {
			if o.Backend == nil {
				return nil, fmt.Errorf("launch: no backend")
			}
			o.Backend = attachingBackend{Backend: o.Backend, attach: a}
		}
		g, err := launch.Boot(ctx, o)
		if err != nil {
			return nil, err
		}
		m := guestMachine{g}
		if err := checkMounts(ctx, m, a); err != nil {
			g.Kill()
			return nil, err
		}
		return m, nil
	}
}

// attachingBackend adds shares and disks to every machine it starts, with
// the kernel arguments that have the guest agent mount them.
type attachingBackend struct {
	vm.Backend
	attach Attach
}

func (b attachingBackend) with(spec vm.Spec) vm.Spec {
	spec.Shares = append([]vm.Share(nil), spec.Shares...)
	spec.Disks = append([]vm.Disk(nil), spec.Disks...)
	args := []string{spec.Cmdline}
	for _, sh := range b.attach.Shares {
		spec.Shares = append(spec.Shares, sh.Share)
		args = append(args, guest.VirtiofsArg+"="+sh.Tag+":"+sh.Mount)
	}
	for _, d := range b.attach.Disks {
		// Disks are vda, vdb, … in the order of spec.Disks.
		dev := blockDevice(len(spec.Disks))
		spec.Disks = append(spec.Disks, vm.Disk{Path: d.Path, Format: "raw"})
		args = append(args, guest.DiskArg+"="+dev+":"+d.Mount)
	}
	spec.Cmdline = strings.TrimSpace(strings.Join(args, " "))
	return spec
}

// blockDevice is the guest's name of the i-th virtio block device.
func blockDevice(i int) string { return "vd" + string(rune('a'+i)) }

func (b attachingBackend) Validate(ctx context.Context, spec vm.Spec) error {
	return b.Backend.Validate(ctx, b.with(spec))
}

func (b attachingBackend) Start(ctx context.Context, spec vm.Spec) (vm.Machine, error) {
	return b.Backend.Start(ctx, b.with(spec))
}

// checkMounts makes sure each share is mounted in the guest as virtiofs
// and each disk as ext4: a command must never run in an empty directory
// where the project should be, nor without its quota.
func checkMounts(ctx context.Context, m Machine, a Attach) error {
	if len(a.Shares) == 0 && len(a.Disks) == 0 {
		return nil
	}
	var out, stderr bytes.Buffer
	if err := m.Exec(ctx, "cat /proc/mounts", nil, &out, &stderr); err != nil {
		return fmt.Errorf("check the guest's mounts: %w (%s)", err, strings.TrimSpace(stderr.String()))
	}
	for _, sh := range a.Shares {
		if !mounted(out.String(), sh.Tag, sh.Mount, "virtiofs") {
			return fmt.Errorf("the virtio-fs share %s is not mounted on %s in the guest (the guest kernel may lack the virtiofs module; its console log says why)", sh.Tag, sh.Mount)
		}
	}
	for i, d := range a.Disks {
		if !mounted(out.String(), "", d.Mount, "ext4") {
			return fmt.Errorf("the workspace disk (%d of %d) is not mounted on %s in the guest (the guest kernel may lack ext4; its console log says why)", i+1, len(a.Disks), d.Mount)
		}
	}
	return nil
}

// mounted reports whether /proc/mounts text has source (any, when empty)
// mounted on dir as fstype.
func mounted(procMounts, source, dir, fstype string) bool {
	for _, l := range strings.Split(procMounts, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && (source == "" || f[0] == source) && f[1] == dir && f[2] == fstype {
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

var (
	_ Machine       = guestMachine{}
	_ Killer        = guestMachine{}
	_ DefaultUserer = guestMachine{}
)

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

// DefaultUser is the image's user for commands (DefaultUserer).
func (m guestMachine) DefaultUser() string { return m.g.Image.User() }

// Kill forces the VM off at once (Killer).
func (m guestMachine) Kill() { m.g.Kill() }
