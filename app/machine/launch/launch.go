// Package launch boots a guest image on a vm.Backend and connects to its
// guest agent: the one sequence that `airlock exec`, `airlock run` and the
// GUI share. It restores the image's warm snapshot instead of booting when
// a current one exists, and saves one on a cold boot's way (warm.go). It
// reports typed progress events and turns a guest that never answers into
// a vm.BootError carrying the last console lines. Attach reaches a machine
// a supervisor kept running; Supervised, Kill and ReadSpec are what a kept
// machine's checkpoints and rollbacks ask of its supervisor, so that
// app/pipeline never speaks to app/machine/vmhost itself.
//
// It must not import fyne or a hypervisor package (vm/qemu, vm/vz): the
// backend is handed in.
package launch

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/machine/vmhost"
	"github.com/airlock-dev/airlock/guest"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/disk"
	"github.com/airlock-dev/airlock/vm/image"
)

// DefaultBootTimeout bounds the wait for a guest agent to answer. A cold
// boot takes a few seconds under TCG; the rest is headroom for a loaded host.
const DefaultBootTimeout = 90 * time.Second

// Step names a phase of a launch.
type Step string

const (
	StepBooting  Step = "booting"
	StepReady    Step = "ready"
	StepStopping Step = "stopping"
	StepStopped  Step = "stopped"
)

// Event is a progress report.
type Event struct {
	Step    Step          `json:"step"`
	Message string        `json:"message,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Options says what to boot and how.
type Options struct {
	// Home is Airlock's home directory (images/, run/).
	Home string
	// ImageRoots are read-only folders laid out like a home, searched for
	// the image after Home: the app bundle's Contents/Resources
	// (home.ImageRoots).
	ImageRoots []string
	// Name names the machine's run directory, run/<Name> (a sandbox's ID,
	// so that its VM supervisor can be found from it); empty means a
	// random name.
	Name string
	// Image is the image name; empty means "minimal".
	Image string
	// Arch is the guest architecture; empty means the host's.
	Arch vm.Arch
	// CPUs and MemoryMiB size the machine; zero means vm defaults.
	CPUs      int
	MemoryMiB int
	// Link forces a link kind; LinkAuto lets the backend choose.
	Link vm.LinkKind
	// Network is the network mode; empty means none.
	Network vm.NetworkMode
	// RootDisk is where this machine's copy-on-write clone of the image's
	// root disk lives, for an image that has one (the full image): cloned
	// from the image (vm/disk) when the file does not exist, booted as it
	// is when it does (a sandbox's later rounds). Empty means a clone in
	// the run directory, removed with it.
	RootDisk string
	// Backend starts the machine.
	Backend vm.Backend
	// BootTimeout bounds boot to guest-ready; zero means DefaultBootTimeout.
	BootTimeout time.Duration
	// Disks are attached as virtio-blk devices (vda, vdb, … in order) and
	// mounted by the guest agent; Shares are virtio-fs shares it mounts.
	Disks  []Disk
	Shares []Share
	// Warm restores the machine from the warm snapshot of its image and
	// shape when there is a current one, and otherwise boots cold and
	// saves one on the way (see WarmRecord); a cold boot says why on
	// Notice. Machines with shares or an open network always boot cold.
	Warm bool
	// Notice receives one-line notices for people (why a boot was cold);
	// nil discards them.
	Notice func(string)
	// Progress receives events; nil discards them.
	Progress func(Event)
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Disk is a raw disk image attached to the machine and mounted by the
// guest agent (ext4, nosuid, nodev) on Mount.
type Disk struct {
	Path  string
	Mount string
	// Lower, if set, is a read-only baseline disk (a tree under
	// guest.BaselineTree): Mount is then an overlay whose lower layer is
	// that tree and whose upper layer is on Path.
	Lower string
	// Delta, if set beside Lower, is a read-only disk of the changes from
	// Lower's tree to the baseline's: the overlay's lower layers are
	// Delta's tree over Lower's.
	Delta string
}

// Share is a virtio-fs share the guest agent mounts on Mount.
type Share struct {
	vm.Share
	Mount string
}

// Guest is a booted machine with a connected guest agent.
type Guest struct {
	Machine vm.Machine
	Client  *client.Client
	Image   *image.Image
	// Identity is the sandbox identity given to the guest at first contact;
	// reconnecting needs it (with client.Config.Resume).
	Identity client.Identity
	// Dir holds the machine's runtime files (sockets, console.log).
	Dir string
	// BootTime is from Start (or Restore) to the guest agent's welcome.
	BootTime time.Duration
	// Warm says the machine was restored from a warm snapshot.
	Warm bool
	// DisksMounted says the guest agent mounted Options.Disks at first
	// contact (a warm boot's, restored or saving its snapshot), which it
	// refuses unless every one mounted; a cold boot names them on the
	// kernel command line, where a disk that fails to mount is only
	// logged.
	DisksMounted bool

	dial     client.DialFunc
	mux      *client.Mux // serial links only
	progress func(Event)
	start    time.Time
}

// Dial opens another link connection to the guest agent; with
// client.Config{Identity: g.Identity, Resume: true} it gives a second client.
func (g *Guest) Dial(ctx context.Context) (net.Conn, error) { return g.dial(ctx) }

// Boot starts a machine from an image and waits for its guest agent. The
// machine is killed when ctx ends. On error nothing is left running; the
// runtime directory is kept when the guest failed to boot, so that its
// console log can be read.
func Boot(ctx context.Context, o Options) (_ *Guest, err error) {
	if o.Backend == nil {
		return nil, errors.New("launch: no backend")
	}
	b := newBoot(o)
	defer func() {
		if err != nil {
			b.cleanup()
		}
	}()
	if err := b.findImage(); err != nil {
		return nil, err
	}
	if err := b.makeRunDir(ctx); err != nil {
		return nil, err
	}
	if err := b.cloneRoot(ctx); err != nil {
		return nil, err
	}
	b.attachDevices()
	b.chooseWarm(ctx)
	if err := b.startMachine(ctx); err != nil {
		return nil, err
	}
	if err := b.openLink(); err != nil {
		return nil, err
	}
	b.saveWarmSnapshot(ctx)
	if err := b.firstContact(ctx); err != nil {
		return nil, err
	}
	if err := b.checkRoot(ctx); err != nil {
		return nil, err
	}
	if err := b.saveIdentity(); err != nil {
		return nil, err
	}
	return b.ready(), nil
}

// boot is one Boot in progress: what its steps have made so far, which
// cleanup undoes when a later step fails.
type boot struct {
	o        Options
	start    time.Time
	progress func(Event)
	logger   *slog.Logger
	timeout  time.Duration
	name     string // the image's
	arch     vm.Arch

	img       *image.Image
	dir       string // the run directory
	keepDir   bool   // keep dir on failure: the guest's console log is there
	spec      vm.Spec
	rootFresh bool     // the root disk is a new clone of the image's
	diskArgs  []string // the disks' mounts, DEV:DIR
	plan      warmPlan
	warm      bool // a warm boot: restored, or saving a snapshot on the way
	m         vm.Machine
	restored  bool
	id        client.Identity
	priv      ed25519.PrivateKey
	dial      client.DialFunc
	mux       *client.Mux // serial links only
	c         *client.Client
}

func newBoot(o Options) *boot {
	b := &boot{o: o, start: time.Now(), progress: o.Progress, logger: o.Logger, timeout: o.BootTimeout, name: o.Image, arch: o.Arch}
	if b.progress == nil {
		b.progress = func(Event) {}
	}
	if b.logger == nil {
		b.logger = slog.New(slog.DiscardHandler)
	}
	if b.timeout == 0 {
		b.timeout = DefaultBootTimeout
	}
	if b.name == "" {
		b.name = "minimal"
	}
	if b.arch == "" {
		b.arch = vm.Arch(runtime.GOARCH)
	}
	return b
}

// cleanup undoes what the steps so far made, last first: the link closed,
// the machine stopped, the run directory removed (unless kept for its
// console log).
func (b *boot) cleanup() {
	if b.c != nil {
		b.c.Close()
	}
	if b.mux != nil {
		b.mux.Close()
	}
	if b.m != nil {
		stopNow(b.m)
	}
	if b.dir != "" && !b.keepDir {
		os.RemoveAll(b.dir)
	}
}

func (b *boot) notice(msg string) {
	if b.o.Notice != nil {
		b.o.Notice(msg)
	}
}

// findImage finds the image in the home, then the read-only roots.
func (b *boot) findImage() (err error) {
	b.img, err = image.Find(append([]string{b.o.Home}, b.o.ImageRoots...), b.name, b.arch)
	return err
}

// makeRunDir makes the machine's run directory and its spec.
func (b *boot) makeRunDir(ctx context.Context) (err error) {
	b.dir, err = newRunDir(ctx, home.Layout{Root: b.o.Home}.Runs(), b.o.Name)
	if err != nil {
		return err
	}
	b.spec = vm.Spec{
		Name:      "airlock-" + filepath.Base(b.dir),
		Arch:      b.arch,
		Kernel:    realPath(b.img.Kernel),
		Initrd:    realPath(b.img.Initrd),
		Cmdline:   b.img.Cmdline,
		CPUs:      b.o.CPUs,
		MemoryMiB: b.o.MemoryMiB,
		Link:      vm.Link{Kind: b.o.Link, Port: guest.VsockPort},
		Network:   b.o.Network,
		StateDir:  b.dir,
	}
	return nil
}

// cloneRoot gives an image with a root disk the machine's clone of it
// (Options.RootDisk, made when it does not exist) as the first disk: the
// image's command line names it (vda). An image made from an OCI image
// adds its read-only lower disk second (vdb): the clone is then the
// overlay's upper layer.
func (b *boot) cloneRoot(ctx context.Context) error {
	if b.img.Rootfs == "" {
		return nil
	}
	root := b.o.RootDisk
	if root == "" {
		root = filepath.Join(b.dir, image.RootfsFile)
	}
	_, serr := os.Stat(root)
	b.rootFresh = errors.Is(serr, fs.ErrNotExist)
	d, err := rootDisk(ctx, b.img, root, b.logger)
	if err != nil {
		return err
	}
	b.spec.Disks = []vm.Disk{d}
	if b.img.Lower != "" {
		b.spec.Disks = append(b.spec.Disks, vm.Disk{Path: realPath(b.img.Lower), ReadOnly: true, Format: "raw"})
	}
	return nil
}

// attachDevices adds the shares and disks to the spec, and the open
// network's kernel argument.
func (b *boot) attachDevices() {
	if b.o.Network == vm.NetworkNAT {
		// The guest agent brings the device up by DHCP (vz NAT and QEMU
		// user networking both serve it).
		b.spec.Cmdline = strings.TrimSpace(b.spec.Cmdline + " " + guest.NetArg + "=" + guest.NetDHCP)
	}
	b.diskArgs = attach(&b.spec, b.o.Shares, b.o.Disks)
}

// chooseWarm decides between a restore, a cold boot that saves a warm
// snapshot and a plain cold boot, saying why a boot is cold. A warm boot's
// disks are attached at boot but mounted at first contact, so that one
// snapshot serves every sandbox of a shape; a cold boot's are named on the
// kernel command line.
func (b *boot) chooseWarm(ctx context.Context) {
	if b.o.Warm {
		b.plan = planWarmBoot(ctx, b.o, b.img, b.spec, b.rootFresh)
		switch {
		case b.plan.ok:
		case b.plan.save:
			b.notice("cold boot: " + b.plan.reason + "; saving one on the way")
		default:
			b.notice("cold boot: " + b.plan.reason)
		}
	}
	b.warm = b.plan.ok || b.plan.save
	if !b.warm {
		for _, d := range b.diskArgs {
			b.spec.Cmdline += " " + guest.DiskArg + "=" + d
		}
	}
	b.spec.Cmdline = strings.TrimSpace(b.spec.Cmdline)
	if b.plan.ok && b.img.Rootfs != "" {
		// The saved machine has its root disk mounted as it was then: boot
		// a clone of that disk instead of the fresh clone of the image's.
		if err := warmRoot(ctx, &b.spec.Disks[0], b.plan.dir); err != nil {
			b.notice("cold boot: " + oneLine(err))
			b.plan.ok = false
		}
	}
}

// startMachine restores the machine from its warm snapshot, or boots it
// cold: at once, or when the restore fails.
func (b *boot) startMachine(ctx context.Context) error {
	var err error
	if b.plan.ok {
		b.progress(Event{Step: StepBooting, Message: fmt.Sprintf("restoring %s (%s) from its warm snapshot", b.name, b.arch)})
		var m vm.Machine
		m, err = b.o.Backend.(vm.Restorer).Restore(ctx, b.spec, filepath.Join(b.plan.dir, warmStateFile))
		switch {
		case err == nil:
			b.m, b.restored = m, true
			b.logger.Debug("restored", "machine", b.spec.Name, "in", time.Since(b.start))
		case ctx.Err() == nil:
			b.notice("cold boot: the warm snapshot did not restore (" + oneLine(err) + "); saving a new one on the way")
			b.plan.save = true
			if b.img.Rootfs != "" {
				// Back to a fresh clone of the image's root disk.
				root := b.spec.Disks[0].Path
				os.Remove(root)
				if b.spec.Disks[0], err = rootDisk(ctx, b.img, root, b.logger); err != nil {
					return err
				}
			}
		}
	}
	if b.m == nil && ctx.Err() == nil {
		b.progress(Event{Step: StepBooting, Message: fmt.Sprintf("booting %s (%s)", b.name, b.arch)})
		b.start = time.Now()
		b.m, err = b.o.Backend.Start(ctx, b.spec)
	}
	if err == nil && b.m == nil {
		err = ctx.Err()
	}
	if err != nil {
		b.m = nil
		return fmt.Errorf("start %s VM: %w", b.o.Backend.Name(), err)
	}
	return nil
}

// openLink makes the sandbox identity and the dial function of the guest
// link. A serial link is one stream: a yamux session over it gives one
// stream per connection, as the guest agent expects there. A VM
// supervisor owns that session itself and gives a stream per connection
// already.
func (b *boot) openLink() (err error) {
	if b.id, b.priv, err = newIdentity(b.spec.Name); err != nil {
		return err
	}
	b.dial = b.m.DialLink
	if _, supervised := vmhost.SupervisorOf(b.m); b.m.LinkKind() == vm.LinkSerial && !supervised {
		b.mux = client.NewMux(b.m.DialLink)
		b.dial = b.mux.Dial
	}
	return nil
}

// saveWarmSnapshot saves a warm snapshot on a cold boot's way, when one
// is wanted: the agent is waited for without an identity and the state
// saved; then the first contact is made as after a restore. A failed save
// is a notice, not an error.
func (b *boot) saveWarmSnapshot(ctx context.Context) {
	if !b.plan.save || b.restored {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, b.timeout)
	root := ""
	if b.img.Rootfs != "" {
		root = b.spec.Disks[0].Path
	}
	err := saveWarm(sctx, b.m, b.dial, b.plan, root, b.start)
	cancel()
	b.logger.Debug("warm snapshot", "machine", b.spec.Name, "saved", err == nil, "after", time.Since(b.start))
	if err != nil && ctx.Err() == nil {
		b.notice("no warm snapshot saved: " + oneLine(err))
	}
}

// firstContact waits for the guest agent's welcome and hands it the
// sandbox identity (and, on a warm boot, the disks to mount). From here
// on a failure keeps the run directory for its console log, unless ctx
// ended.
func (b *boot) firstContact(ctx context.Context) (err error) {
	cfg := client.Config{Identity: b.id, Logger: b.logger, Ciphers: ciphersFor(b.m)}
	if b.warm {
		cfg.Disks = b.diskArgs
	}
	b.c, err = connect(ctx, b.m, b.dial, b.timeout, cfg)
	b.logger.Debug("first contact", "machine", b.spec.Name, "after", time.Since(b.start))
	if err != nil {
		b.c = nil
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	b.keepDir = true
	return err
}

// checkRoot makes sure the guest of an image with a root disk switched to
// it.
func (b *boot) checkRoot(ctx context.Context) error {
	if b.img.Rootfs == "" {
		return nil
	}
	return checkRoot(ctx, b.c, b.img.Lower != "")
}

// saveIdentity keeps the identity of a supervised machine in its run
// directory: another process may attach to it later (Attach).
func (b *boot) saveIdentity() error {
	if _, supervised := vmhost.SupervisorOf(b.m); !supervised {
		return nil
	}
	return saveIdentity(b.dir, b.id, b.priv, b.c.Welcome().HostKey)
}

// ready reports the guest ready and returns it.
func (b *boot) ready() *Guest {
	g := &Guest{Machine: b.m, Client: b.c, Image: b.img, Identity: b.id, dial: b.dial, mux: b.mux, Dir: b.dir,
		BootTime: time.Since(b.start), Warm: b.restored, DisksMounted: b.warm && len(b.diskArgs) > 0, progress: b.progress, start: b.start}
	how := "booted"
	if b.restored {
		how = "restored"
	}
	b.progress(Event{Step: StepReady, Message: fmt.Sprintf("guest ready (%s, link %s, %s)", b.c.Welcome().Kernel, b.m.LinkKind(), how), Elapsed: g.BootTime})
	return g
}

// rootDisk returns the machine's root disk at path: the clone already
// there, or a new copy-on-write clone of the image's root disk (a reflink
// or clonefile; a qcow2 overlay where the backend is QEMU, which is every
// backend but macOS's).
//
// A qcow2 overlay reads what it has not written from the image's root
// disk, so it is only good with the image it was made on: the image's
// root disk hash is kept beside the clone (path + ".base") and a clone
// whose image was rebuilt since is refused rather than booted corrupt.
func rootDisk(ctx context.Context, img *image.Image, path string, log *slog.Logger) (vm.Disk, error) {
	base := img.Meta.Rootfs.SHA256
	if _, err := os.Stat(path); err == nil {
		format, err := disk.Format(path)
		if err != nil {
			return vm.Disk{}, fmt.Errorf("root disk: %w", err)
		}
		if format == disk.QCOW2 {
			if b, err := os.ReadFile(path + ".base"); err != nil || strings.TrimSpace(string(b)) != base {
				return vm.Disk{}, fmt.Errorf("root disk %s: the image %s was rebuilt since this clone was made on it (a qcow2 overlay needs the root disk it was made on); remove the sandbox, or its %s to start from the new image's root disk",
					path, img.Name, filepath.Base(path))
			}
		}
		return vm.Disk{Path: path, Format: format}, nil
	}
	// An overlay names its backing file: the image's real path, not the
	// one through a home's link to a shared image store (test homes),
	// which may be gone when a warm snapshot kept from it is used.
	res, err := disk.Clone(ctx, realPath(img.Rootfs), path, disk.Options{Overlay: runtime.GOOS != "darwin"})
	if err != nil {
		return vm.Disk{}, fmt.Errorf("root disk of image %s: %w", img.Name, err)
	}
	if err := atomicfile.WriteFile(path+".base", []byte(base+"\n"), 0o644); err != nil {
		os.Remove(path)
		return vm.Disk{}, fmt.Errorf("root disk: %w", err)
	}
	log.Info("root disk cloned", "image", img.Rootfs, "clone", path, "method", res.Method)
	return vm.Disk{Path: path, Format: res.Format}, nil
}

// checkRoot makes sure the guest switched to its root disk: a command must
// never run in the initramfs when the image's tools were asked for.
func checkRoot(ctx context.Context, c *client.Client, overlay bool) error {
	var out bytes.Buffer
	if err := c.Run(ctx, client.Command{Script: "cat /proc/mounts", Stdout: &out}); err != nil {
		return fmt.Errorf("check the guest's root disk: %w", err)
	}
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[1] != "/" {
			continue
		}
		if !overlay && f[0] == "/dev/"+image.RootDevice && f[2] == "ext4" || overlay && f[0] == "overlay" && f[2] == "overlay" {
			return nil
		}
	}
	if overlay {
		return fmt.Errorf("the guest did not mount its overlay root (the image's /dev/%s under the sandbox's /dev/%s); its console log says why", image.LowerDevice, image.RootDevice)
	}
	return fmt.Errorf("the guest did not switch to its root disk (/dev/%s is not mounted on /); its console log says why", image.RootDevice)
}

// connect waits for the guest agent's welcome, giving up when the timeout
// passes or the machine dies first, with the console's last lines.
// ciphersFor is the SSH ciphers of a link to m: ChaCha20-Poly1305 first
// when its CPU is emulated (client.EmulatedCiphers), else the defaults.
func ciphersFor(m vm.Machine) []string {
	if e, ok := m.(vm.Emulator); ok && e.Emulated() {
		return client.EmulatedCiphers
	}
	return nil
}

func connect(ctx context.Context, m vm.Machine, dial client.DialFunc, timeout time.Duration, cfg client.Config) (*client.Client, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errBootTimeout)
	defer cancel()
	exited := make(chan error, 1)
	go func() {
		err := m.Wait()
		exited <- err
		cancel()
	}()
	c, err := client.Connect(ctx, dial, cfg)
	if err == nil {
		return c, nil
	}
	be := &vm.BootError{Machine: filepath.Base(filepath.Dir(m.ConsoleLog())), Log: m.ConsoleLog(), Err: err}
	select {
	case werr := <-exited:
		be.Reason = "stopped before its agent answered"
		be.Err = errors.Join(werr, err)
		if werr == nil {
			be.Err = err
		}
	default:
		if errors.Is(context.Cause(ctx), errBootTimeout) {
			be.Reason = fmt.Sprintf("did not answer within %s", timeout)
			be.Err = nil
		} else {
			be.Reason = "did not complete the first-contact handshake"
		}
	}
	be.Console = vm.TailConsole(m.ConsoleLog(), 15)
	return nil, be
}

var errBootTimeout = errors.New("boot timeout")

// Shutdown powers the guest off cleanly, waits for the machine to go, and
// removes its runtime directory. ctx bounds the graceful part; after it the
// machine is forced off.
func (g *Guest) Shutdown(ctx context.Context) error {
	g.progress(Event{Step: StepStopping, Elapsed: time.Since(g.start)})
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	perr := g.Client.PowerOff(pctx)
	cancel()
	g.closeLink()
	done := make(chan error, 1)
	go func() { done <- g.Machine.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		err = errors.Join(perr, errors.New("guest did not power off within 10s; forced"))
		stopNow(g.Machine)
	}
	if err == nil {
		os.RemoveAll(g.Dir)
	}
	g.progress(Event{Step: StepStopped, Elapsed: time.Since(g.start)})
	return err
}

// Detach leaves a supervised machine running after this process: it
// closes the link and unties the machine from Boot's context, so that it
// lives on under its supervisor (and its idle TTL) for Attach to find. It
// fails for a machine without a supervisor, which lives in this process.
func (g *Guest) Detach() error {
	if _, ok := vmhost.SupervisorOf(g.Machine); !ok {
		return errors.New("detach: the machine runs in this process, not under a supervisor")
	}
	g.closeLink()
	vmhost.Detach(g.Machine)
	return nil
}

// Kill forces the machine off at once and removes its runtime directory.
func (g *Guest) Kill() {
	g.closeLink()
	stopNow(g.Machine)
	os.RemoveAll(g.Dir)
}

func (g *Guest) closeLink() {
	g.Client.Close()
	if g.mux != nil {
		g.mux.Close()
	}
}

// stopNow stops m with an already-ended context: forced, immediate.
func stopNow(m vm.Machine) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = m.Stop(ctx)
}

// newRunDir makes the run directory parent/name, or parent/<random> when
// name is empty. A directory left by a machine whose supervisor is gone is
// replaced; one whose supervisor still runs is an error.
func newRunDir(ctx context.Context, parent, name string) (string, error) {
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", fmt.Errorf("create run directory: %w", err)
	}
	if name == "" {
		var b [4]byte
		if _, err := io.ReadFull(rand.Reader, b[:]); err != nil {
			return "", err
		}
		name = hex.EncodeToString(b[:])
	} else if name != filepath.Base(name) || name == "." || name == ".." {
		return "", fmt.Errorf("create run directory: bad machine name %q", name)
	}
	dir := filepath.Join(parent, name)
	if _, err := os.Stat(dir); err == nil {
		if _, err := vmhost.Dial(ctx, dir); err == nil {
			return "", fmt.Errorf("create run directory: the VM of %s is still running (airlock stop %s)", name, name)
		}
		if err := os.RemoveAll(dir); err != nil {
			return "", fmt.Errorf("create run directory: %w", err)
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("create run directory: %w", err)
	}
	return dir, nil
}

// attach adds shares and disks to spec, with the kernel arguments that
// have the guest agent mount the shares, and returns the disks' mounts as
// DEV:DIR (guest.DiskArg's value) for the kernel command line of a cold
// boot or the first contact of a warm one.
func attach(spec *vm.Spec, shares []Share, disks []Disk) (diskArgs []string) {
	for _, sh := range shares {
		spec.Shares = append(spec.Shares, sh.Share)
		spec.Cmdline += " " + guest.VirtiofsArg + "=" + sh.Tag + ":" + sh.Mount
	}
	for _, d := range disks {
		// Disks are vda, vdb, … in the order of spec.Disks.
		lower := ""
		for _, l := range []string{d.Lower, d.Delta} {
			if l == "" || d.Lower == "" {
				continue
			}
			lower += ":" + blockDevice(len(spec.Disks))
			spec.Disks = append(spec.Disks, vm.Disk{Path: l, ReadOnly: true, Format: "raw"})
		}
		diskArgs = append(diskArgs, blockDevice(len(spec.Disks))+":"+d.Mount+lower)
		spec.Disks = append(spec.Disks, vm.Disk{Path: d.Path, Format: "raw"})
	}
	spec.Cmdline = strings.TrimSpace(spec.Cmdline)
	return diskArgs
}

// blockDevice is the guest's name of the i-th virtio block device.
func blockDevice(i int) string { return "vd" + string(rune('a'+i)) }

// warmRoot makes root a copy of the root disk kept with the warm snapshot
// in dir, in place of the fresh clone of the image's. It is a copy of that
// (small) overlay or a clone of that raw disk, never an overlay on it: the
// sandbox keeps its disk for later rounds, and the snapshot may be
// replaced meanwhile.
func warmRoot(ctx context.Context, root *vm.Disk, dir string) error {
	tmp := root.Path + ".warm"
	os.Remove(tmp)
	res, err := disk.Keep(ctx, filepath.Join(dir, warmRootFile), tmp)
	if err != nil {
		return fmt.Errorf("the warm snapshot's root disk: %w", err)
	}
	if err := os.Rename(tmp, root.Path); err != nil {
		os.Remove(tmp)
		return err
	}
	root.Format = res.Format
	return nil
}

// realPath is path with symbolic links resolved (path itself when that
// fails): the image files' paths are part of a warm snapshot's machine, and
// homes that link to one image store (test homes) then share snapshots.
func realPath(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	return path
}

// oneLine is err's message on one line.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// planWarmBoot decides how a warm boot of spec goes. rootFresh says the
// machine's root disk (an image with one) is a new clone of the image's.
func planWarmBoot(ctx context.Context, o Options, img *image.Image, spec vm.Spec, rootFresh bool) warmPlan {
	switch {
	case len(spec.Shares) > 0:
		return warmPlan{reason: fmt.Sprintf("the machine has a virtio-fs share (%s), and a machine with one cannot be snapshotted (its file system state lives in virtiofsd, outside the VM); the copy sync mode starts warm", spec.Shares[0].Tag)}
	case spec.Network == vm.NetworkNAT:
		return warmPlan{reason: "a machine with the open network is not snapshotted (its DHCP lease and NAT state belong to one machine)"}
	case img.Rootfs != "" && !rootFresh:
		// A saved machine's memory holds its root disk's file system as
		// it was saved; this sandbox's disk has moved on since (an
		// earlier round), so it boots as it is.
		return warmPlan{reason: "this sandbox's root disk holds its earlier rounds, which no saved machine has"}
	}
	d := spec.WithDefaults(spec.Arch)
	shape := WarmShape{Image: img.Name, Arch: spec.Arch, CPUs: d.CPUs, MemoryMiB: d.MemoryMiB,
		Cmdline: strings.TrimSpace(spec.Cmdline), Link: spec.Link.Kind, Network: d.Network}
	for i, d := range spec.Disks {
		path := d.Path
		if i == 0 && img.Rootfs != "" {
			path = img.Rootfs // the clone's own file may be a small overlay
		}
		if d.ReadOnly && filepath.Base(path) == image.LowerFile {
			path = img.Lower
		}
		fi, err := os.Stat(path)
		if err != nil {
			return warmPlan{reason: "cannot size the disk: " + err.Error()}
		}
		shape.DiskSizes = append(shape.DiskSizes, fi.Size())
	}
	return planWarm(ctx, o, img, shape)
}
