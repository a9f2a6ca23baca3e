package sandbox

import (
	"context"
	"io"

	"github.com/pkg/sftp"

	"github.com/airlock-dev/airlock/app/launch"
	"github.com/airlock-dev/airlock/guest/client"
)

// LaunchBoot returns a RunOptions.Boot that boots a VM with launch.Boot.
func LaunchBoot(o launch.Options) func(ctx context.Context) (Machine, error) {
	return func(ctx context.Context) (Machine, error) {
		g, err := launch.Boot(ctx, o)
		if err != nil {
			return nil, err
		}
		return guestMachine{g}, nil
	}
}

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
