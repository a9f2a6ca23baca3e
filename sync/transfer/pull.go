package transfer

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/sync/errgroup"

	"github.com/airlock-dev/airlock/internal/ctxio"
	"github.com/airlock-dev/airlock/internal/headtail"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
)

// Pull copies into store the content of every file that changes bring
// into the guest's dir (added, modified, type-changed or renamed files
// whose content the store lacks, each content once), reading exactly the
// size the guest's manifest declared and checking the SHA-256: content
// that does not match is refused with an error wrapping ErrHostile and
// objects.ErrMismatch, and nothing of it is stored. Nothing is written
// anywhere but the store, and guest symlinks are data (Change.New.Target),
// never read through. Directories, symlinks and deletions need no content.
// The counts and sizes are capped by opts.Limits again, whatever produced
// changes.
func Pull(ctx context.Context, r Remote, dir string, changes []manifest.Change, store *objects.Store, opts Options) (Stats, error) {
	start := time.Now()
	want, err := wanted(changes, store, opts.Limits)
	if err != nil {
		return Stats{}, fmt.Errorf("pull from %s: %w", dir, err)
	}
	p := Progress{Phase: PhasePull, FilesTotal: len(want)}
	for _, e := range want {
		p.BytesTotal += e.Size
	}
	mode := chooseMode(opts.Mode)
	st := Stats{Mode: mode}
	if len(want) == 0 {
		return st, nil
	}
	opts.progress(p)
	var mu sync.Mutex
	done := func(e manifest.Entry) {
		mu.Lock()
		defer mu.Unlock()
		p.Files++
		p.Bytes += e.Size
		opts.progress(p)
	}
	switch mode {
	case ModeTar:
		err = pullTar(ctx, r, dir, want, store, opts, done)
	case ModeSFTP:
		err = pullSFTP(ctx, r, dir, want, store, opts, done)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	st.Duration = time.Since(start)
	if err != nil {
		return st, fmt.Errorf("pull from %s (%s): %w", dir, mode, err)
	}
	st.Files, st.Bytes = p.Files, p.Bytes
	return st, nil
}

// wanted lists the file entries whose content Pull must fetch.
func wanted(changes []manifest.Change, store *objects.Store, limits manifest.Limits) ([]manifest.Entry, error) {
	l := capsOf(limits)
	seen := make(map[string]bool)
	var want []manifest.Entry
	var total int64
	for _, c := range changes {
		e := c.New
		if e == nil || e.Type != manifest.File {
			continue
		}
		if err := validName(e.Path, limits.AllowGit); err != nil {
			return nil, err
		}
		if err := objects.ValidSum(e.SHA256); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Path, err)
		}
		switch {
		case e.Size < 0:
			return nil, &manifest.ValidationError{Path: e.Path, Rule: fmt.Sprintf("negative size %d", e.Size), Err: manifest.ErrInvalid}
		case e.Size > l.maxFile:
			return nil, &manifest.ValidationError{Path: e.Path, Rule: fmt.Sprintf("file is %d bytes, over the limit of %d", e.Size, l.maxFile), Err: manifest.ErrTooLarge}
		}
		if seen[e.SHA256] || store.Has(e.SHA256) {
			continue
		}
		seen[e.SHA256] = true
		if total += e.Size; total > l.maxTotal {
			return nil, &manifest.ValidationError{Path: e.Path, Rule: fmt.Sprintf("changed files add up to more than %d bytes", l.maxTotal), Err: manifest.ErrTooLarge}
		}
		if len(want) >= l.maxEntries {
			return nil, &manifest.ValidationError{Rule: fmt.Sprintf("more than %d changed files", l.maxEntries), Err: manifest.ErrTooLarge}
		}
		want = append(want, *e)
	}
	return want, nil
}

type caps struct {
	maxEntries        int
	maxFile, maxTotal int64
}

// capsOf mirrors manifest.Limits' defaults (0: default, <0: none).
func capsOf(l manifest.Limits) caps {
	pick := func(v, def int64) int64 {
		switch {
		case v == 0:
			return def
		case v < 0:
			return 1<<63 - 1
		}
		return v
	}
	return caps{
		maxEntries: int(pick(int64(l.MaxEntries), 500_000)),
		maxFile:    pick(l.MaxFileSize, 1<<30),
		maxTotal:   pick(l.MaxTotalBytes, 4<<30),
	}
}

func hostile(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrHostile, fmt.Sprintf(format, args...))
}

// putVerified stores exactly e.Size bytes of r, which must hash to
// e.SHA256.
func putVerified(ctx context.Context, store *objects.Store, r io.Reader, e manifest.Entry) error {
	if err := store.PutExpect(ctxio.Reader(ctx, r), e.SHA256, e.Size); err != nil {
		if errors.Is(err, objects.ErrMismatch) {
			return fmt.Errorf("%s: %w: content is not what the manifest declared: %w", e.Path, ErrHostile, err)
		}
		return fmt.Errorf("%s: %w", e.Path, ctxErr(ctx, err))
	}
	return nil
}

func pullSFTP(ctx context.Context, r Remote, dir string, want []manifest.Entry, store *objects.Store, opts Options, done func(manifest.Entry)) error {
	c, err := r.SFTP(sftp.UseConcurrentReads(true), sftp.MaxConcurrentRequestsPerFile(64))
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.concurrency())
	for _, e := range want {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := sftpGet(gctx, c, path.Join(dir, e.Path), e, store); err != nil {
				return err
			}
			done(e)
			return nil
		})
	}
	return ctxErr(ctx, g.Wait())
}

func sftpGet(ctx context.Context, c *sftp.Client, full string, e manifest.Entry, store *objects.Store) error {
	// Lstat: a symlink is refused, never followed (on the guest's side, as
	// the host never follows anything of the guest's).
	info, err := c.Lstat(full)
	if err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s: %w", e.Path, hostile("manifest says file, guest has %s", info.Mode().Type()))
	}
	f, err := c.Open(full)
	if err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	defer f.Close()
	// The size the manifest declared caps the read; PutExpect reads one
	// byte more to see a longer file and hashes what it got.
	return putVerified(ctx, store, f, e)
}

func pullTar(ctx context.Context, r Remote, dir string, want []manifest.Entry, store *objects.Store, opts Options, done func(manifest.Entry)) error {
	var names strings.Builder
	for _, e := range want {
		names.WriteString(e.Path)
		names.WriteByte(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	stderr := &capped{headtail.Head{Max: 16 << 10}}
	execErr := make(chan error, 1)
	go func() {
		err := r.Exec(ctx, command(opts.agent(), "tar", "--", dir), strings.NewReader(names.String()), pw, stderr)
		pw.CloseWithError(err)
		execErr <- err
	}()
	rerr := readFiles(ctx, pr, want, store, done)
	if rerr != nil {
		pr.CloseWithError(rerr)
		cancel()
	}
	eerr := <-execErr
	switch {
	case rerr != nil && errors.Is(rerr, ErrHostile):
		return rerr
	case eerr != nil && !errors.Is(eerr, context.Canceled):
		return fmt.Errorf("guest tar: %w%s", eerr, stderr.suffix())
	}
	return rerr
}

// readFiles reads the guest's tar stream: exactly the files of want, in
// order, each a regular file of the declared size and content.
func readFiles(ctx context.Context, r io.Reader, want []manifest.Entry, store *objects.Store, done func(manifest.Entry)) error {
	tr := tar.NewReader(r)
	for _, e := range want {
		hdr, err := tr.Next()
		if err == io.EOF {
			return hostile("stream ended before %s", e.Path)
		}
		if err != nil {
			return fmt.Errorf("read tar before %s: %w", e.Path, err)
		}
		switch {
		case hdr.Name != e.Path:
			return hostile("stream sent %q where %q was due", clip(hdr.Name), e.Path)
		case hdr.Typeflag != tar.TypeReg:
			return fmt.Errorf("%s: %w", e.Path, hostile("manifest says file, stream has tar type %q", hdr.Typeflag))
		case hdr.Size != e.Size:
			return fmt.Errorf("%s: %w", e.Path, hostile("stream has %d bytes, manifest said %d", hdr.Size, e.Size))
		}
		if err := putVerified(ctx, store, tr, e); err != nil {
			return err
		}
		done(e)
	}
	if _, err := tr.Next(); err != io.EOF {
		return hostile("stream has more than the %d files asked for", len(want))
	}
	return nil
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
