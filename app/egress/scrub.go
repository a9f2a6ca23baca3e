package egress

import (
	"bytes"
	"io"
	"net/http"
	"strings"
)

// A secret goes to its host in a request; an upstream that echoes the
// request (a debugging endpoint, an error page quoting the header, a
// service that returns the key it was given) would hand its value back to
// the guest. Every answer to a request the proxy put a secret in is
// scrubbed on its way back: the value becomes the placeholder again, in
// the headers and in the body as it streams. The request asks for no
// encoding of its own (the transport asks for gzip and decodes it), so
// the body is seen as sent.

// minScrubbed is the shortest value scrubbed: a shorter one would match
// ordinary text in answers (no real credential is that short).
const minScrubbed = 8

// scrubHeader replaces value with placeholder in every header of h, and
// reports how many it replaced.
func scrubHeader(h http.Header, value, placeholder string) int {
	n := 0
	for k, vs := range h {
		for i, v := range vs {
			if strings.Contains(v, value) {
				vs[i] = strings.ReplaceAll(v, value, placeholder)
				n++
			}
		}
		h[k] = vs
	}
	return n
}

// scrubber is a response body with every occurrence of value replaced by
// placeholder. It holds back only what could be the start of value (the
// longest end of what it read that value begins with), so a stream of
// events reaches the guest as it comes, and no byte of value ever does.
type scrubber struct {
	r                  io.ReadCloser
	value, placeholder []byte
	pending            []byte // read, not yet given out
	out                []byte // ready to give out
	buf                []byte // what the body is read into
	found              int
	eof                bool
}

func newScrubber(r io.ReadCloser, value, placeholder string) *scrubber {
	return &scrubber{r: r, value: []byte(value), placeholder: []byte(placeholder)}
}

func (s *scrubber) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.eof {
			return 0, io.EOF
		}
		if s.buf == nil {
			s.buf = make([]byte, 32<<10)
		}
		n, err := s.r.Read(s.buf)
		s.pending = append(s.pending, s.buf[:n]...)
		if err != nil {
			if err != io.EOF {
				return 0, err
			}
			s.eof = true
		}
		s.scrub()
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// scrub moves what is safe from pending to out, replacing every whole
// occurrence of value; at the end, everything.
func (s *scrubber) scrub() {
	for {
		i := bytes.Index(s.pending, s.value)
		if i < 0 {
			break
		}
		s.out = append(append(s.out, s.pending[:i]...), s.placeholder...)
		s.pending = s.pending[i+len(s.value):]
		s.found++
	}
	keep := 0
	if !s.eof {
		keep = partialMatch(s.pending, s.value)
	}
	s.out = append(s.out, s.pending[:len(s.pending)-keep]...)
	s.pending = append([]byte(nil), s.pending[len(s.pending)-keep:]...)
}

// partialMatch is the length of the longest end of b that value begins
// with (shorter than value: a whole one is replaced before).
func partialMatch(b, value []byte) int {
	for n := min(len(b), len(value)-1); n > 0; n-- {
		if bytes.HasPrefix(value, b[len(b)-n:]) {
			return n
		}
	}
	return 0
}

func (s *scrubber) Close() error { return s.r.Close() }

// injection is the secret a request carries to its own host (own, its
// value taken for this request): put in on the way out, scrubbed from the
// answer on the way back.
type injection struct {
	own     *Secret
	value   string
	sent    bool
	headers int // echoes found in the answer's headers
	body    *scrubber
}

// put substitutes the secret into the outgoing headers h, and reports
// whether the request carries it. The answer is then scrubbed, so it must
// come as sent, not in an encoding of the guest's choosing: the
// transport asks for gzip and decodes it.
func (in *injection) put(h http.Header) bool {
	if in.own == nil || !substitute(h, in.own, in.value) {
		return false
	}
	in.sent = true
	h.Del("Accept-Encoding")
	return true
}

// scrub is the reverse proxy's ModifyResponse: the answer to a request
// that carried the secret gets the placeholder where it held the value.
func (in *injection) scrub(resp *http.Response) error {
	if !in.sent || len(in.value) < minScrubbed {
		return nil
	}
	in.headers += scrubHeader(resp.Header, in.value, in.own.Placeholder)
	if resp.Body != nil && resp.Body != http.NoBody && resp.StatusCode != http.StatusSwitchingProtocols {
		in.body = newScrubber(resp.Body, in.value, in.own.Placeholder)
		resp.Body = in.body
		// The placeholder's length is not the value's.
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
	}
	return nil
}

// echoed is how many times the answer held the value.
func (in *injection) echoed() int {
	n := in.headers
	if in.body != nil {
		n += in.body.found
	}
	return n
}
