// Package client is the host side of the guest link: it dials a guest
// (over vsock, a unix socket, TCP or anything else a DialFunc returns),
// performs the first-contact or resume handshake of package guest, and
// speaks SSH to airlock-guest with the guest's host key pinned: running
// commands (with or without a PTY), SFTP, and power-off.
//
// It imports only the wire contract in package guest and its SSH and SFTP
// libraries. It must not import vm, guest/agent, fyne, vz, sync or review:
// the app wires a machine's dialer in.
package client

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/airlock-dev/airlock/guest"
)

// Identity is what the host gives a guest at first contact: the SSH key
// the guest will accept from then on, and its host name.
type Identity struct {
	Signer   ssh.Signer
	Hostname string
}

// NewIdentity returns an identity with a fresh ed25519 key.
func NewIdentity(hostname string) (Identity, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Identity{}, fmt.Errorf("generate client key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return Identity{}, fmt.Errorf("generate client key: %w", err)
	}
	return Identity{Signer: signer, Hostname: hostname}, nil
}

// Config configures Connect.
type Config struct {
	// Identity authenticates the host. At first contact it is given to the
	// guest; on resume it must be the one given then.
	Identity Identity
	// Resume is false for the first connection of a guest's life and true
	// for every later one.
	Resume bool
	// HostKey, if set, is the guest host key learned at first contact; the
	// Welcome of a resumed connection must carry the same key. Nil pins
	// whatever key the Welcome carries.
	HostKey ssh.PublicKey
	// Disks, at first contact, are disks for the guest to mount (each
	// "DEV:DIR", guest.Hello's Disks).
	Disks []string
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
	// Ciphers are the SSH ciphers offered, in order of preference (nil:
	// x/crypto/ssh's, AES-GCM first); EmulatedCiphers for a guest whose
	// CPU is emulated.
	Ciphers []string
}

// EmulatedCiphers puts ChaCha20-Poly1305 first, for a guest whose CPU is
// emulated (QEMU's TCG): there the guest's AES-NI and carry-less
// multiplications are emulated instruction by instruction, and it seals
// AES-GCM at about half the rate of ChaCha20-Poly1305 (7.6 against
// 13.2 MB/s under qemu-x86_64 -cpu max on a 2-core host), which bounds
// every byte the link carries: a layer coming back, a download through
// the egress proxy. With the CPU's own AES, AES-GCM is the faster.
var EmulatedCiphers = []string{ssh.CipherChaCha20Poly1305, ssh.CipherAES128GCM, ssh.CipherAES256GCM}

// DialFunc opens a new link connection to the guest. It may return one end
// of a net.Pipe (in tests): the client then buffers its writes, which SSH
// needs and net.Pipe lacks.
type DialFunc func(ctx context.Context) (net.Conn, error)

// ErrRefused is returned (wrapped, with the guest's reason) by Connect when
// the guest refused the hello: a first contact to a guest that already has
// an identity, a resume to one that has none, or a protocol mismatch.
var ErrRefused = errors.New("guest refused the hello")

// entropySize is how many random bytes seed the guest's pool.
const entropySize = 64

// Client is an SSH connection to a guest agent.
type Client struct {
	log     *slog.Logger
	welcome guest.Welcome
	ssh     *ssh.Client

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

// Connect dials the guest, performs the handshake and the SSH handshake
// with the host key pinned to the one the guest announced. ctx bounds the
// whole connect; it does not bound the returned Client.
func Connect(ctx context.Context, dial DialFunc, cfg Config) (*Client, error) {
	if cfg.Identity.Signer == nil {
		return nil, errors.New("connect to guest: config has no identity signer")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	conn, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("dial guest: %w", err)
	}
	conn = withWriteBuffer(conn)
	c, err := handshake(ctx, conn, cfg, log)
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connect to guest: %w (%w)", ctx.Err(), err)
		}
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			// The conn's deadline fired just before ctx's timer.
			return nil, fmt.Errorf("connect to guest: %w (%w)", context.DeadlineExceeded, err)
		}
		return nil, fmt.Errorf("connect to guest: %w", err)
	}
	return c, nil
}

func handshake(ctx context.Context, conn net.Conn, cfg Config, log *slog.Logger) (*Client, error) {
	// The conn is closed if ctx ends mid-handshake; deadlines bound it too
	// on links that support them.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}

	hello := guest.Hello{Version: guest.ProtocolVersion, Resume: cfg.Resume, Time: time.Now()}
	hello.Entropy = make([]byte, entropySize)
	if _, err := rand.Read(hello.Entropy); err != nil {
		return nil, fmt.Errorf("entropy seed: %w", err)
	}
	if !cfg.Resume {
		hello.ClientKey = string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(cfg.Identity.Signer.PublicKey())))
		hello.Hostname = cfg.Identity.Hostname
		hello.Disks = cfg.Disks
	}
	if _, err := conn.Write([]byte(guest.Magic)); err != nil {
		return nil, fmt.Errorf("write magic: %w", err)
	}
	if err := guest.WriteMessage(conn, hello); err != nil {
		return nil, fmt.Errorf("write hello: %w", err)
	}
	var w guest.Welcome
	if err := guest.ReadMessage(conn, &w); err != nil {
		return nil, fmt.Errorf("read welcome: %w", err)
	}
	if w.Error != "" {
		return nil, fmt.Errorf("%w: %s", ErrRefused, w.Error)
	}
	if w.Version != guest.ProtocolVersion {
		return nil, fmt.Errorf("guest speaks protocol version %d, this host %d; rebuild the guest image", w.Version, guest.ProtocolVersion)
	}
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(w.HostKey))
	if err != nil {
		return nil, fmt.Errorf("welcome: host key: %w", err)
	}
	if cfg.HostKey != nil && !bytes.Equal(cfg.HostKey.Marshal(), hostKey.Marshal()) {
		return nil, fmt.Errorf("welcome: host key %s is not the guest's key %s from first contact",
			ssh.FingerprintSHA256(hostKey), ssh.FingerprintSHA256(cfg.HostKey))
	}

	sshConn, chans, reqs, err := ssh.NewClientConn(conn, "airlock", &ssh.ClientConfig{
		User:            "root",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(cfg.Identity.Signer)},
		HostKeyCallback: ssh.FixedHostKey(hostKey),
		Config:          ssh.Config{Ciphers: cfg.Ciphers},
	})
	if err != nil {
		return nil, fmt.Errorf("ssh handshake: %w", err)
	}
	if !stop() {
		sshConn.Close()
		return nil, ctx.Err()
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		// A conn that took a deadline must be able to drop it.
		if _, ok := ctx.Deadline(); ok {
			sshConn.Close()
			return nil, fmt.Errorf("clear deadline: %w", err)
		}
	}
	log.Debug("connected to guest", "kernel", w.Kernel, "arch", w.Arch, "host_key", ssh.FingerprintSHA256(hostKey))
	return &Client{
		log:     log,
		welcome: w,
		ssh:     ssh.NewClient(sshConn, chans, reqs),
		closed:  make(chan struct{}),
	}, nil
}

// Probe asks the guest agent whether it is ready (guest.ProbeMagic)
// without giving it an identity, and returns its answer, which has no host
// key. It returns once the agent could run a command, or when ctx ends.
func Probe(ctx context.Context, dial DialFunc) (guest.Welcome, error) {
	var w guest.Welcome
	conn, err := dial(ctx)
	if err != nil {
		return w, fmt.Errorf("probe guest: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte(guest.ProbeMagic)); err != nil {
		return w, fmt.Errorf("probe guest: %w", err)
	}
	if err := guest.ReadMessage(conn, &w); err != nil {
		if ctx.Err() != nil {
			return w, fmt.Errorf("probe guest: %w (%w)", ctx.Err(), err)
		}
		return w, fmt.Errorf("probe guest: %w", err)
	}
	if w.Error != "" {
		return w, fmt.Errorf("probe guest: %w: %s", ErrRefused, w.Error)
	}
	if w.Version != guest.ProtocolVersion {
		return w, fmt.Errorf("probe guest: guest speaks protocol version %d, this host %d; rebuild the guest image", w.Version, guest.ProtocolVersion)
	}
	return w, nil
}

// Welcome returns the guest's answer to the hello: its host key, kernel
// and architecture.
func (c *Client) Welcome() guest.Welcome { return c.welcome }

// SSH returns the underlying SSH client, for what this package does not
// wrap (port forwarding, raw sessions).
func (c *Client) SSH() *ssh.Client { return c.ssh }

// SFTP opens an SFTP session on the guest. Relative paths resolve against
// the guest's HOME.
func (c *Client) SFTP(opts ...sftp.ClientOption) (*sftp.Client, error) {
	s, err := sftp.NewClient(c.ssh, opts...)
	if err != nil {
		return nil, fmt.Errorf("open sftp: %w", err)
	}
	return s, nil
}

// PowerOff asks the guest to sync its file systems and power off. It
// succeeds when the guest acknowledges, or when the connection drops
// because the guest went down first.
func (c *Client) PowerOff(ctx context.Context) error {
	type reply struct {
		ok  bool
		err error
	}
	done := make(chan reply, 1)
	go func() {
		ok, _, err := c.ssh.SendRequest(guest.RequestPowerOff, true, nil)
		done <- reply{ok, err}
	}()
	select {
	case <-ctx.Done():
		return fmt.Errorf("power off guest: %w", ctx.Err())
	case r := <-done:
		switch {
		case r.err != nil && c.isClosed():
			return fmt.Errorf("power off guest: %w", net.ErrClosed)
		case r.err != nil:
			// The connection dropped: the guest is going down.
			c.log.Debug("connection dropped at power off", "err", r.err)
			return nil
		case !r.ok:
			return errors.New("power off guest: the guest refused (its agent does not run as PID 1)")
		}
		return nil
	}
}

func (c *Client) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// Close closes the connection. It is idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.closeErr = c.ssh.Close()
		if errors.Is(c.closeErr, net.ErrClosed) {
			c.closeErr = nil
		}
	})
	return c.closeErr
}
