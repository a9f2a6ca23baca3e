package client

import (
	"bytes"
	"io"
	"testing"

	"github.com/airlock-dev/airlock/guest"
)

// FuzzSkipToMagic: whatever the guest sends before its session magic,
// the host skips exactly up to and including the magic, or fails; it never
// reads past it.
func FuzzSkipToMagic(f *testing.F) {
	f.Add([]byte("tail of a saved session"), []byte("frames"))
	f.Add([]byte("\xffAIRLOCK-SESS"), []byte{0, 1, 2})
	f.Add([]byte(""), []byte(""))
	f.Fuzz(func(t *testing.T, before, after []byte) {
		if bytes.Contains(before, []byte(guest.SessionMagic[:1])) {
			// The magic's first byte in the skipped part may start an
			// overlapping match; only check that it returns.
			r := bytes.NewReader(append(append(append([]byte(nil), before...), guest.SessionMagic...), after...))
			if err := skipToMagic(r); err != nil {
				t.Fatalf("magic present, skip failed: %v", err)
			}
			return
		}
		r := bytes.NewReader(append(append(append([]byte(nil), before...), guest.SessionMagic...), after...))
		if err := skipToMagic(r); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(r)
		if !bytes.Equal(rest, after) {
			t.Fatalf("left %q after the magic, want %q", rest, after)
		}
		if err := skipToMagic(bytes.NewReader(before)); err == nil {
			t.Fatal("found a magic that was not there")
		}
	})
}
