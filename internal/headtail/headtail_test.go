package headtail

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// want is what a log capped at head and tail bytes holds after all of
// data was written.
func want(data []byte, name string, head, tail int) string {
	if len(data) <= head+tail {
		return string(data)
	}
	nl := ""
	if head > 0 && data[head-1] != '\n' {
		nl = "\n"
	}
	c := New(nil, name, int64(head), int64(tail))
	return string(data[:head]) + nl + strings.TrimPrefix(c.marker(int64(len(data)-head-tail)), "\n") + string(data[len(data)-tail:])
}

func TestWriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ size, head, tail int }{
		{0, 10, 10}, {5, 10, 10}, {20, 10, 10}, {21, 10, 10}, {1000, 10, 10},
		{1000, 0, 10}, {1000, 10, 0}, {1000, 0, 0}, {100000, 100, 3000}, {5000, 1000, 1},
	} {
		for _, chunk := range []int{1, 3, 7, 64, 4096, 1 << 20} {
			t.Run(fmt.Sprintf("%d bytes, head %d, tail %d, chunks of %d", tc.size, tc.head, tc.tail, chunk), func(t *testing.T) {
				data := make([]byte, tc.size)
				for i := range data {
					data[i] = "abcdefghij\n"[rng.IntN(11)]
				}
				var out bytes.Buffer
				w := New(&out, "transcript", int64(tc.head), int64(tc.tail))
				for p := data; len(p) > 0; {
					k := min(len(p), 1+rng.IntN(chunk))
					if n, err := w.Write(p[:k]); n != k || err != nil {
						t.Fatalf("Write = %d, %v; want %d, nil", n, err, k)
					}
					p = p[k:]
				}
				if got := out.Len(); got > tc.head {
					t.Fatalf("before Close the log has %d bytes, more than the head (%d)", got, tc.head)
				}
				st, err := w.Close()
				if err != nil {
					t.Fatal(err)
				}
				if got, want := out.String(), want(data, "transcript", tc.head, tc.tail); got != want {
					t.Errorf("log =\n%q\nwant\n%q", got, want)
				}
				left := max(0, tc.size-tc.head-tc.tail)
				if st.Seen != int64(tc.size) || st.LeftOut != int64(left) || st.Kept != int64(tc.size-left) || st.Capped() != (left > 0) {
					t.Errorf("stats %+v, want %d seen, %d left out", st, tc.size, left)
				}
				// Idempotent, and later writes are counted, not kept.
				w.Write([]byte("late"))
				if st, _ := w.Close(); st.Seen != int64(tc.size)+4 || out.String() != want(data, "transcript", tc.head, tc.tail) {
					t.Errorf("after a late write: %+v, log changed", st)
				}
			})
		}
	}
}

func TestMarker(t *testing.T) {
	var out bytes.Buffer
	w := New(&out, "console log", 4<<20, 4<<20)
	line := bytes.Repeat([]byte("x"), 1<<20-1)
	line = append(line, '\n')
	for range 10 {
		w.Write(line)
	}
	w.Close()
	const m = "\n[airlock: 2097152 bytes of output left out here; the console log keeps the first 4.0 MiB and the last 4.0 MiB]\n"
	if !bytes.Contains(out.Bytes(), []byte(m)) || out.Len() != 8<<20+len(m)-1 {
		t.Errorf("log of %d bytes, want 8 MiB and the marker %q on a line of its own", out.Len(), m)
	}
}

// The ring grows as output comes: a short log costs no more than itself.
func TestTailGrowsAsNeeded(t *testing.T) {
	w := New(&bytes.Buffer{}, "transcript", 10, 32<<20)
	w.Write(make([]byte, 1000))
	if c := cap(w.ring); c > 64<<10 {
		t.Errorf("1000 bytes past the head hold a ring of %d bytes", c)
	}
}
