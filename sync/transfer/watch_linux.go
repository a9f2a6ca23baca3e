//go:build linux

package transfer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// WatchOptions configures Watch.
type WatchOptions struct {
	// Generation names the state the watcher starts with: the ID of the
	// state the seed writes.
	Generation string
	// Socket is where the watcher listens (root only: mode 0600 in the
	// state directory).
	Socket string
	// RaiseLimits lets the watcher raise the system's inotify limits
	// (max_queued_events, and max_user_watches when a watch cannot be
	// added): in the guest, which is Airlock's own machine, never on a
	// host.
	RaiseLimits bool
	// Ready, when set, is called once every directory is watched and the
	// socket listens: changes from then on are recorded.
	Ready func()
}

// maxTouched bounds the touched paths a watcher records per generation:
// past it, walking the whole tree costs about as much, and the take
// answers so.
const maxTouched = 1 << 16

// Known blind spots, shared with git's fsmonitor: inotify reports what
// goes through system calls on the watched names. A write through a
// shared writable mapping (mmap) produces no event; the file had to be
// opened for writing after the seed, and its close (IN_CLOSE_WRITE,
// also when the process dies) marks it touched, and every touched path
// is read at collect time, after the command; so only a mapping that is
// written after a collect, by a process that outlives it, is missed by
// the next collect of the same state. Likewise a file with another hard
// link outside the watched tree, written through that name after a
// collect. The pipeline collects once per seed, after the command, so it
// walks with the watcher; ListingOptions.Full (the --full flag) walks
// everything regardless.

// Watch watches dir (every directory of the tree, with inotify) and
// serves the protocol described in watch.go on o.Socket until it is
// stopped, ctx ends, dir itself is removed or moved, or it can no longer
// vouch for what it records (the event queue overflowed, a directory
// could not be watched): then it removes its socket and returns, and a
// collect walks the whole tree.
func Watch(ctx context.Context, dir string, o WatchOptions) error {
	if o.RaiseLimits {
		raiseLimit("/proc/sys/fs/inotify/max_queued_events", 1<<18)
	}
	ifd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	defer unix.Close(ifd)
	w := &watcher{dir: dir, ifd: ifd, opts: o, wds: map[int32]string{}, touched: map[string]bool{}, gen: o.Generation}
	if err := w.addTree(""); err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	if w.broken != "" {
		return fmt.Errorf("watch %s: %s", dir, w.broken)
	}
	clear(w.touched) // the tree as it is now is the generation's start

	lfd, err := listen(o.Socket)
	if err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	defer unix.Close(lfd)
	sockID, _ := os.Lstat(o.Socket)
	defer func() {
		// Remove the socket unless a new watcher has put its own there.
		if fi, err := os.Lstat(o.Socket); err == nil && sockID != nil && os.SameFile(fi, sockID) {
			os.Remove(o.Socket)
		}
	}()
	// ctx ending wakes the poll through an eventfd.
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	defer unix.Close(efd)
	stop := context.AfterFunc(ctx, func() { unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0}) })
	defer stop()
	if o.Ready != nil {
		o.Ready()
	}

	fds := []unix.PollFd{{Fd: int32(ifd), Events: unix.POLLIN}, {Fd: int32(lfd), Events: unix.POLLIN}, {Fd: int32(efd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("watch %s: %w", dir, err)
		}
		if fds[2].Revents != 0 {
			return nil
		}
		if fds[0].Revents != 0 {
			if err := w.drain(); err != nil {
				return fmt.Errorf("watch %s: %w", dir, err)
			}
			if w.broken != "" {
				return nil // nothing to vouch for: collects walk everything
			}
		}
		if fds[1].Revents != 0 {
			nfd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
			if err != nil {
				continue // the client went away; keep serving
			}
			if w.serve(nfd) {
				// The connection stays open until the process exits: the
				// client's read of its end tells it the watcher is gone.
				return nil
			}
			unix.Close(nfd)
		}
	}
}

type watcher struct {
	dir  string
	ifd  int
	opts WatchOptions
	// wds maps watch descriptors to the directory they watch, relative to
	// dir ("" for dir itself).
	wds map[int32]string
	// touched holds the paths touched in this generation; true: with
	// everything below them.
	touched map[string]bool
	tooMany bool
	gen     string
	// broken says why nothing recorded can be vouched for any more.
	broken string
}

// watchMask is what is watched on every directory.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR

// touch records p as touched.
func (w *watcher) touch(p string, subtree bool) {
	if w.tooMany {
		return
	}
	if len(w.touched) >= maxTouched {
		w.tooMany = true
		clear(w.touched)
		return
	}
	w.touched[p] = w.touched[p] || subtree
}

// addTree watches the directory rel and every directory below it. Files
// created there before the watch existed raise no event: the caller
// marks rel touched with its subtree.
func (w *watcher) addTree(rel string) error {
	full := filepath.Join(w.dir, rel)
	wd, err := unix.InotifyAddWatch(w.ifd, full, watchMask)
	if errors.Is(err, unix.ENOSPC) && w.opts.RaiseLimits && raiseLimit("/proc/sys/fs/inotify/max_user_watches", 1<<20) {
		wd, err = unix.InotifyAddWatch(w.ifd, full, watchMask)
	}
	switch {
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
		return nil // gone, or not a directory (any more): its parent's event tells
	case err != nil:
		w.broken = fmt.Sprintf("cannot watch %s: %v", full, err)
		return nil
	}
	// A directory moved within the tree keeps its watch: this renames it.
	w.wds[int32(wd)] = rel
	f, err := os.Open(full)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		w.broken = fmt.Sprintf("cannot list %s: %v", full, err)
		return nil
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		w.broken = fmt.Sprintf("cannot list %s: %v", full, err)
		return nil
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := w.addTree(join(rel, e.Name())); err != nil {
				return err
			}
			if w.broken != "" {
				return nil
			}
		}
	}
	return nil
}

// drain reads and records every queued event, until none is left.
func (w *watcher) drain() error {
	var buf [64 << 10]byte
	for {
		n, err := unix.Read(w.ifd, buf[:])
		if errors.Is(err, unix.EAGAIN) {
			return nil
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read events: %w", err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
			w.event(ev.Wd, ev.Mask, string(name))
			if w.broken != "" {
				return nil
			}
		}
	}
}

// event records one event.
func (w *watcher) event(wd int32, mask uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		w.broken = "the event queue overflowed"
		return
	}
	dir, ok := w.wds[wd]
	if !ok {
		return // a watch already removed
	}
	if name == "" { // the directory itself
		switch {
		case mask&(unix.IN_IGNORED|unix.IN_UNMOUNT|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 && dir == "":
			w.broken = "the watched directory was removed or moved"
		case mask&unix.IN_IGNORED != 0:
			delete(w.wds, wd)
		}
		// Other events on a directory itself come with its name from its
		// parent's watch too.
		return
	}
	p := join(dir, name)
	isDir := mask&unix.IN_ISDIR != 0
	// Below a directory touched whole, only new directories need a watch.
	whole := w.touched[dir] && dir != ""
	switch {
	case isDir && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		if !whole {
			w.touch(p, true)
		}
		w.addTree(p)
	case whole:
	case isDir && mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
		w.touch(p, true)
	default:
		w.touch(p, false)
	}
}

// serve answers one request on the connection fd; it reports whether the
// watcher is to exit.
func (w *watcher) serve(fd int) bool {
	tv := unix.NsecToTimeval(int64(time.Second))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	f := os.NewFile(uintptr(fd), "watch-conn") // not closed: the caller owns fd
	line, err := bufio.NewReader(io.LimitReader(f, 1024)).ReadString('\n')
	if err != nil {
		return false
	}
	req := strings.Fields(line)
	var a watchAnswer
	exit := false
	switch {
	case len(req) == 1 && req[0] == "stop":
		a.OK, exit = true, true
	case len(req) == 1 && req[0] == "overflow":
		w.event(0, unix.IN_Q_OVERFLOW, "")
		a.OK = true
	case len(req) == 3 && req[0] == "take":
		// The command has finished: its events are all queued.
		if err := w.drain(); err != nil && w.broken == "" {
			w.broken = err.Error()
		}
		switch {
		case w.broken != "":
			a.Full, exit = w.broken, true
		case req[1] != w.gen:
			a.Full = "the state is not the one watched (" + req[1] + ", watching since " + w.gen + ")"
		case w.tooMany:
			a.Full = "more than " + strconv.Itoa(maxTouched) + " paths touched"
		default:
			a.Touched = make([]wireTouch, 0, len(w.touched))
			for p, sub := range w.touched {
				a.Touched = append(a.Touched, wireTouch{p, sub})
			}
		}
		w.gen, w.tooMany = req[2], false
		clear(w.touched)
	default:
		a.Full = "unknown request"
	}
	out, _ := json.Marshal(a)
	f.Write(append(out, '\n'))
	return exit
}

// listen binds a unix socket at path that only the owner may use.
func listen(path string) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("listen %s: %w", path, err)
	}
	os.Remove(path) // a stale socket
	old := unix.Umask(0o077)
	err = unix.Bind(fd, &unix.SockaddrUnix{Name: path})
	unix.Umask(old)
	if err == nil {
		err = unix.Listen(fd, 8)
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("listen %s: %w", path, err)
	}
	return fd, nil
}

// raiseLimit raises the system limit in file to at least n, and reports
// whether it did.
func raiseLimit(file string, n int) bool {
	data, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	if cur, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && cur >= n {
		return false
	}
	return os.WriteFile(file, []byte(strconv.Itoa(n)), 0o644) == nil
}

// SpawnWatcher returns a function that starts a watcher for a seeded
// directory: exe (the guest binary) run as `exe watch --generation ID
// --socket PATH DIR` in a session of its own, detached from the caller's
// output, returning once the watcher is ready (every directory watched)
// or has failed.
func SpawnWatcher(exe string) func(ctx context.Context, dir, socket, generation string, raiseLimits bool) error {
	return func(ctx context.Context, dir, socket, generation string, raiseLimits bool) error {
		pr, pw, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("start watcher: %w", err)
		}
		defer pr.Close()
		args := []string{"watch", "--generation", generation, "--socket", socket}
		if raiseLimits {
			args = append(args, "--raise-limits")
		}
		cmd := exec.Command(exe, append(args, "--", dir)...)
		cmd.Stdout = pw // "ready", or why not; then closed
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = cmd.Start()
		pw.Close()
		if err != nil {
			return fmt.Errorf("start watcher: %w", err)
		}
		// The watcher is not waited for: it outlives this process.
		defer cmd.Process.Release()
		stop := context.AfterFunc(ctx, func() { pr.SetReadDeadline(time.Now()) })
		defer stop()
		out, _ := io.ReadAll(io.LimitReader(pr, 4096))
		if string(out) != "ready\n" {
			cmd.Process.Kill()
			return fmt.Errorf("start watcher: %q", strings.TrimSpace(string(out)))
		}
		return nil
	}
}

// join joins a relative directory ("" for the root) and a name.
func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}
