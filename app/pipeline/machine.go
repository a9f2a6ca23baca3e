package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/pkg/sftp"

	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/guest/client"
)

// LaunchBoot returns a RunOptions.Boot that boots a VM with launch.Boot,
// named after the sandbox (its run directory is run/<a.ID>, where airlock
// ls and airlock stop find its supervisor). Shares and disks are handed to
// launch, which attaches them and has the guest agent mount them (on the
// kernel command line, or at first contact after a warm start); Boot
// checks they are mounted before it returns: in the guest's mount table,
// unless the first contact vouched for them already (mountsChecked).
func LaunchBoot(o launch.Options) func(ctx context.Context, a Attach) (Machine, error) {
	return func(ctx context.Context, a Attach) (Machine, error) {
		o := o // fan-out boots several at once
		o.Name = a.ID
		if a.Root != "" {
			o.RootDisk = a.Root
		}
		o.Shares, o.Disks = a.Shares, a.Disks
		g, err := launch.Boot(ctx, o)
		if err != nil {
			return nil, err
		}
		m := guestMachine{g}
		if mountsChecked(g, a) {
			return m, nil
		}
		if err := checkMounts(ctx, m, a); err != nil {
			g.Kill()
			return nil, err
		}
		return m, nil
	}
}

// mountsChecked says the guest's first contact already proved every
// mount a asks for: there are no shares (a cold boot mounts them, and
// only logs a failure) and the disks were mounted at first contact, which
// fails unless each one mounted on its directory. Asking the guest again
// took a command's round trip of every warm run.
func mountsChecked(g *launch.Guest, a Attach) bool {
	return len(a.Shares) == 0 && (len(a.Disks) == 0 || g.DisksMounted)
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
		fstype := "ext4"
		if d.Lower != "" {
			fstype = "overlay"
		}
		if !mounted(out.String(), "", d.Mount, fstype) {
			return fmt.Errorf("the workspace disk (%d of %d) is not mounted on %s in the guest (the guest kernel may lack ext4 or overlay; its console log says why)", i+1, len(a.Disks), d.Mount)
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
	_ Detacher      = guestMachine{}
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

// Detach leaves the VM running under its supervisor (Detacher).
func (m guestMachine) Detach() error { return m.g.Detach() }

// Kill forces the VM off at once (Killer).
func (m guestMachine) Kill() { m.g.Kill() }
