package transfer

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// The guest's watcher (see Watch) tells a collect which paths of a
// directory changed since the state it remembers was taken, so the walk
// lstats and hashes only those (manifest.Rewalk) instead of the whole
// tree, as git's fsmonitor does. It serves a unix socket next to the
// state file, readable by root only, with one request per connection, a
// line of text, answered by one line of JSON:
//
//	take SINCE NEXT   the paths touched since generation SINCE; the
//	                  watcher starts generation NEXT, empty
//	stop              remove the socket and exit
//	overflow          behave as if the kernel's event queue overflowed
//	                  (for tests: the next take falls back)
//
// Anything else the watcher cannot vouch for makes the collect walk the
// whole tree: no answer within a second or so, a watcher that lost events
// or could not watch a directory, another generation, a rules file
// touched.

// watchAnswer is the watcher's answer to a request.
type watchAnswer struct {
	// Full, when set, says why the touched paths cannot be trusted for
	// this generation: the caller walks the whole tree.
	Full    string      `json:"full,omitempty"`
	Touched []wireTouch `json:"touched,omitempty"`
	OK      bool        `json:"ok,omitempty"`
}

type wireTouch struct {
	Path    string `json:"p"`
	Subtree bool   `json:"t,omitempty"`
}

// Deadlines of a request to the watcher: it answers at once (draining
// the events the command left queued first), so a watcher that does not
// is treated as dead and the collect walks the whole tree.
const (
	watchDialTimeout   = time.Second
	watchAnswerTimeout = 5 * time.Second
)

// watchSocket is the watcher's socket for the state file of a directory.
func watchSocket(stateFile string) string { return stateFile + ".sock" }

// askWatcher sends one request to the watcher at socket and decodes its
// answer.
func askWatcher(ctx context.Context, socket, request string) (*watchAnswer, error) {
	return askWatcherWait(ctx, socket, request, false)
}

// askWatcherWait is askWatcher; with untilClosed it then waits, within
// the answer's deadline, for the watcher to close the connection (on
// "stop", when its process exits).
func askWatcherWait(ctx context.Context, socket, request string, untilClosed bool) (*watchAnswer, error) {
	d := net.Dialer{Timeout: watchDialTimeout}
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("ask the watcher: %w", err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	c.SetWriteDeadline(time.Now().Add(watchDialTimeout))
	if _, err := c.Write([]byte(request + "\n")); err != nil {
		return nil, fmt.Errorf("ask the watcher: %w", err)
	}
	c.SetReadDeadline(time.Now().Add(watchAnswerTimeout))
	br := bufio.NewReaderSize(c, 64<<10)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("ask the watcher: %w", err)
	}
	if untilClosed {
		io.Copy(io.Discard, br)
	}
	var a watchAnswer
	if err := json.Unmarshal(line, &a); err != nil {
		return nil, fmt.Errorf("ask the watcher: %w", err)
	}
	return &a, nil
}

// errNoTouched: the watcher's answer cannot be used; walk everything.
var errNoTouched = errors.New("no list of touched paths")

// takeTouched asks the watcher of the state file for the paths touched
// since generation since and has it start generation next. Any error
// means the whole tree must be walked.
func takeTouched(ctx context.Context, stateFile, since, next string) ([]manifest.Touched, error) {
	if since == "" {
		since = "-"
	}
	a, err := askWatcher(ctx, watchSocket(stateFile), "take "+since+" "+next)
	if err != nil {
		return nil, err
	}
	if a.Full != "" {
		return nil, fmt.Errorf("%w: %s", errNoTouched, a.Full)
	}
	out := make([]manifest.Touched, 0, len(a.Touched))
	for _, t := range a.Touched {
		if !relativeClean(t.Path) {
			return nil, fmt.Errorf("%w: the watcher named %q", errNoTouched, t.Path)
		}
		out = append(out, manifest.Touched{Path: t.Path, Subtree: t.Subtree})
	}
	if p, ok := manifest.RulesTouched(out); ok {
		return nil, fmt.Errorf("%w: %s changed", errNoTouched, p)
	}
	return out, nil
}

// relativeClean reports whether p is a relative path with no empty, "."
// or ".." element.
func relativeClean(p string) bool {
	if p == "" {
		return false
	}
	for el := range strings.SplitSeq(p, "/") {
		if el == "" || el == "." || el == ".." {
			return false
		}
	}
	return true
}

// stopWatcher asks the watcher of the state file, if there is one, to
// exit, and waits for its answer (it removes its socket first).
func stopWatcher(ctx context.Context, stateFile string) error {
	_, err := askWatcherWait(ctx, watchSocket(stateFile), "stop", true)
	return err
}

// StopWatcher stops the watcher of dir, if one runs: for tests and for
// callers that are done with a directory. stateDir is as in
// ListingOptions.
func StopWatcher(ctx context.Context, dir, stateDir string) error {
	file, err := ListingOptions{StateDir: stateDir}.stateFile(dir)
	if err != nil {
		return err
	}
	return stopWatcher(ctx, file)
}
