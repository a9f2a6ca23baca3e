package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/transfer"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// transferCommand runs the guest's end of package sync/transfer: manifest,
// untar or tar. Output goes to stdout, diagnostics to stderr.
func transferCommand(name string, args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
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
		_, err := transfer.Extract(ctx, dir, bufio.NewReaderSize(os.Stdin, 256<<10), transfer.ExtractOptions{AllowGit: allowGit})
		return err
	case "tar":
		return transfer.WriteFiles(ctx, dir, os.Stdin, os.Stdout)
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
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(384 << 20)
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
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
			bufio.NewReaderSize(os.Stdin, 256<<10), os.Stdout)
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
		}, os.Stdout)
	} else {
		err = transfer.WriteListing(ctx, dir, transfer.ListingOptions{Walk: wo, Since: since, Full: full, Logger: log}, os.Stdout)
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
