package agent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/airlock-dev/airlock/guest"
)

func yamuxFrame(typ byte, payload []byte, length uint32) []byte {
	h := make([]byte, frameHeaderSize)
	h[1] = typ
	binary.BigEndian.PutUint32(h[4:], 1)
	if typ == frameTypeData {
		length = uint32(len(payload))
	}
	binary.BigEndian.PutUint32(h[8:], length)
	return append(h, payload...)
}

// readSession reads one session with small reads until it ends.
func readSession(t *testing.T, s *sessionReader) ([]byte, error) {
	t.Helper()
	var got []byte
	buf := make([]byte, 5)
	for {
		n, err := s.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return got, err
		}
	}
}

func TestSessionReader(t *testing.T) {
	magic := []byte(guest.SessionMagic)
	// A payload holding the magic must not end a session.
	first := append(yamuxFrame(frameTypeData, append([]byte("file:"), magic...), 0), yamuxFrame(1, nil, 1<<20)...)
	second := yamuxFrame(frameTypeData, []byte("hello"), 0)
	var stream []byte
	stream = append(stream, "tail of a saved session\xff\x00"...)
	stream = append(stream, magic...)
	stream = append(stream, first...)
	stream = append(stream, magic...)
	stream = append(stream, second...)

	s := newSessionReader(bytes.NewReader(stream))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	got, err := readSession(t, s)
	if !errors.Is(err, errSessionReset) || !bytes.Equal(got, first) {
		t.Fatalf("first session: %q, %v; want %q, errSessionReset", got, err, first)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	got, err = readSession(t, s)
	if err != io.EOF || !bytes.Equal(got, second) {
		t.Fatalf("second session: %q, %v; want %q, EOF", got, err, second)
	}

	// Something at a frame boundary that starts like the magic but is not.
	bad := append(append([]byte(nil), magic...), magic[0], 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x')
	s = newSessionReader(bytes.NewReader(bad))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := readSession(t, s); !errors.Is(err, errBadFrame) {
		t.Errorf("broken magic: %v, want errBadFrame", err)
	}
	// An absurd data length.
	huge := append(append([]byte(nil), magic...), yamuxFrame(1, nil, 0)...)
	huge[len(magic)+1] = frameTypeData
	binary.BigEndian.PutUint32(huge[len(magic)+8:], maxFramePayload+1)
	s = newSessionReader(bytes.NewReader(huge))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := readSession(t, s); !errors.Is(err, errBadFrame) {
		t.Errorf("huge frame: %v, want errBadFrame", err)
	}
	// No magic at all: Start reports the end of the stream.
	s = newSessionReader(bytes.NewReader([]byte("no session here")))
	if err := s.Start(); err != io.EOF {
		t.Errorf("Start without a magic: %v, want EOF", err)
	}
}
