package egress

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// chunked reads its data in the sizes given, in turn.
type chunked struct {
	data  []byte
	sizes []int
	i     int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(c.sizes) > 0 {
		n = max(1, c.sizes[c.i%len(c.sizes)])
		c.i++
	}
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// scanAll runs data through a scanner for secrets, read in chunks of the
// given sizes, and returns what it passed on and the secret it found.
func scanAll(t *testing.T, data []byte, sizes []int, secrets ...*Secret) ([]byte, *Secret) {
	t.Helper()
	s := newPlaceholderScanner(io.NopCloser(&chunked{data: data, sizes: sizes}), secrets)
	out, err := io.ReadAll(s)
	if s.Found() == nil && err != nil {
		t.Fatalf("scan: %v", err)
	}
	if s.Found() != nil && err == nil {
		t.Fatal("scan found a placeholder but the read did not fail")
	}
	return out, s.Found()
}

func TestPlaceholderScanner(t *testing.T) {
	a := &Secret{Name: "A", Placeholder: PlaceholderPrefix + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}
	b := &Secret{Name: "B", Placeholder: PlaceholderPrefix + "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*scanBuffer/16)
	tests := []struct {
		name string
		data []byte
		want *Secret
	}{
		{"clean", big, nil},
		{"at start", []byte(a.Placeholder + "tail"), a},
		{"at end", append(append([]byte{}, big...), b.Placeholder...), b},
		{"across a buffer", append(append(append([]byte{}, big[:scanBuffer-10]...), a.Placeholder...), big...), a},
		{"almost", []byte(a.Placeholder[:len(a.Placeholder)-1] + "!" + a.Placeholder[:len(a.Placeholder)-1]), nil},
		{"empty", nil, nil},
	}
	for _, tt := range tests {
		for _, sizes := range [][]int{nil, {7}, {4096}, {scanBuffer + 100}, {1, 1000, 3}} {
			out, found := scanAll(t, tt.data, sizes, a, b)
			if found != tt.want {
				t.Errorf("%s, reads of %v: found %v, want %v", tt.name, sizes, found, tt.want)
			}
			if tt.want == nil && !bytes.Equal(out, tt.data) {
				t.Errorf("%s, reads of %v: passed on %d bytes unlike the %d read", tt.name, sizes, len(out), len(tt.data))
			}
			if tt.want != nil && bytes.Contains(out, []byte(PlaceholderPrefix)) {
				t.Errorf("%s, reads of %v: part of the placeholder was passed on", tt.name, sizes)
			}
		}
	}
	// The reader's own error is passed on once the bytes before it are.
	s := newPlaceholderScanner(io.NopCloser(iotest.TimeoutReader(strings.NewReader(strings.Repeat("x", 100)))), []*Secret{a})
	if out, err := io.ReadAll(s); err != iotest.ErrTimeout || len(out) != 100 {
		t.Errorf("read error: %d bytes, %v", len(out), err)
	}
	if newPlaceholderScanner(io.NopCloser(strings.NewReader("")), nil) != nil {
		t.Error("a scanner with nothing to look for")
	}
}

// FuzzPlaceholderScanner: whatever the body and however it arrives, the
// scanner finds a placeholder exactly when the body holds one, never
// passes any of its bytes on from the start of the placeholder, and
// otherwise passes the body on unchanged.
func FuzzPlaceholderScanner(f *testing.F) {
	ph := PlaceholderPrefix + "0123456789abcdef0123456789abcdef"
	f.Add([]byte("hello"), uint16(3), uint8(7))
	f.Add([]byte(ph), uint16(0), uint8(1))
	f.Add([]byte("xx"+ph[:30]+"yy"+ph), uint16(1), uint8(5))
	f.Add(bytes.Repeat([]byte{'a'}, 40000), uint16(20000), uint8(200))
	f.Fuzz(func(t *testing.T, data []byte, at uint16, size uint8) {
		if int(at) <= len(data) && at%3 == 0 {
			data = append(append(append([]byte{}, data[:at]...), ph...), data[at:]...)
		}
		sec := &Secret{Name: "K", Placeholder: ph}
		out, found := scanAll(t, data, []int{int(size), int(size)*3 + 1}, sec)
		i := bytes.Index(data, []byte(ph))
		if (found != nil) != (i >= 0) {
			t.Fatalf("found %v, body holds it at %d", found, i)
		}
		if found == nil && !bytes.Equal(out, data) {
			t.Fatal("a clean body changed")
		}
		if found != nil && len(out) > i {
			t.Fatalf("passed on %d bytes, the placeholder starts at %d", len(out), i)
		}
	})
}
