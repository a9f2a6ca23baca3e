package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"
)

// guardedDial is the default upstream dialer: names are resolved on the
// host, and a name (not an address the rule spelled out) that resolves to
// the host's own loopback, a link-local address (cloud metadata services
// live there) or the unspecified address is refused, so that an allowed
// wildcard whose DNS an attacker controls cannot reach services of the
// host itself.
func guardedDial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if _, err := netip.ParseAddr(host); err == nil || host == "localhost" {
		return d.DialContext(ctx, network, addr)
	}
	d.ControlContext = func(_ context.Context, _, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		return checkResolved(host, ap.Addr())
	}
	return d.DialContext(ctx, network, addr)
}

// checkResolved refuses the addresses a host name must not lead to.
func checkResolved(host string, ip netip.Addr) error {
	ip = ip.Unmap()
	if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsInterfaceLocalMulticast() {
		return fmt.Errorf("%s resolves to %s, an address of the host itself or link-local; allow the address itself if this is meant", host, ip)
	}
	return nil
}

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
