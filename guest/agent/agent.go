// Package agent is airlock-guest, the server that runs inside every Airlock
// VM (as PID 1, or as a plain process in tests and development). It owns the
// guest side of the guest link: the first-contact handshake that gives a
// fresh guest its identity, the SSH server that runs commands (with or
// without a PTY) and serves SFTP, the link transports (virtio-serial and
// vsock), and the duties of PID 1 (mounts, modules, zombie reaping, power
// off).
//
// It imports only the wire contract in package guest and its SSH, SFTP and
// PTY libraries. It must not import vm, fyne, vz, sync, review, the app,
// guest/client, or testing (outside tests): it is linked into a small
// static binary that runs in every VM.
package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlock-dev/airlock/guest"
)

// Config configures an Agent. The zero value serves the link as an ordinary
// process: it changes nothing about the machine it runs on (hostname, clock
// and entropy are left alone) and refuses power-off requests.
type Config struct {
	// Logger receives the agent's logs; nil discards them.
	Logger *slog.Logger

	// Shell runs every command as Shell -c CMD, and interactive sessions as
	// a login Shell. Empty means /bin/sh.
	Shell string

	// Home is the HOME of every command and the working directory of
	// sessions that do not ask for one (/ when it does not exist). Empty
	// means /root when the agent runs as root, else the agent's own $HOME
	// (or / when unset).
	Home string

	// HandshakeTimeout bounds reading the magic and Hello and the SSH
	// handshake of each connection. Zero means 30 seconds.
	HandshakeTimeout time.Duration

	// SetHostname, SetClock and AddEntropy apply the identity of the first
	// contact to the machine. Each one that is nil is skipped. PID 1 sets
	// them to SetHostname, SetClock and AddEntropy of this package. An
	// error is logged and does not refuse the hello.
	SetHostname func(name string) error
	SetClock    func(t time.Time) error
	AddEntropy  func(seed []byte) error

	// MountDisks mounts the disks a first contact names (guest.Hello's
	// Disks, each DEV:DIR). Nil refuses a hello that names any. PID 1
	// sets it to drop the kernel's cached blocks of each device and mount
	// it as guest.DiskArg would.
	MountDisks func(disks []string) error

	// BeforeSnapshot, when not nil, is called before a probe is answered
	// (the host may save the machine then): PID 1 drops the kernel's
	// clean caches, so that the saved state is smaller.
	BeforeSnapshot func()

	// PowerOff is called after the agent acknowledged a
	// guest.RequestPowerOff. Nil refuses power-off requests.
	PowerOff func() error

	// Reaper, when set, starts every process the agent runs and does all
	// waiting for children. Set it when the agent is PID 1 or a subreaper,
	// where a reaper must collect orphans; nil starts processes with
	// os.StartProcess and waits for each one directly.
	Reaper *Reaper

	// Ready, when not nil, holds back every command until it is closed:
	// PID 1 serves the link while busybox still installs its applets, so
	// that first contact does not wait for it.
	Ready <-chan struct{}

	// AfterFirstCommand, when not nil, is called once, in its own
	// goroutine, after the first command has started: PID 1 loads the
	// modules nothing urgent needs then.
	AfterFirstCommand func()

	// Self are the paths at which this agent's own binary is run (PID 1:
	// /init and its copy in guest.RuntimeDir), and Builtin, when not nil,
	// says which of its subcommands it runs in its own process instead
	// (args: the words after the path; nil: run the binary). A command
	// is run so only when it is exactly such a path and words, each
	// quoted as sync/transfer quotes them, for root without a terminal:
	// anything else goes to the shell as ever. It saves starting the
	// binary, a Go program whose start costs 0.1 to 0.2 s under
	// emulation, for the manifest every collect asks for.
	Self    []string
	Builtin func(args []string) Builtin
}

// Builtin is a subcommand of the agent's binary run in the agent's own
// process (Config.Builtin), on the session's channel. Its error is
// printed on stderr as the binary prints it, and the exit status is 1.
// It must stop when ctx is done: the peer closed the channel or sent a
// signal.
type Builtin func(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error

const (
	defaultShell            = "/bin/sh"
	defaultHandshakeTimeout = 30 * time.Second
	// defaultPath is the PATH of every command, as on a Debian system.
	defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// identity is what the first contact gave this guest. It never changes
// once set.
type identity struct {
	clientKey ssh.PublicKey // the only key accepted
	hostKey   ssh.Signer    // generated at first contact
	hostname  string
}

// Agent serves guest link connections. Its identity is set by the first
// connection and shared by every later one. Create it with New.
type Agent struct {
	cfg Config
	log *slog.Logger

	mu sync.Mutex
	id *identity // nil until first contact

	firstCommand sync.Once

	// proxyForwards counts the active forwards of guest.ProxyPort; while
	// there is one, commands get the proxy environment.
	proxyForwards atomic.Int32
}

// New returns an Agent for cfg. It starts nothing.
func New(cfg Config) *Agent {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Shell == "" {
		cfg.Shell = defaultShell
	}
	if cfg.Home == "" {
		cfg.Home = defaultHome()
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = defaultHandshakeTimeout
	}
	return &Agent{cfg: cfg, log: cfg.Logger}
}

func defaultHome() string {
	if os.Geteuid() == 0 {
		return "/root"
	}
	if h := os.Getenv("HOME"); h != "" {
		return h
	}
	return "/"
}

// Serve accepts link connections on l and serves each one concurrently
// until ctx ends, then closes l and waits for the connections to finish
// (they end with ctx too). It returns nil when ctx ended, else the accept
// error.
func (a *Agent) Serve(ctx context.Context, l net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()

	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept link connection: %w", err)
		}
		wg.Go(func() {
			if err := a.ServeConn(ctx, conn); err != nil {
				a.log.Warn("link connection", "remote", conn.RemoteAddr(), "err", err)
			}
		})
	}
}

// ServeConn serves one link connection: it reads guest.Magic and a Hello,
// answers with a Welcome, then serves SSH on conn until the peer or ctx
// ends it. It always closes conn. A refused or malformed hello is answered
// (when the peer spoke the magic) and returned as an error; a connection
// that ends after the SSH handshake returns nil.
func (a *Agent) ServeConn(ctx context.Context, conn net.Conn) error {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	// Deadlines are best effort: a link without them (a file) is bounded
	// by ctx alone.
	_ = conn.SetDeadline(time.Now().Add(a.cfg.HandshakeTimeout))
	id, err := a.handshake(ctx, conn)
	if errors.Is(err, errProbed) {
		return nil
	}
	if err != nil {
		return err
	}
	srv, err := a.sshServer(conn, id)
	if err != nil {
		return err
	}
	_ = conn.SetDeadline(time.Time{})
	return srv.serve()
}

// handshake reads the magic and the Hello from conn, applies or checks the
// identity, and writes the Welcome.
func (a *Agent) handshake(ctx context.Context, conn io.ReadWriter) (*identity, error) {
	hello, err := readHello(conn)
	if errors.Is(err, errProbe) {
		return nil, a.probe(ctx, conn)
	}
	a.log.Debug("hello read", "resume", hello.Resume)
	if errors.Is(err, errBadMagic) {
		// Not our protocol: there is no one to explain it to.
		return nil, err
	}
	if err == nil {
		var id *identity
		id, err = a.accept(hello)
		if err == nil {
			w := a.welcome()
			w.HostKey = authorizedKey(id.hostKey.PublicKey())
			if err := guest.WriteMessage(conn, w); err != nil {
				return nil, fmt.Errorf("write welcome: %w", err)
			}
			a.log.Debug("welcome sent")
			return id, nil
		}
	}
	w := a.welcome()
	w.Error = err.Error()
	// The peer may be gone already; the refusal is what matters.
	_ = guest.WriteMessage(conn, w)
	return nil, fmt.Errorf("refuse hello: %w", err)
}

var errBadMagic = errors.New("bad magic: the peer does not speak the airlock guest protocol")

// errProbe is readHello's answer to guest.ProbeMagic; errProbed ends a
// probe connection that was answered.
var (
	errProbe  = errors.New("probe")
	errProbed = errors.New("probe answered")
)

// probe answers a guest.ProbeMagic connection once the agent could run a
// command, with everything a first command would load already loaded, so
// that a machine saved now (a warm snapshot) needs no more of that work
// after a restore. It changes no identity.
func (a *Agent) probe(ctx context.Context, conn io.Writer) error {
	if a.cfg.Ready != nil {
		select {
		case <-a.cfg.Ready:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if a.cfg.AfterFirstCommand != nil {
		a.firstCommand.Do(a.cfg.AfterFirstCommand)
	}
	if a.cfg.BeforeSnapshot != nil {
		a.cfg.BeforeSnapshot()
	}
	if err := guest.WriteMessage(conn, a.welcome()); err != nil {
		return fmt.Errorf("answer probe: %w", err)
	}
	a.log.Debug("probe answered")
	return errProbed
}

// readHello reads guest.Magic and one Hello from r and checks that the Hello
// is well formed. It reads nothing past the Hello.
func readHello(r io.Reader) (guest.Hello, error) {
	var h guest.Hello
	magic := make([]byte, len(guest.Magic))
	if _, err := io.ReadFull(r, magic); err != nil {
		return h, fmt.Errorf("read magic: %w", err)
	}
	if string(magic) == guest.ProbeMagic {
		return h, errProbe
	}
	if string(magic) != guest.Magic {
		return h, fmt.Errorf("%w (got %q)", errBadMagic, magic)
	}
	return readHelloMessage(r)
}

// readHelloMessage reads the Hello that follows the magic and checks it.
func readHelloMessage(r io.Reader) (guest.Hello, error) {
	var h guest.Hello
	if err := guest.ReadMessage(r, &h); err != nil {
		return h, fmt.Errorf("read hello: %w", err)
	}
	if h.Version != guest.ProtocolVersion {
		return h, fmt.Errorf("hello: protocol version %d is not supported (this agent speaks %d); use a matching guest image",
			h.Version, guest.ProtocolVersion)
	}
	if h.Resume {
		return h, nil
	}
	if h.ClientKey == "" {
		return h, errors.New("hello: first contact without a client key")
	}
	if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(h.ClientKey)); err != nil {
		return h, fmt.Errorf("hello: client key: %w", err)
	}
	if h.Hostname != "" && !validHostname(h.Hostname) {
		return h, fmt.Errorf("hello: hostname %q is not a valid host name", h.Hostname)
	}
	if len(h.Disks) > maxHelloDisks {
		return h, fmt.Errorf("hello: %d disks, at most %d", len(h.Disks), maxHelloDisks)
	}
	for _, d := range h.Disks {
		if _, bad := diskMounts(guest.DiskArg + "=" + d); len(bad) > 0 || strings.ContainsAny(d, " \t\n") {
			return h, fmt.Errorf("hello: disk %q is not DEV:DIR", d)
		}
	}
	return h, nil
}

// maxHelloDisks bounds the disks one hello may ask to mount.
const maxHelloDisks = 16

// validHostname accepts RFC 1123 host names of at most 64 bytes (the
// kernel's limit).
func validHostname(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// accept applies a well-formed hello: the first contact sets the identity,
// a resume requires one. Both resync the clock and mix in entropy, since a
// resumed guest may have been paused, restored or rolled back.
func (a *Agent) accept(h guest.Hello) (*identity, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case h.Resume && a.id == nil:
		return nil, errors.New("resume refused: this guest has no identity yet; the first connection must not be a resume")
	case !h.Resume && a.id != nil:
		return nil, errors.New("first contact refused: this guest already has an identity; reconnect with resume")
	}
	a.syncMachine(h)
	if h.Resume {
		a.log.Debug("link resumed")
		return a.id, nil
	}

	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(h.ClientKey))
	if err != nil { // readHello checked it
		return nil, fmt.Errorf("parse client key: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate host key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("generate host key: %w", err)
	}
	if h.Hostname != "" && a.cfg.SetHostname != nil {
		if err := a.cfg.SetHostname(h.Hostname); err != nil {
			a.log.Warn("set hostname", "hostname", h.Hostname, "err", err)
		}
	}
	if len(h.Disks) > 0 {
		if a.cfg.MountDisks == nil {
			return nil, errors.New("first contact: this agent does not mount disks")
		}
		if err := a.cfg.MountDisks(h.Disks); err != nil {
			return nil, fmt.Errorf("first contact: %w", err)
		}
	}
	a.id = &identity{clientKey: key, hostKey: signer, hostname: h.Hostname}
	a.log.Info("identity set", "hostname", h.Hostname, "client_key", ssh.FingerprintSHA256(key))
	return a.id, nil
}

// clockSlack is how far the guest clock may be from the host's before the
// agent sets it.
const clockSlack = time.Second

// syncMachine sets the clock from the host's and mixes the host's entropy
// into the kernel pool, through the Config hooks.
func (a *Agent) syncMachine(h guest.Hello) {
	if !h.Time.IsZero() && a.cfg.SetClock != nil {
		if d := time.Since(h.Time); d > clockSlack || d < -clockSlack {
			if err := a.cfg.SetClock(h.Time); err != nil {
				a.log.Warn("set clock", "err", err)
			}
		}
	}
	if len(h.Entropy) > 0 && a.cfg.AddEntropy != nil {
		if err := a.cfg.AddEntropy(h.Entropy); err != nil {
			a.log.Warn("add entropy", "err", err)
		}
	}
}

func (a *Agent) welcome() guest.Welcome {
	self, _ := os.Executable() // "" when unknown: the host falls back to its default
	return guest.Welcome{
		Version: guest.ProtocolVersion,
		Kernel:  kernelRelease(),
		Arch:    runtime.GOARCH,
		Agent:   self,
	}
}

func authorizedKey(k ssh.PublicKey) string {
	return string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(k)))
}

// self is a path of this agent's own binary that a command can run: the
// last of Config.Self that is there (its copy in guest.RuntimeDir when
// the root disk was switched to, whose own /init may be anything), or
// "" when there is none.
func (a *Agent) self() string {
	for i := len(a.cfg.Self) - 1; i >= 0; i-- {
		if fi, err := os.Stat(a.cfg.Self[i]); err == nil && fi.Mode().IsRegular() {
			return a.cfg.Self[i]
		}
	}
	return ""
}
