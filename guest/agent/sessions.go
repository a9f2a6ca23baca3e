package agent

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"

	"github.com/airlock-dev/airlock/guest"
)

// A serial link carries one yamux session at a time, and each session
// begins with guest.SessionMagic. sessionReader reads the port for the
// agent: it finds the magic that starts a session, then follows the
// session's frames (yamux: a 12-byte header, and for data frames as many
// payload bytes as its length says) so that it looks only at frame
// boundaries for the magic of the next session. Payload is never scanned:
// no file content pushed by the host can end a session.

// yamux frame layout: version, type, flags (2), stream ID (4), length (4).
const (
	frameHeaderSize = 12
	frameTypeData   = 0
	// maxFramePayload bounds a data frame's length: more than any window
	// the host's yamux allows. A larger one is a broken stream.
	maxFramePayload = 64 << 20
)

// errSessionReset ends a session's reads when the host started a new one.
var errSessionReset = errors.New("the host started a new link session")

// errBadFrame ends a session whose stream is not yamux.
var errBadFrame = errors.New("link session: malformed frame")

// sessionReader reads one port for successive sessions. It is not safe
// for concurrent use: one session's yamux reads it at a time.
type sessionReader struct {
	br *bufio.Reader

	header  [frameHeaderSize]byte
	inHdr   int   // header bytes of the current frame read so far
	payload int64 // payload bytes of the current frame still to read
	reset   bool  // the next session's magic has been read
}

func newSessionReader(r io.Reader) *sessionReader {
	return &sessionReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// Start waits for the magic that opens a session: it returns at once when
// the previous session ended on one, else skips everything up to and
// including the next one. It returns the reader's error (io.EOF when the
// host hung up before a magic arrived).
func (s *sessionReader) Start() error {
	s.inHdr, s.payload = 0, 0
	if s.reset {
		s.reset = false
		return nil
	}
	magic := []byte(guest.SessionMagic)
	matched := 0
	for matched < len(magic) {
		c, err := s.br.ReadByte()
		if err != nil {
			return err
		}
		switch {
		case c == magic[matched]:
			matched++
		case c == magic[0]:
			matched = 1
		default:
			matched = 0
		}
	}
	return nil
}

// Drop forgets what is buffered: the host hung up, and nothing it sent
// belongs to its next session.
func (s *sessionReader) Drop() {
	s.br.Discard(s.br.Buffered())
	s.reset = false
}

// Read reads the current session's bytes, never past the frame being read;
// at a frame boundary where the next session's magic stands it consumes
// the magic and returns errSessionReset.
func (s *sessionReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if s.reset {
		return 0, errSessionReset
	}
	if s.inHdr == 0 && s.payload == 0 {
		first, err := s.br.Peek(1)
		if err != nil {
			return 0, err
		}
		if first[0] == guest.SessionMagic[0] {
			got, err := s.br.Peek(len(guest.SessionMagic))
			if err != nil {
				return 0, err
			}
			if !bytes.Equal(got, []byte(guest.SessionMagic)) {
				return 0, errBadFrame
			}
			s.br.Discard(len(got))
			s.reset = true
			return 0, errSessionReset
		}
	}
	if s.inHdr < frameHeaderSize && s.payload == 0 {
		n, err := s.br.Read(b[:min(len(b), frameHeaderSize-s.inHdr)])
		copy(s.header[s.inHdr:], b[:n])
		s.inHdr += n
		if s.inHdr == frameHeaderSize {
			s.inHdr = 0
			if s.header[1] == frameTypeData {
				l := int64(binary.BigEndian.Uint32(s.header[8:12]))
				if l > maxFramePayload {
					return n, errBadFrame
				}
				s.payload = l
			}
		}
		return n, err
	}
	n, err := s.br.Read(b[:min(int64(len(b)), s.payload)])
	s.payload -= int64(n)
	return n, err
}
