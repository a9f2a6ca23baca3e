package launch

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/machine/vmhost"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/internal/atomicfile"
)

// identityFile, in a supervised machine's run directory, keeps what a
// later process needs to resume the guest agent: the sandbox identity's key
// and the guest's host key from first contact. The run directory is the
// user's alone (0700), and the key opens only this throwaway VM.
const identityFile = "identity.json"

type savedIdentity struct {
	Hostname string `json:"hostname"`
	Key      string `json:"key"`      // OpenSSH private key, PEM
	HostKey  string `json:"host_key"` // the guest's, authorized_keys line
}

// newIdentity is client.NewIdentity that also returns the private key, so
// that a supervised machine's identity can be saved.
func newIdentity(hostname string) (client.Identity, ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return client.Identity{}, nil, fmt.Errorf("generate client key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return client.Identity{}, nil, fmt.Errorf("generate client key: %w", err)
	}
	return client.Identity{Signer: signer, Hostname: hostname}, priv, nil
}

// saveIdentity writes the identity file of run directory dir.
func saveIdentity(dir string, id client.Identity, priv ed25519.PrivateKey, hostKey string) error {
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return fmt.Errorf("save identity: %w", err)
	}
	data, _ := json.Marshal(savedIdentity{Hostname: id.Hostname, Key: string(pem.EncodeToMemory(block)), HostKey: hostKey})
	if err := atomicfile.WriteFile(filepath.Join(dir, identityFile), data, 0o600); err != nil {
		return fmt.Errorf("save identity: %w", err)
	}
	return nil
}

func loadIdentity(dir string) (client.Identity, ssh.PublicKey, error) {
	data, err := os.ReadFile(filepath.Join(dir, identityFile))
	if err != nil {
		return client.Identity{}, nil, fmt.Errorf("load identity: %w", err)
	}
	var s savedIdentity
	if err := json.Unmarshal(data, &s); err != nil {
		return client.Identity{}, nil, fmt.Errorf("load identity: %w", err)
	}
	signer, err := ssh.ParsePrivateKey([]byte(s.Key))
	if err != nil {
		return client.Identity{}, nil, fmt.Errorf("load identity: %w", err)
	}
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(s.HostKey))
	if err != nil {
		return client.Identity{}, nil, fmt.Errorf("load identity: host key: %w", err)
	}
	return client.Identity{Signer: signer, Hostname: s.Hostname}, hostKey, nil
}

// Attach reconnects to the machine of run directory run/<o.Name>, which a
// supervisor kept running after the process that booted it went away: it
// resumes the guest agent with the identity Boot saved there and pins the
// guest's host key from first contact. Only Home, Name, BootTimeout,
// Progress and Logger of o are used. The machine does not end with ctx;
// Shutdown and Kill end it as after Boot. Guest.Image is nil.
func Attach(ctx context.Context, o Options) (*Guest, error) {
	if o.Name == "" {
		return nil, errors.New("attach: no machine name")
	}
	progress := o.Progress
	if progress == nil {
		progress = func(Event) {}
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	timeout := o.BootTimeout
	if timeout == 0 {
		timeout = DefaultBootTimeout
	}
	start := time.Now()
	dir := home.Layout{Root: o.Home}.Run(o.Name)
	m, err := vmhost.Attach(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("attach to %s: %w", o.Name, err)
	}
	id, hostKey, err := loadIdentity(dir)
	if err != nil {
		return nil, fmt.Errorf("attach to %s: %w", o.Name, err)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := client.Connect(cctx, m.DialLink, client.Config{Identity: id, Resume: true, HostKey: hostKey, Logger: logger, Ciphers: ciphersFor(m)})
	if err != nil {
		return nil, fmt.Errorf("attach to %s: %w", o.Name, err)
	}
	g := &Guest{Machine: m, Client: c, Identity: id, Dir: dir, dial: m.DialLink, progress: progress, start: start}
	progress(Event{Step: StepReady, Message: fmt.Sprintf("attached (%s, link %s)", c.Welcome().Kernel, m.LinkKind()), Elapsed: time.Since(start)})
	return g, nil
}
