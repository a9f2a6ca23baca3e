// Package ctxio owns io helpers that stop when a context ends: Reader,
// which ends a long copy at the next read after its context is done.
//
// It uses the standard library only, so any package may import it (sync/
// and review/ included); it must not import anything of Airlock's.
package ctxio

import (
	"context"
	"io"
)

// Reader returns a reader of r that fails with ctx's error once ctx ends,
// checked before each read, so io.Copy from it stops within one buffer.
// It hides any io.WriterTo of r, so copies go through its Read.
func Reader(ctx context.Context, r io.Reader) io.Reader {
	return reader{ctx, r}
}

type reader struct {
	ctx context.Context
	r   io.Reader
}

func (c reader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
