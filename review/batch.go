package review

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// batch collects what an apply writes without syncing it, so that one
// sync (syncBatch, per OS) makes all of it durable at once: the files
// written (to fsync where the OS has no whole-filesystem sync) and the
// directories whose entries changed.
type batch struct {
	files []string        // absolute paths of files written
	dirs  map[string]bool // absolute paths of directories changed
}

func newBatch() *batch { return &batch{dirs: map[string]bool{}} }

// file records a file written at abs, and its directory.
func (b *batch) file(abs string) {
	if b == nil {
		return
	}
	b.files = append(b.files, abs)
	b.dirs[filepath.Dir(abs)] = true
}

// dir records a change of the entries of directory abs.
func (b *batch) dir(abs string) {
	if b == nil {
		return
	}
	b.dirs[abs] = true
}

// sync makes everything recorded durable and forgets it.
func (b *batch) sync() error {
	fsStep("sync")
	if err := syncBatch(b.files, b.dirs); err != nil {
		return err
	}
	b.files, b.dirs = nil, map[string]bool{}
	return nil
}

// abs is the absolute path of p ("a/b", slash-separated) in project dir.
func abs(dir, p string) string {
	return filepath.Join(dir, filepath.FromSlash(path.Clean(p)))
}

// fsStepHook, in tests, is called before every change an apply makes on
// disk (a file or directory created, written, renamed, removed, a sync),
// so that a test can kill the process at each of them in turn.
var fsStepHook func(op string)

func fsStep(op string) {
	if fsStepHook != nil {
		fsStepHook(op)
	}
}

// syncFiles fsyncs each of paths with sync, a few at a time: the disk
// sees them together rather than one after the other.
// A directory removed since is passed over: its parent is synced too.
func syncFiles(paths []string, dirs bool, sync func(*os.File) error) error {
	const workers = 16
	errs := make(chan error, len(paths))
	work := make(chan string)
	for range min(workers, len(paths)) {
		go func() {
			for p := range work {
				err := syncPath(p, sync)
				if dirs && gone(err) {
					err = nil
				}
				errs <- err
			}
		}()
	}
	for _, p := range paths {
		work <- p
	}
	close(work)
	var first error
	for range paths {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func syncPath(p string, sync func(*os.File) error) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := sync(f); err != nil && !isSyncUnsupported(err) {
		return err
	}
	return nil
}

// gone reports a directory that was removed (or replaced by a file) since
// it was recorded.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// isSyncUnsupported reports an fsync a file system does not do (of a
// directory, mostly): not an error.
func isSyncUnsupported(err error) bool {
	return errors.Is(err, errSyncUnsupported) || errors.Is(err, fs.ErrInvalid)
}

// stageFiles writes every file the steps make (their After, or their
// Before when going back) to a temporary file, not synced (b records
// them): in the file's directory or, where that does not exist yet or is
// to be removed or replaced, in the nearest directory above it that
// stays. It returns them by step index; placeStaged puts one in place.
func (pr *project) stageFiles(steps []Step, forward bool, load func(sum string) ([]byte, error), b *batch) (map[int]string, error) {
	ends := func(s Step) (from, to EntryState) {
		if forward {
			return s.Before, s.After
		}
		return s.After, s.Before
	}
	leaves := map[string]bool{} // directories the steps remove or replace
	for _, s := range steps {
		if from, to := ends(s); from.Type == manifest.Dir && to.Type != manifest.Dir {
			leaves[s.Path] = true
		}
	}
	stays := map[string]bool{".": true}
	isDir := func(d string) bool {
		ok, seen := stays[d]
		if !seen {
			fi, err := pr.root.Lstat(d)
			ok = err == nil && fi.IsDir() && !leaves[d]
			stays[d] = ok
		}
		return ok
	}
	staged := map[int]string{}
	for i, s := range steps {
		_, to := ends(s)
		if !to.Exists || to.Type != manifest.File {
			continue
		}
		dir := "."
		elems := strings.Split(s.Path, "/")
		for k := 1; k < len(elems) && isDir(strings.Join(elems[:k], "/")); k++ {
			dir = strings.Join(elems[:k], "/")
		}
		data, err := load(to.SHA256)
		var tmp string
		if err == nil {
			tmp, err = pr.stage(s.Path, dir, data, to.Mode.Perm(), false)
		}
		if err != nil {
			for _, tmp := range staged {
				_ = pr.root.Remove(tmp)
			}
			return nil, fmt.Errorf("stage %s: %w", s.Path, err)
		}
		b.file(abs(pr.dir, tmp))
		staged[i] = tmp
	}
	return staged, nil
}

// placeStaged renames tmp, staged by stageFiles, to p, whose parents must
// be real directories; b records the change.
func (pr *project) placeStaged(p, tmp string, b *batch) error {
	if _, err := pr.checkParents(p); err != nil {
		_ = pr.root.Remove(tmp)
		return err
	}
	if err := pr.setStaged(p, tmp); err != nil {
		return err
	}
	b.dir(abs(pr.dir, path.Dir(p)))
	return nil
}
