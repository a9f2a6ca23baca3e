package sandbox

import (
	"bytes"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sync/objects"
)

// ReadObject returns an object's content whole, in a buffer of its size
// (a changeset keeps every file's), and empty content without the store.
func TestReadObject(t *testing.T) {
	s, err := objects.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 10, 511, 512, 513, 100_000} {
		want := []byte(strings.Repeat("x", n))
		sum, _, err := s.Put(bytes.NewReader(want))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadObject(s, sum)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: read %d bytes, %v", n, len(got), err)
		}
		if cap(got) > n+1 {
			t.Errorf("%d bytes: read into a buffer of %d", n, cap(got))
		}
	}
	got, err := ReadObject(s, emptySum)
	if err != nil || len(got) != 0 || got == nil {
		t.Errorf("empty content: %q, %v", got, err)
	}
	if _, err := ReadObject(s, strings.Repeat("ab", 32)); err == nil {
		t.Error("an object the store lacks was read")
	}
}
