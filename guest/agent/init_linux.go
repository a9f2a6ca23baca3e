package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/guest"
)

// Init does the duties of PID 1 and serves the guest link until the
// machine is powered off (by guest.RequestPowerOff, the power button, or
// SIGTERM, SIGINT or SIGPWR sent to PID 1). It mounts the system file
// systems, installs the busybox applets if needed, loads the kernel
// modules of guest.ModulesOrder, mounts the virtio-fs shares and disks the
// kernel command line names (guest.VirtiofsArg, guest.DiskArg), brings lo
// up, configures the network device when asked to (guest.NetArg), reaps zombies, and
// serves the link on vsock and on the virtio-serial port, whichever exist.
//
// On success it does not return: the machine powers off. It returns an
// error only when power-off itself failed; PID 1 must then not exit (the
// kernel would panic), so the caller should log and hang in a way the
// runtime does not mistake for a deadlock. builtin is the agent's
// Config.Builtin, the binary at /init and its copy in guest.RuntimeDir
// its Self.
func Init(ctx context.Context, builtin func(args []string) Builtin) error {
	cmdline, console, log := mountAndOpenConsole()
	if cmdlineHas(cmdline, guest.ProbeArg) {
		fmt.Fprintln(console, guest.ProbeOK)
		unix.Sync()
		return unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	}
	log.Info("starting", "kernel", kernelRelease())
	if err := os.MkdirAll("/root", 0o700); err != nil {
		log.Warn("home", "err", err)
	}
	reaper, stopReaper := startReaper(log)
	later, commandsReady := bringUp(cmdline, reaper, log)

	// Closed once the deferred modules (the power button's among them)
	// are loaded.
	buttonsLoaded := make(chan struct{})
	off := make(offRequests, 1)
	a := New(Config{
		Logger:         log,
		SetHostname:    SetHostname,
		SetClock:       SetClock,
		AddEntropy:     AddEntropy,
		MountDisks:     MountDisks,
		BeforeSnapshot: func() { DropCaches(log) },
		PowerOff:       func() error { off.request("requested by host"); return nil },
		Reaper:         reaper,
		Ready:          commandsReady,
		Self:           []string{"/init", guest.RuntimeDir + "/init"},
		Builtin:        builtin,
		AfterFirstCommand: func() {
			n := loadModules(later, presentVirtioDevices, log)
			log.Debug("deferred modules loaded", "count", n)
			close(buttonsLoaded)
		},
	})
	stopServing := serve(ctx, a, buttonsLoaded, off, log)

	why := waitForPowerOff(ctx, off)
	log.Info("shutting down", "reason", why)
	stopServing()
	stopReaper()
	return powerOff(reaper, log)
}

// mountAndOpenConsole mounts the system file systems, opens the console
// and returns the kernel command line and a logger to the console at the
// level it asks for. A failed mount is logged, not fatal.
func mountAndOpenConsole() (cmdline string, console io.Writer, log *slog.Logger) {
	mountErr := mountAll()
	console = openConsole()
	b, _ := os.ReadFile("/proc/cmdline")
	cmdline = string(b)
	level := slog.LevelInfo
	if cmdlineHas(cmdline, guest.DebugArg) {
		level = slog.LevelDebug
	}
	log = ConsoleLogger(console, level)
	if mountErr != nil {
		log.Warn("mount", "err", mountErr)
	}
	return cmdline, console, log
}

// startReaper starts reaping zombies; stop ends it and waits for it.
func startReaper(log *slog.Logger) (_ *Reaper, stop func()) {
	reaper := &Reaper{Logger: log}
	ctx, cancel := context.WithCancel(context.Background())
	var done sync.WaitGroup
	done.Go(func() { _ = reaper.Run(ctx) })
	return reaper, func() {
		cancel()
		done.Wait()
	}
}

// bringUp readies the machine for the link: it loads the modules needed
// now, switches to the root disk if there is one, mounts the shares and
// disks and brings lo up. It returns the modules left for after the first
// command, and commandsReady, closed once busybox's applets and the
// network (both set up in the background) are ready.
//
// Boot is on the critical path of every sandbox: only what the link
// needs happens before serving it. Busybox's applet links are made
// meanwhile (commands wait for them), modules for devices this machine
// lacks are not loaded at all, and the power button's are loaded once
// the first command runs.
//
// A machine with a root disk (guest.RootArg) switches to it once the
// modules are loaded; nothing may start a process before then, since
// the switch changes the whole process's root.
func bringUp(cmdline string, reaper *Reaper, log *slog.Logger) (later []string, commandsReady <-chan struct{}) {
	rootDev, badRoot := rootDevice(cmdline)
	if badRoot != "" {
		log.Warn("root: ignored malformed kernel argument", "arg", badRoot)
	}
	lowerDev, badLower := lowerDevice(cmdline)
	if badLower != "" {
		log.Warn("root: ignored malformed kernel argument", "arg", badLower)
	}
	busybox := "/bin/busybox"
	busyboxReady, ready := make(chan struct{}), make(chan struct{})
	installApplets := func() {
		defer close(busyboxReady)
		if err := installBusybox(reaper); err != nil {
			log.Warn("busybox", "err", err)
		}
		log.Debug("busybox installed")
	}
	if rootDev == "" {
		go installApplets()
	}
	later = loadModulesNow(log)
	if rootDev != "" {
		// A failed switch leaves the initramfs as the root: the host
		// finds no root disk mounted on / and says so.
		if l, bb, err := switchRoot(rootDev, lowerDev, later); err != nil {
			log.Error("switch root", "dev", rootDev, "err", err)
			go installApplets()
		} else {
			later, busybox = l, bb
			log.Info("switched root", "dev", rootDev, "lower", lowerDev)
			close(busyboxReady) // a root disk brings its own tools
		}
	}
	mountShares(cmdline, log)
	mountDisks(cmdline, log)
	// The open network (if asked for) is up before the first command.
	go func() {
		defer close(ready)
		<-busyboxReady
		configureNetwork(cmdline, busybox, reaper, log)
	}()
	if err := loopbackUp(); err != nil {
		log.Warn("loopback", "err", err)
	}
	return later, ready
}

// loadModulesNow loads the modules of guest.ModulesOrder the link needs,
// for the devices this machine has, and returns the deferred ones.
func loadModulesNow(log *slog.Logger) (later []string) {
	mods, err := readModuleList(guest.ModulesOrder)
	if err != nil {
		log.Warn("modules", "err", err)
	}
	now, later := splitModules(mods, deferredModules)
	n := loadModules(now, presentVirtioDevices, log)
	log.Info("modules loaded", "count", n)
	return later
}

// offRequests carries the first reason given to power off; later ones
// are dropped.
type offRequests chan string

func (r offRequests) request(why string) {
	select {
	case r <- why:
	default:
	}
}

// serve serves the link and, once its module is loaded, watches the
// power button, until stop is called; stop waits for both.
func serve(ctx context.Context, a *Agent, buttonsLoaded <-chan struct{}, off offRequests, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var serving sync.WaitGroup
	serving.Go(func() { serveLinks(ctx, a, log) })
	serving.Go(func() {
		// The button's input device exists once its module is loaded.
		select {
		case <-buttonsLoaded:
		case <-ctx.Done():
			return
		}
		watchPowerButton(ctx, log, func() { off.request("power button") })
	})
	return func() {
		cancel()
		serving.Wait()
	}
}

// waitForPowerOff waits for a reason to power off: a request, SIGTERM,
// SIGINT or SIGPWR, or the end of ctx.
func waitForPowerOff(ctx context.Context, off offRequests) string {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGPWR)
	defer signal.Stop(sigs)
	// The reaper's ticker keeps a timer alive, so this wait is never seen
	// by the runtime as every goroutine asleep (which would kill PID 1).
	select {
	case why := <-off:
		return why
	case sig := <-sigs:
		return sig.String()
	case <-ctx.Done():
		return "context ended"
	}
}

// serveLinks serves the link on vsock and on the virtio-serial port,
// whichever the machine has, until ctx ends.
func serveLinks(ctx context.Context, a *Agent, log *slog.Logger) {
	var wg sync.WaitGroup
	defer wg.Wait()
	served := 0
	if !presentVirtioDevices()[virtioVsockID] {
		log.Debug("no vsock device")
	} else if l, err := ListenVsock(guest.VsockPort); err != nil {
		log.Debug("no vsock link", "err", err)
	} else {
		served++
		log.Info("serving link", "vsock_port", guest.VsockPort)
		wg.Go(func() {
			if err := a.Serve(ctx, l); err != nil {
				log.Error("vsock link", "err", err)
			}
		})
	}
	dev, err := FindSerialPort(ctx, guest.SerialPortName)
	switch {
	case errors.Is(err, ErrNoSerialPort):
		if served == 0 {
			log.Error("no guest link: neither vsock nor a virtio-serial port named " + guest.SerialPortName)
		}
	case err != nil:
		log.Error("serial link", "err", err)
	default:
		log.Info("serving link", "serial", dev)
		wg.Go(func() {
			if err := a.ServeSerial(ctx, dev); err != nil {
				log.Error("serial link", "err", err)
			}
		})
	}
}

// openConsole opens /dev/console for writing, or falls back to stderr.
func openConsole() io.Writer {
	f, err := os.OpenFile("/dev/console", os.O_WRONLY|unix.O_NOCTTY, 0)
	if err != nil {
		return os.Stderr
	}
	return f
}
