// Command airlock-guest is the agent inside every Airlock VM. As PID 1 of
// the guest's initramfs it sets the machine up and serves the guest link;
// as an ordinary process (airlock-guest serve) it serves the link on a unix
// socket or on stdin/stdout, for tests and development. Its layer
// subcommand writes a provisioning step's changes as an OCI layer. Its manifest, untar
// and tar subcommands are the guest's end of package sync/transfer, which
// the host runs over exec; manifest --seed starts its watch subcommand in
// the background, which records what changes in the seeded directory.
//
// Like package agent, it must not import vm, fyne, vz, review, the app,
// guest/client or testing; of sync it imports only sync/manifest,
// sync/objects and sync/transfer, for those subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/airlock-dev/airlock/guest/agent"
)

const usage = `usage:
  airlock-guest                 run as PID 1 (the VM's /init)
  airlock-guest serve [flags]   serve the guest link as an ordinary process
  airlock-guest manifest [flags] DIR
                                print the manifest of DIR as JSON
  airlock-guest untar [--allow-git] DIR
                                extract a tar stream from stdin into DIR (empty or absent)
  airlock-guest tar DIR         write a tar of the NUL-separated paths on stdin
  airlock-guest layer UPPERDIR  write the OCI layer (tar) of an overlay upper directory
  airlock-guest docker-kernel   ready the kernel for a Docker Engine (modules, cgroup v2,
                                forwarding) and name any missing piece (as root)
  airlock-guest docker-start [--user NAME]
                                start the image's Docker Engine, wait until it answers, and give
                                its containers the proxy (NAME's Docker CLI configuration)
                                (as root; the proxy variables are passed on to it)
  airlock-guest jail [--home DIR] [--write DIR]... -- PATH ARGV0 [ARG...]
                                run PATH (as ARGV0 ARG...) in the agent's jail: no_new_privs,
                                seccomp, Landlock (writes below the DIRs, HOME, /tmp only)
  airlock-guest jail-probe [FILE]
                                try what the jail denies (and writing FILE) and say what happened
  airlock-guest jail-denials     count the jail's denials the kernel logged since boot, by
                                syscall, as JSON (as root)
  airlock-guest watch --generation ID --socket PATH DIR
                                record what changes in DIR for manifest --since
                                (started by manifest --seed)

serve flags:
`

func main() {
	if os.Getpid() == 1 {
		runInit()
		return
	}
	var cmd string
	if len(os.Args) >= 2 {
		cmd = os.Args[1]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(os.Args[2:])
	case "manifest", "untar", "tar":
		err = transferCommand(cmd, os.Args[2:])
	case "watch":
		err = watchCommand(os.Args[2:])
	case "layer":
		err = layerCommand(os.Args[2:])
	case "docker-kernel":
		var ok string
		if ok, err = agent.PrepareDockerKernel(); err == nil {
			fmt.Println(ok)
		}
	case "docker-start":
		err = dockerStart(os.Args[2:])
	case "proxy-relay":
		if len(os.Args) != 4 {
			err = errors.New("usage: airlock-guest proxy-relay LISTEN TARGET")
		} else {
			err = agent.ProxyRelay(os.Args[2], os.Args[3])
		}
	case "jail":
		err = jailCommand(os.Args[2:])
	case "jail-probe":
		agent.JailProbe(os.Stdout, strings.Join(os.Args[2:], " "))
	case "jail-denials":
		err = jailDenials(os.Stdout)
	case "demo-agent":
		err = demoAgent(os.Args[2:])
	default:
		fmt.Fprint(os.Stderr, usage)
		new(serveOptions).flags(os.Stderr).PrintDefaults()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "airlock-guest:", err)
		os.Exit(1)
	}
}

// dockerStart starts the Docker Engine and the containers' way to the
// proxy, saying what runs.
func dockerStart(args []string) error {
	fs := flag.NewFlagSet("docker-start", flag.ContinueOnError)
	user := fs.String("user", "", "the command's user, whose Docker CLI configuration gets the containers' proxy")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	ok, err := agent.StartDocker(ctx)
	if err != nil {
		return err
	}
	url, err := agent.StartContainerProxy(ctx, *user)
	if err != nil {
		return err
	}
	fmt.Printf("%s; containers' proxy %s\n", ok, url)
	return nil
}

// runInit is PID 1. It must never exit: the kernel panics when init dies.
func runInit() {
	err := agent.Init(context.Background(), builtin)
	fmt.Fprintln(os.Stderr, "airlock-guest: power off failed:", err)
	// Hang without looking deadlocked to the runtime: a live ticker.
	for range time.Tick(time.Hour) {
	}
}

type serveOptions struct {
	unix      string
	stdio     bool
	subreaper bool
	shell     string
	home      string
	verbose   bool
}

func (o *serveOptions) flags(out *os.File) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.unix, "unix", "", "listen for link connections on this unix socket `path`")
	fs.BoolVar(&o.stdio, "stdio", false, "serve one link connection on stdin/stdout")
	fs.BoolVar(&o.subreaper, "subreaper", false, "become a child subreaper and reap orphans, as PID 1 does")
	fs.StringVar(&o.shell, "shell", "", "shell that runs commands (default /bin/sh)")
	fs.StringVar(&o.home, "home", "", "HOME and default working directory of commands")
	fs.BoolVar(&o.verbose, "v", false, "log debug messages to stderr")
	return fs
}

// serve runs the agent as an ordinary process until a power-off request,
// SIGINT or SIGTERM, or (with --stdio) the end of the one connection.
func serve(args []string) error {
	var o serveOptions
	if err := o.flags(os.Stderr).Parse(args); err != nil {
		return err
	}
	if (o.unix == "") == !o.stdio {
		return errors.New("serve: give exactly one of --unix PATH and --stdio")
	}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelDebug
	}
	log := agent.ConsoleLogger(os.Stderr, level)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, powerOff := context.WithCancel(ctx)
	defer powerOff()
	g, ctx := errgroup.WithContext(ctx)

	cfg := agent.Config{
		Logger:   log,
		Shell:    o.shell,
		Home:     o.home,
		PowerOff: func() error { powerOff(); return nil },
		Builtin:  builtin,
	}
	if exe, err := os.Executable(); err == nil {
		cfg.Self = []string{exe}
	}
	if o.subreaper {
		if err := agent.BecomeSubreaper(); err != nil {
			return err
		}
		cfg.Reaper = &agent.Reaper{Logger: log}
		g.Go(func() error { return cfg.Reaper.Run(ctx) })
	}
	a := agent.New(cfg)
	g.Go(func() error {
		defer powerOff()
		if o.stdio {
			return a.ServeConn(ctx, agent.FileConn("stdio", os.Stdin, os.Stdout))
		}
		_ = os.Remove(o.unix) // a stale socket from an earlier run
		l, err := net.Listen("unix", o.unix)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		defer os.Remove(o.unix)
		return a.Serve(ctx, l)
	})
	return g.Wait()
}

// jailCommand is airlock-guest jail: the session's command, started in
// the agent's jail (agent.Jail), which it replaces.
func jailCommand(args []string) error {
	fs := flag.NewFlagSet("jail", flag.ContinueOnError)
	home := fs.String("home", "", "the command's home, which it may write below")
	var write []string
	fs.Func("write", "a directory the command may write below (repeatable)", func(d string) error {
		write = append(write, d)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() < 2 {
		return errors.New("jail: want -- PATH ARGV0 [ARG...]")
	}
	return agent.Jail(write, *home, fs.Args(), os.Environ())
}
