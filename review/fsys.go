package review

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// EntryState is what one path holds at one moment: nothing, a file (mode
// and SHA-256), a directory (mode) or a symbolic link (target).
type EntryState struct {
	Exists bool          `json:"exists"`
	Type   manifest.Type `json:"type,omitempty"`
	Mode   fs.FileMode   `json:"mode,omitempty"`
	SHA256 string        `json:"sha256,omitempty"`
	Target string        `json:"target,omitempty"`
}

// Equal compares two states; directory modes are compared too.
func (s EntryState) Equal(o EntryState) bool {
	if s.Exists != o.Exists {
		return false
	}
	if !s.Exists {
		return true
	}
	return s.Type == o.Type && s.Mode == o.Mode && s.SHA256 == o.SHA256 && s.Target == o.Target
}

// sameContent compares type and content, ignoring modes.
func (s EntryState) sameContent(o EntryState) bool {
	if s.Exists != o.Exists {
		return false
	}
	return !s.Exists || (s.Type == o.Type && s.SHA256 == o.SHA256 && s.Target == o.Target)
}

// hash is the SHA-256 an audit log records for the state: of the content
// for a file, of the target for a link, "" otherwise.
func (s EntryState) hash() string {
	switch {
	case !s.Exists:
		return ""
	case s.Type == manifest.Symlink:
		return sha256Hex([]byte(s.Target))
	}
	return s.SHA256
}

// project gives access to the user's project that never leaves its root
// (os.Root resolves every path openat-style) and never passes through a
// symbolic link: each parent of a path is checked with Lstat to be a real
// directory before anything is read or written under it.
type project struct {
	root *os.Root
	dir  string // the root's absolute path
}

// errSymlinkParent is returned when a parent of a path is a symbolic link.
var errSymlinkParent = errors.New("a parent directory is a symbolic link")

// errFileParent is returned when a parent of a path is a file: nothing
// can be at the path.
var errFileParent = errors.New("is not a directory")

// checkParents verifies that every existing parent of p is a real
// directory, and returns the parents that are missing, shallowest first.
func (pr *project) checkParents(p string) (missing []string, err error) {
	elems := strings.Split(p, "/")
	for i := 1; i < len(elems); i++ {
		dir := strings.Join(elems[:i], "/")
		fi, err := pr.root.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			for j := i; j < len(elems); j++ {
				missing = append(missing, strings.Join(elems[:j], "/"))
			}
			return missing, nil
		case err != nil:
			return nil, err
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, fmt.Errorf("%s: %w", dir, errSymlinkParent)
		case !fi.IsDir():
			return nil, fmt.Errorf("%s %w", dir, errFileParent)
		}
	}
	return nil, nil
}

// state reads what p holds now, hashing file contents.
func (pr *project) state(p string) (EntryState, []byte, error) {
	missing, err := pr.checkParents(p)
	if err != nil {
		return EntryState{}, nil, err
	}
	if len(missing) > 0 {
		return EntryState{}, nil, nil
	}
	fi, err := pr.root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return EntryState{}, nil, nil
	}
	if err != nil {
		return EntryState{}, nil, err
	}
	st := EntryState{Exists: true, Mode: fi.Mode().Perm()}
	switch {
	case fi.Mode().IsRegular():
		st.Type = manifest.File
		data, err := pr.readFile(p)
		if err != nil {
			return EntryState{}, nil, err
		}
		st.SHA256 = sha256Hex(data)
		return st, data, nil
	case fi.IsDir():
		st.Type = manifest.Dir
	case fi.Mode()&fs.ModeSymlink != 0:
		st.Type, st.Mode = manifest.Symlink, 0
		if st.Target, err = pr.root.Readlink(p); err != nil {
			return EntryState{}, nil, err
		}
		return st, []byte(st.Target), nil
	default:
		return EntryState{}, nil, fmt.Errorf("%s is a special file (%s); Airlock does not touch those", p, fi.Mode().Type())
	}
	return st, nil, nil
}

// replayState is state as Undo and Recover read a journal's paths: a
// path under a file or a symbolic link holds nothing (a directory the
// apply turned into a file or link, or one it will make in place of a
// file or link, was there or will be). Nothing is read through the link,
// and setState refuses to write through it.
func (pr *project) replayState(p string) (EntryState, []byte, error) {
	st, data, err := pr.state(p)
	if errors.Is(err, errFileParent) || errors.Is(err, errSymlinkParent) {
		return EntryState{}, nil, nil
	}
	return st, data, err
}

func (pr *project) readFile(p string) ([]byte, error) {
	f, err := pr.root.OpenFile(p, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s changed type while being read", p)
	}
	return io.ReadAll(f)
}

// syncDir fsyncs directory dir ("." for the root).
func (pr *project) syncDir(dir string) error {
	d, err := pr.root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errSyncUnsupported) {
		return err
	}
	return nil
}

func tempName(p string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return path.Join(path.Dir(p), ".airlock-"+hex.EncodeToString(b[:])+".tmp")
}

// setState makes p hold to, reading file contents with load. The change
// is atomic: a file, link or directory is made under a temporary name in
// the same directory, then renamed over p. Missing parents are not
// created here: they are steps of their own.
//
// With b nil the change is durable when setState returns (the file and
// the directory fsynced). Otherwise nothing is synced: b records what to
// sync, and b.sync makes it durable together with the rest of the batch.
// A file is written whole before it is renamed, but only a sync makes
// its content durable: an apply stages file contents (stage) and syncs
// them before it renames any (setStaged).
func (pr *project) setState(p string, to EntryState, load func(sum string) ([]byte, error), b *batch) error {
	if _, err := pr.checkParents(p); err != nil {
		return err
	}
	dir := path.Dir(p)
	switch {
	case !to.Exists:
		fsStep("remove")
		if err := pr.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	case to.Type == manifest.Dir:
		fi, err := pr.root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := pr.mkdir(p, to.Mode.Perm(), b); err != nil {
				return err
			}
		case err != nil:
			return err
		case !fi.IsDir():
			return fmt.Errorf("%s is not a directory", p)
		default:
			fsStep("chmod")
			if err := pr.root.Chmod(p, to.Mode.Perm()); err != nil {
				return err
			}
		}
	case to.Type == manifest.Symlink:
		tmp := tempName(p)
		fsStep("symlink")
		if err := pr.root.Symlink(to.Target, tmp); err != nil {
			return err
		}
		fsStep("rename")
		if err := pr.root.Rename(tmp, p); err != nil {
			_ = pr.root.Remove(tmp)
			return err
		}
	case to.Type == manifest.File:
		data, err := load(to.SHA256)
		if err != nil {
			return err
		}
		tmp, err := pr.stage(p, dir, data, to.Mode.Perm(), b == nil)
		if err != nil {
			return err
		}
		if err := pr.setStaged(p, tmp); err != nil {
			return err
		}
	default:
		return fmt.Errorf("cannot create %s of type %q", p, to.Type)
	}
	if b != nil {
		b.dir(abs(pr.dir, dir))
		return nil
	}
	return pr.syncDir(dir)
}

// mkdir makes directory p with mode exactly: made under a temporary
// name, given its mode (mkdir's is cut by the umask), then renamed to p,
// so that p never holds a directory with another mode.
func (pr *project) mkdir(p string, mode fs.FileMode, b *batch) error {
	tmp := tempName(p)
	fsStep("mkdir")
	if err := pr.root.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	fsStep("chmod")
	err := pr.root.Chmod(tmp, mode)
	if err == nil {
		fsStep("rename")
		err = pr.root.Rename(tmp, p)
	}
	if err != nil {
		_ = pr.root.Remove(tmp)
		return err
	}
	if b != nil {
		b.dir(abs(pr.dir, p))
	}
	return nil
}

// stage writes data with mode to a new temporary file in directory dir
// and returns its name; durable fsyncs it. setStaged renames it to where
// it goes, which is dir or under it.
func (pr *project) stage(p, dir string, data []byte, mode fs.FileMode, durable bool) (string, error) {
	tmp := tempName(path.Join(dir, path.Base(p)))
	fsStep("create")
	f, err := pr.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if err != nil {
		return "", err
	}
	fsStep("write")
	_, err = f.Write(data)
	if err == nil {
		// fchmod is not subject to the umask: the mode is exact. Only
		// permission bits: setuid, setgid and sticky are never set.
		err = f.Chmod(mode.Perm())
	}
	if err == nil && durable {
		fsStep("fsync")
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = pr.root.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// setStaged renames the staged file tmp to p.
func (pr *project) setStaged(p, tmp string) error {
	fsStep("rename")
	if err := pr.root.Rename(tmp, p); err != nil {
		_ = pr.root.Remove(tmp)
		return err
	}
	return nil
}

// removeTemps deletes temporary files (and empty temporary directories) a
// crashed apply may have left in the directories of steps; an apply
// stages files there or in a directory of an earlier step.
func (pr *project) removeTemps(steps []Step) {
	seen := map[string]bool{}
	for _, s := range steps {
		dir := path.Dir(s.Path)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		if _, err := pr.checkParents(path.Join(dir, "x")); err != nil {
			continue
		}
		d, err := pr.root.Open(dir)
		if err != nil {
			continue
		}
		names, _ := d.Readdirnames(-1)
		d.Close()
		for _, n := range names {
			if strings.HasPrefix(n, ".airlock-") && strings.HasSuffix(n, ".tmp") {
				p := path.Join(dir, n)
				// A directory is one mkdir made: removed if still
				// empty, as it is.
				if _, err := pr.root.Lstat(p); err == nil {
					_ = pr.root.Remove(p)
				}
			}
		}
	}
}
