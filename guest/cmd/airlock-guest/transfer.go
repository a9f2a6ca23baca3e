package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"

	"github.com/airlock-dev/airlock/guest/agent"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/transfer"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// transferCommand runs the guest's end of package sync/transfer: manifest,
// untar or tar, as a process of its own. Output goes to stdout,
// diagnostics to stderr.
func transferCommand(name string, args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return transferOn(ctx, name, args, os.Stdin, os.Stdout, os.Stderr)
}

// builtinMu runs one builtin manifest at a time: each sets the process's
// garbage collector for itself.
var builtinMu sync.Mutex

// builtin is the agent's Config.Builtin: manifest, the one subcommand
// every collect runs, and jail-denials, which follows every sandbox
// command, in the agent's own process, saving the start of
// this binary (0.1 to 0.2 s under emulation). Not with --seed (it starts
// a watcher process, found by this binary's path) or --profile, nor for
// a relative directory (the session's working directory is the
// process's, not the agent's): those start the binary as ever.
func builtin(args []string) agent.Builtin {
	if len(args) == 1 && args[0] == "jail-denials" {
		// After every sandbox command: no process of its own to start.
		return func(_ context.Context, _ io.Reader, stdout, _ io.Writer) error { return jailDenials(stdout) }
	}
	if len(args) < 2 || args[0] != "manifest" || !filepath.IsAbs(args[len(args)-1]) {
		return nil
	}
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); name == "seed" || name == "profile" {
			return nil
		}
	}
	return func(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
		builtinMu.Lock()
		defer builtinMu.Unlock()
		// Written in pieces as large as the pipe's a process writes to.
		out := bufio.NewWriterSize(stdout, 64<<10)
		err := transferOn(ctx, args[0], args[1:], stdin, out, stderr)
		if ferr := out.Flush(); err == nil {
			err = ferr
		}
		return err
	}
}

// jailDenials is airlock-guest jail-denials: agent.JailDenials as JSON.
func jailDenials(stdout io.Writer) error {
	counts, err := agent.JailDenials()
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(counts)
}

// transferOn is transferCommand on the given streams, in a process of
// its own or the agent's (builtin).
func transferOn(ctx context.Context, name string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		includeGit, allowGit, noGitignore, seed, full bool
		excludes                                      stringList
		maxEntries                                    int
		maxFile, maxTotal                             int64
		since, profile, overlayLower, overlayUpper    string
	)
	switch name {
	case "manifest":
		fs.BoolVar(&includeGit, "include-git", false, "walk .git too")
		fs.BoolVar(&noGitignore, "no-gitignore", false, "ignore .gitignore files")
		fs.Var(&excludes, "exclude", "extra gitignore-style `pattern` (repeatable)")
		fs.IntVar(&maxEntries, "max-entries", 0, "stop when the tree has more than `n` entries")
		fs.Int64Var(&maxFile, "max-file-size", 0, "leave out, and name, every file over `n` bytes")
		fs.Int64Var(&maxTotal, "max-total-bytes", 0, "stop when files add up to more than `n` bytes")
		fs.StringVar(&since, "since", "", "print only the changes since the remembered manifest `id`, if it is the one remembered")
		fs.BoolVar(&seed, "seed", false, "remember the manifest on stdin as the directory's content (the host has just pushed it) and print its id")
		fs.StringVar(&profile, "profile", "", "write a CPU profile to `file` (for measuring collect)")
		fs.BoolVar(&full, "full", false, "walk the whole tree even when the watcher knows what changed")
		fs.StringVar(&overlayLower, "overlay-lower", "", "the directory is an overlay on the baseline disk mounted at `dir` (its id and tree): list what the upper layer holds")
		fs.StringVar(&overlayUpper, "overlay-upper", "", "the overlay's upper layer `dir` (with --overlay-lower)")
	case "untar":
		fs.BoolVar(&allowGit, "allow-git", false, "accept paths inside .git")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%s: want one directory, got %d arguments", name, fs.NArg())
	}
	dir := fs.Arg(0)
	if (overlayLower == "") != (overlayUpper == "") {
		return fmt.Errorf("%s: --overlay-lower and --overlay-upper go together: give both (the disk sync mode) or neither", name)
	}
	if overlayLower != "" && seed {
		return fmt.Errorf("%s: --seed has no use with an overlay: the baseline disk is its own state", name)
	}
	switch name {
	case "untar":
		_, err := transfer.Extract(ctx, dir, bufio.NewReaderSize(stdin, 256<<10), transfer.ExtractOptions{AllowGit: allowGit})
		return err
	case "tar":
		return transfer.WriteFiles(ctx, dir, stdin, stdout)
	}
	// manifest: the host checks everything again; the caps here only stop
	// an honest walk early instead of hashing gigabytes the host refuses.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	over := func(p manifest.Progress) {
		switch {
		case maxEntries > 0 && p.Entries > maxEntries:
			cancel(fmt.Errorf("%s has more than %d entries: %w", dir, maxEntries, manifest.ErrTooLarge))
		case maxTotal > 0 && p.BytesTotal > maxTotal:
			cancel(fmt.Errorf("files in %s add up to %d bytes, over the limit of %d: %w", dir, p.BytesTotal, maxTotal, manifest.ErrTooLarge))
		}
	}
	// A short-lived walk that allocates per entry: under emulation each
	// garbage collection of a 100k-entry tree costs hundreds of
	// milliseconds, so collect five times less often, within a bound.
	// Set back after: in the agent's process (builtin) the agent runs on.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(384 << 20))
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if seed {
		return transfer.SeedState(ctx, dir, transfer.SeedOptions{StartWatcher: spawnWatcher(), Logger: log},
			bufio.NewReaderSize(stdin, 256<<10), stdout)
	}
	wo := manifest.WalkOptions{
		Excludes: excludes, IncludeGit: includeGit, NoGitignore: noGitignore, Progress: over,
		MaxFileSize: maxFile,
	}
	var err error
	if overlayLower != "" {
		if full {
			since = "" // the whole tree
		}
		err = transfer.WriteOverlayListing(ctx, dir, transfer.OverlayListingOptions{
			Walk: wo, LowerDisk: overlayLower, Upper: overlayUpper, Since: since, MaxEntries: maxEntries, Logger: log,
		}, stdout)
	} else {
		err = transfer.WriteListing(ctx, dir, transfer.ListingOptions{Walk: wo, Since: since, Full: full, Logger: log}, stdout)
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// spawnWatcher starts this binary's watch subcommand; nil when it cannot
// find itself.
func spawnWatcher() func(ctx context.Context, dir, socket, generation string, raiseLimits bool) error {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return transfer.SpawnWatcher(exe)
}

// watchCommand is the watcher of a seeded directory (transfer.Watch). It
// tells the seed it is ready by writing "ready" on stdout, which it then
// closes, or why it could not start; it runs until stopped.
func watchCommand(args []string) error {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	var o transfer.WatchOptions
	fs.StringVar(&o.Generation, "generation", "", "ID of the state being watched")
	fs.StringVar(&o.Socket, "socket", "", "unix socket `path` to serve")
	fs.BoolVar(&o.RaiseLimits, "raise-limits", false, "raise the system's inotify limits as needed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || o.Generation == "" || o.Socket == "" {
		return errors.New("watch: want --generation, --socket and one directory")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	signal.Ignore(syscall.SIGHUP) // the seed's session goes away
	ready := false
	o.Ready = func() {
		ready = true
		os.Stdout.WriteString("ready\n")
		if null, err := os.Open(os.DevNull); err == nil {
			dupOnto(null, 1) // later writes to stdout go nowhere
			null.Close()
		}
	}
	err := transfer.Watch(ctx, fs.Arg(0), o)
	if err != nil && !ready {
		fmt.Fprintln(os.Stdout, err) // the seed reports it
	}
	return err
}
