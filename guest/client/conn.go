package client

import (
	"net"
	"sync"
)

// maxBuffered bounds what a bufferedConn holds before Write blocks.
const maxBuffered = 4 << 20

// bufferedConn gives an unbuffered connection (net.Pipe) a write buffer.
// SSH needs one: during key exchange both peers write before they read,
// which over net.Pipe waits for a reader forever. Real links (vsock, unix,
// TCP, virtio-serial) have kernel buffers and are used as they are.
type bufferedConn struct {
	net.Conn
	mu   sync.Mutex
	cond *sync.Cond
	buf  []byte
	err  error // sticky: the first write error, or net.ErrClosed
}

// withWriteBuffer returns conn, given a write buffer when it is one end of
// a net.Pipe.
func withWriteBuffer(conn net.Conn) net.Conn {
	if conn.LocalAddr().Network() != "pipe" {
		return conn
	}
	b := &bufferedConn{Conn: conn}
	b.cond = sync.NewCond(&b.mu)
	go b.flush()
	return b
}

func (b *bufferedConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.buf) >= maxBuffered && b.err == nil {
		b.cond.Wait()
	}
	if b.err != nil {
		return 0, b.err
	}
	b.buf = append(b.buf, p...)
	b.cond.Broadcast()
	return len(p), nil
}

// flush writes the buffer to the connection until it fails or is closed.
func (b *bufferedConn) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for len(b.buf) == 0 && b.err == nil {
			b.cond.Wait()
		}
		if b.err != nil {
			return
		}
		out := b.buf
		b.buf = nil
		b.mu.Unlock()
		_, err := b.Conn.Write(out)
		b.mu.Lock()
		if err != nil && b.err == nil {
			b.err = err
		}
		b.cond.Broadcast()
	}
}

func (b *bufferedConn) Close() error {
	err := b.Conn.Close()
	b.mu.Lock()
	if b.err == nil {
		b.err = net.ErrClosed
	}
	b.cond.Broadcast()
	b.mu.Unlock()
	return err
}
