package transfer_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/pkg/sftp"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/transfer"
)

var (
	buildDir   string
	buildAgent = sync.OnceValues(func() (string, error) {
		bin := filepath.Join(buildDir, "airlock-guest")
		out, err := exec.Command("go", "build", "-o", bin, "../../guest/cmd/airlock-guest").CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("build airlock-guest: %v\n%s", err, out)
		}
		return bin, nil
	})
)

// agentBin returns airlock-guest built for the host, once per run: the
// fake guest runs the real untar, tar and manifest subcommands.
func agentBin(t *testing.T) string {
	t.Helper()
	bin, err := buildAgent()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "transfer-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	buildDir = dir
	// The guest binary these tests run on the host keeps its manifest
	// state here, not in the host's /run.
	os.Setenv(transfer.StateDirEnv, filepath.Join(dir, "state"))
	return m.Run()
}

// localRemote is a guest played by this host: SFTP is pkg/sftp's server
// over in-process pipes, Exec runs /bin/sh -c locally. Paths are host
// paths (tests use temp dirs).
type localRemote struct {
	t *testing.T
	// exec, when set, replaces running the script: a hostile guest.
	exec func(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error
	// scripts records what was run.
	scripts []string
}

func (r *localRemote) SFTP(opts ...sftp.ClientOption) (*sftp.Client, error) {
	c2s, toServer := io.Pipe()
	fromServer, s2c := io.Pipe()
	srv, err := sftp.NewServer(struct {
		io.Reader
		io.WriteCloser
	}{c2s, s2c}, sftp.WithServerWorkingDirectory(os.TempDir())) // as the guest agent's
	if err != nil {
		return nil, err
	}
	go func() {
		srv.Serve()
		srv.Close()
		s2c.Close()
	}()
	c, err := sftp.NewClientPipe(fromServer, toServer, opts...)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (r *localRemote) Exec(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error {
	r.scripts = append(r.scripts, script)
	if r.exec != nil {
		return r.exec(ctx, script, stdin, stdout, stderr)
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	return cmd.Run()
}

// remoteManifest asks for the whole manifest of dir, as a host that knows
// nothing of it does.
func remoteManifest(ctx context.Context, r transfer.Remote, dir string, opts transfer.Options) (*manifest.Manifest, error) {
	k, err := transfer.RemoteManifest(ctx, r, dir, transfer.Known{}, opts)
	return k.Manifest, err
}
