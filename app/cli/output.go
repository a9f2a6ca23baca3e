package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/airlock-dev/airlock/internal/safetext"
)

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (e *env) printJSON(v any) error { return writeJSON(e.stdout, v) }

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressLine renders progress on one terminal line that is rewritten in
// place, with an elapsed-time ticker while a step is slower than a second.
// On a non-terminal, or with --quiet or --json, it prints nothing.
type progressLine struct {
	w       io.Writer
	enabled bool

	mu      sync.Mutex
	msg     string
	key     string // what stepOrUpdate started
	started time.Time
	stop    chan struct{}
	done    chan struct{}
}

func (e *env) newProgress() *progressLine {
	return &progressLine{w: e.stderr, enabled: !e.quiet && !e.json && isTerminal(e.stderr)}
}

// Step starts a new step, ending the previous one.
func (p *progressLine) Step(msg string) {
	if !p.enabled {
		return
	}
	p.end("")
	p.mu.Lock()
	p.msg, p.key, p.started = msg, "", time.Now()
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	stop, done := p.stop, p.done
	p.mu.Unlock()
	p.draw()
	go func() {
		defer close(done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
}

// Update changes the current step's message (e.g. "pushing 312/1840").
func (p *progressLine) Update(msg string) {
	if !p.enabled {
		return
	}
	p.mu.Lock()
	p.msg = msg
	p.mu.Unlock()
	p.draw()
}

// Done ends the current step, leaving final as its line ("" erases it).
func (p *progressLine) Done(final string) {
	if !p.enabled {
		return
	}
	p.end(final)
}

func (p *progressLine) end(final string) {
	p.mu.Lock()
	stop, done := p.stop, p.done
	p.stop, p.done = nil, nil
	p.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
	p.mu.Lock()
	defer p.mu.Unlock()
	if final == "" {
		fmt.Fprint(p.w, "\r\033[K")
	} else {
		fmt.Fprintf(p.w, "\r\033[K%s\n", final)
	}
}

func (p *progressLine) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop == nil {
		return
	}
	el := time.Since(p.started)
	line := p.msg
	if el >= time.Second {
		line += fmt.Sprintf(" %.1fs", el.Seconds())
	}
	fmt.Fprintf(p.w, "\r\033[K%s", strings.TrimSpace(line))
}

// termSize returns the size of the terminal f.
func termSize(f *os.File) (cols, rows int, err error) { return term.GetSize(int(f.Fd())) }

// shown is text from the guest (a path, a summary, a file's lines) as
// it may be written to w: made safe (safetext.Text: control sequences,
// bidi and invisible characters as visible escapes) when w is a terminal,
// the exact bytes otherwise (a file, a pipe, a patch for git apply).
func shown(w io.Writer, s string) string {
	if isTerminal(w) {
		return safetext.Text(s)
	}
	return s
}

// shownLine is shown for text that must stay on one line (a path, a
// table cell): on a terminal a newline in it is escaped too.
func shownLine(w io.Writer, s string) string {
	if isTerminal(w) {
		return safetext.Line(s)
	}
	return s
}
