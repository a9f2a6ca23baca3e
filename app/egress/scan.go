package egress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// scanBuffer is what a placeholderScanner reads at once: small, as it is
// held by every request in flight with a body (uploads through the proxy
// are rare and small next to downloads).
const scanBuffer = 8 << 10

// placeholderScanner passes a request body on while searching all of it
// for placeholders that must not leave with it, without holding the body:
// it keeps back only the last len(placeholder)-1 bytes it has read until
// the next read shows they do not begin one, so no part of a placeholder
// is ever passed on. When it finds one it fails the read, which ends the
// upstream request with its body incomplete (the upstream never sees a
// whole request), and Found says which secret's it was.
//
// It never changes the body: placeholders are replaced only in the one
// header of their own secret (a placeholder in a body sent to its own
// host, such as a chat message, would otherwise put the real secret where
// the response could echo it back to the guest). So the body's length,
// and its Content-Length, stay what the guest sent.
type placeholderScanner struct {
	r       io.ReadCloser
	needles [][]byte
	names   []*Secret
	keep    int    // longest placeholder - 1
	buf     []byte // buf[start:end] is searched and not yet passed on
	start   int
	end     int
	err     error // what r returned; passed on once buf is drained
	// found is read by the handler while the transport may still be
	// reading the body.
	found atomic.Pointer[Secret]
}

// newPlaceholderScanner returns r scanned for the placeholders of secrets,
// or nil if there are none to look for.
func newPlaceholderScanner(r io.ReadCloser, secrets []*Secret) *placeholderScanner {
	if len(secrets) == 0 {
		return nil
	}
	s := &placeholderScanner{r: r, names: secrets}
	for _, sec := range secrets {
		s.needles = append(s.needles, []byte(sec.Placeholder))
		s.keep = max(s.keep, len(sec.Placeholder)-1)
	}
	return s
}

// Found is the secret whose placeholder the body carried, or nil.
func (s *placeholderScanner) Found() *Secret { return s.found.Load() }

func (s *placeholderScanner) Read(p []byte) (int, error) {
	for {
		if f := s.found.Load(); f != nil {
			return 0, fmt.Errorf("the request body carries the placeholder of the secret %s", f.Name)
		}
		ready := s.end - s.start
		if s.err == nil {
			ready -= s.keep
		}
		if ready > 0 {
			n := copy(p, s.buf[s.start:s.start+ready])
			s.start += n
			return n, nil
		}
		if s.err != nil {
			return 0, s.err
		}
		if s.buf == nil {
			s.buf = make([]byte, scanBuffer+s.keep)
		}
		s.end = copy(s.buf, s.buf[s.start:s.end])
		s.start = 0
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		s.err = err
		for i, needle := range s.needles {
			if bytes.Contains(s.buf[:s.end], needle) {
				s.found.Store(s.names[i])
				break
			}
		}
	}
}

func (s *placeholderScanner) Close() error { return s.r.Close() }

// bodyTimeout ends a request body that stops arriving: each read must see
// a byte within d. The deadline is the guest connection's (the server's
// ResponseController), cleared once the body ends so that it cannot touch
// the wait for the response.
type bodyTimeout struct {
	r        io.ReadCloser
	rc       *http.ResponseController
	d        time.Duration
	timedOut atomic.Bool
}

func (b *bodyTimeout) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(time.Now().Add(b.d))
	n, err := b.r.Read(p)
	switch {
	case err == io.EOF:
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The deadline stays past: the server's own read of what is left
		// of the body fails at once too, and it closes the connection.
		b.timedOut.Store(true)
		err = fmt.Errorf("%s: %w", b.reason(), err)
	}
	return n, err
}

func (b *bodyTimeout) reason() string {
	return fmt.Sprintf("the guest sent no byte of the request body for %s (BodyTimeout of Airlock's egress proxy configuration)", b.d)
}

func (b *bodyTimeout) Close() error { return b.r.Close() }
