// Package transfer moves project trees between the host and a guest: Push
// writes a baseline (files from the content store, modes, symlinks, empty
// directories) into a directory on the guest's own disk, RemoteManifest has
// the guest describe a directory in one request, and Pull copies only the
// changed files back into the content store, verified by size and SHA-256.
// It also holds both ends of the tar streams it uses (Extract and
// WriteFiles), which the guest binary runs as its untar and tar
// subcommands, the guest's watcher (Watch), which tells a collect
// which paths changed since the seed, and the guest's end of a collect
// from an overlay on the baseline disk (WriteOverlayListing), which
// needs neither seed nor watcher.
//
// Everything that comes back from the guest is untrusted: manifests go
// through manifest.Decode with caps, pulled bytes are read up to their
// declared size and hashed, and nothing from the guest is ever written to
// a host path other than the content store.
//
// It works over a Remote it is handed (the app adapts guest/client): it must
// not import vm, guest, app, review or fyne.
package transfer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/sftp"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// Remote is what transfer needs of a guest. *client.Client's SFTP method
// has this signature; its Run is adapted to Exec.
type Remote interface {
	// SFTP opens a new SFTP session; the caller closes it.
	SFTP(opts ...sftp.ClientOption) (*sftp.Client, error)
	// Exec runs script with /bin/sh -c in the guest, streaming stdin to it
	// and its output to stdout and stderr (nil discards). It returns when
	// the command has exited and its output is delivered; a non-zero exit
	// is an error. When ctx ends the command is killed.
	Exec(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error
}

// Mode chooses how file contents travel.
type Mode string

const (
	// ModeAuto picks by measurement (see chooseMode).
	ModeAuto Mode = ""
	// ModeSFTP uses one SFTP session with several files in flight and
	// several requests in flight per file.
	ModeSFTP Mode = "sftp"
	// ModeTar uses one tar stream over an exec channel, extracted (push)
	// or written (pull) by the guest agent's untar and tar subcommands.
	ModeTar Mode = "tar"
)

// DefaultAgentPath is where Airlock's images keep the guest agent (it is
// PID 1). guest.Welcome.Agent reports the real path.
const DefaultAgentPath = "/init"

// DefaultConcurrency is how many files SFTP keeps in flight.
const DefaultConcurrency = 16

// Options configures Push, RemoteManifest and Pull. The zero value is
// usable.
type Options struct {
	// Mode chooses the transport; ModeAuto picks by the tree's shape.
	Mode Mode
	// Concurrency bounds the files SFTP keeps in flight; 0 means
	// DefaultConcurrency.
	Concurrency int
	// Progress, when set, receives events from one goroutine at a time.
	Progress func(Progress)
	// Limits caps what RemoteManifest accepts and what Pull reads.
	// Limits.AllowGit also makes the guest's walk include .git.
	Limits manifest.Limits
	// Excludes are airlock.toml's exclude patterns, applied by the guest's
	// walk as by the host's.
	Excludes []string
	// AgentPath is the guest agent binary in the guest; empty means
	// DefaultAgentPath.
	AgentPath string
	// Logger receives debug messages; nil discards them.
	Logger *slog.Logger
	// FullWalk makes RemoteManifest's guest walk the whole tree even when
	// its watcher knows which paths changed (see Watch for what it cannot
	// know). The pipeline leaves it off: it collects once per seed, after
	// the command, and every path touched since the seed is read then, so
	// the watcher's blind spots (writes through a mapping or another hard
	// link after a collect) cannot reach that collect; a whole walk of
	// 100,000 files costs about ten times the watched one under TCG.
	FullWalk bool
	// Overlay, when set, names the layers of the overlay at the directory
	// RemoteManifest collects (the disk sync mode): the guest then lists
	// only what the upper layer holds, against the baseline. FullWalk
	// then asks for the whole tree.
	Overlay OverlayDirs
}

func (o Options) agent() string {
	if o.AgentPath == "" {
		return DefaultAgentPath
	}
	return o.AgentPath
}

func (o Options) concurrency() int {
	if o.Concurrency <= 0 {
		return DefaultConcurrency
	}
	return o.Concurrency
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

func (o Options) progress(p Progress) {
	if o.Progress != nil {
		o.Progress(p)
	}
}

// Phase says what a Progress event counts.
type Phase string

const (
	PhasePush Phase = "push" // writing files into the guest
	PhasePull Phase = "pull" // copying changed files from the guest
)

// Progress is a snapshot of a transfer's counters: "pushing 312/1840
// files, 12.1/40.3 MB".
type Progress struct {
	Phase      Phase
	Files      int // files done
	FilesTotal int
	Bytes      int64 // content bytes done
	BytesTotal int64
}

// Stats sums up a finished transfer.
type Stats struct {
	Mode     Mode
	Files    int
	Dirs     int
	Symlinks int
	Bytes    int64 // file content bytes
	Duration time.Duration
}

// Errors callers branch on.
var (
	// ErrNotEmpty: Push was asked to write into a guest directory that
	// already holds something.
	ErrNotEmpty = errors.New("destination is not empty")
	// ErrHostile: the guest sent something that breaks the protocol (a
	// file that is not what its manifest said, a stream out of order).
	// Keep the sandbox for inspection.
	ErrHostile = errors.New("guest broke the transfer protocol")
)

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ShellCommand is a shell command line of words, each quoted for
// /bin/sh.
func ShellCommand(words ...string) string { return command(words...) }

// command builds a shell command line from words.
func command(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellQuote(w)
	}
	return strings.Join(q, " ")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
