package agent

import (
	"net"
	"os"
	"time"
)

// FileConn adapts a pair of files (a character device opened read-write is
// passed as both, or stdin and stdout) to a net.Conn, so ServeConn can
// serve a link that is not a socket. Deadlines work when the files are
// pollable; otherwise setting one fails and the connection is bounded by
// its context alone. Close closes both files.
func FileConn(name string, r, w *os.File) net.Conn {
	return &fileConn{r: r, w: w, addr: fileAddr(name)}
}

type fileConn struct {
	r, w *os.File
	addr fileAddr
}

var _ net.Conn = (*fileConn)(nil)

func (c *fileConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *fileConn) Write(b []byte) (int, error) { return c.w.Write(b) }
func (c *fileConn) LocalAddr() net.Addr         { return c.addr }
func (c *fileConn) RemoteAddr() net.Addr        { return c.addr }

func (c *fileConn) Close() error {
	err := c.r.Close()
	if c.w != c.r {
		if werr := c.w.Close(); err == nil {
			err = werr
		}
	}
	return err
}

func (c *fileConn) SetDeadline(t time.Time) error {
	if err := c.r.SetReadDeadline(t); err != nil {
		return err
	}
	return c.w.SetWriteDeadline(t)
}

func (c *fileConn) SetReadDeadline(t time.Time) error  { return c.r.SetReadDeadline(t) }
func (c *fileConn) SetWriteDeadline(t time.Time) error { return c.w.SetWriteDeadline(t) }

type fileAddr string

func (a fileAddr) Network() string { return "file" }
func (a fileAddr) String() string  { return string(a) }
