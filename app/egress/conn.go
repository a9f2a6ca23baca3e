package egress

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

// deadlineListener makes every accepted connection support deadlines.
// net/http needs them to take a connection over for CONNECT (Hijack
// interrupts its background read with a read deadline), and the
// connections the guest forwards over SSH are channels, which have none:
// such a connection is relayed through a socket pair.
type deadlineListener struct {
	net.Listener
}

func (l deadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if supportsDeadlines(c) {
		return c, nil
	}
	ours, theirs, err := socketPair()
	if err != nil {
		c.Close()
		return nil, err
	}
	go relay(c, theirs)
	return ours, nil
}

// supportsDeadlines reports whether c takes a read deadline (set to zero,
// which changes nothing).
func supportsDeadlines(c net.Conn) bool {
	return c.SetReadDeadline(time.Time{}) == nil
}

// socketPair returns the two ends of a connected unix stream socket pair.
func socketPair() (net.Conn, net.Conn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socket pair: %w", err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "egress-socketpair")
		c, err := net.FileConn(f) // dups fd
		f.Close()
		if err != nil {
			if i == 1 {
				conns[0].Close()
			} else {
				syscall.Close(fds[1])
			}
			return nil, nil, fmt.Errorf("socket pair: %w", err)
		}
		conns[i] = c
	}
	return conns[0], conns[1], nil
}
