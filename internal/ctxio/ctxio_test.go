package ctxio

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReaderReadsUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := Reader(ctx, strings.NewReader("hello, world"))
	buf := make([]byte, 5)
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("Read = %q, %v; want \"hello\", nil", buf[:n], err)
	}
	cancel()
	if n, err := r.Read(buf); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after cancel = %d, %v; want 0, context.Canceled", n, err)
	}
}

func TestReaderWhole(t *testing.T) {
	data := bytes.Repeat([]byte("airlock "), 10000)
	var out bytes.Buffer
	n, err := io.Copy(&out, Reader(context.Background(), bytes.NewReader(data)))
	if err != nil || n != int64(len(data)) || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("io.Copy = %d, %v; want %d bytes, nil", n, err, len(data))
	}
}

// cancelAfter is a reader that ends ctx after its first read.
type cancelAfter struct {
	r      io.Reader
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.cancel()
	return n, err
}

func TestReaderStopsACopy(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	src := &cancelAfter{r: strings.NewReader(strings.Repeat("x", 1<<20)), cancel: cancel}
	// The writer hides io.Discard's ReaderFrom, so the copy uses buf.
	n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, Reader(ctx, src), make([]byte, 1024))
	if !errors.Is(err, context.Canceled) || n != 1024 {
		t.Fatalf("io.CopyBuffer = %d, %v; want 1024, context.Canceled", n, err)
	}
}
