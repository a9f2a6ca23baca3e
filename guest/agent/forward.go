package agent

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/airlock-dev/airlock/guest"
)

// Remote forwarding (RFC 4254 section 7): the host asks the agent to
// listen on a loopback port of the guest, and each connection accepted
// there is carried back to the host as a "forwarded-tcpip" channel. This
// is how the guest reaches the host's egress proxy: the agent never reads
// what flows through, the host decides everything.

// Payloads of the forwarding requests and channels.
type (
	forwardRequest struct {
		Addr string
		Port uint32
	}
	forwardReply   struct{ Port uint32 }
	forwardedTCPIP struct {
		Addr       string
		Port       uint32
		OriginAddr string
		OriginPort uint32
	}
)

// forwards are the listeners one SSH connection asked for, closed when
// the connection ends.
type forwards struct {
	mu sync.Mutex
	l  map[string]net.Listener // by the address as requested, host:port
	// conns are the connections being carried, closed with the SSH
	// connection so that no copy outlives it.
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// loopbackOnly accepts the addresses a host may ask the agent to listen
// on: the guest's loopback, so nothing outside the guest can connect.
func loopbackOnly(addr string) bool {
	return addr == "127.0.0.1" || addr == "localhost"
}

// forward handles a "tcpip-forward" request: it listens on the loopback
// address and serves the listener until the connection ends or the host
// cancels it. It returns the reply payload (the port, when 0 was asked).
func (s *sshServer) forward(payload []byte) ([]byte, error) {
	var r forwardRequest
	if err := ssh.Unmarshal(payload, &r); err != nil {
		return nil, fmt.Errorf("tcpip-forward: %w", err)
	}
	if !loopbackOnly(r.Addr) || r.Port > 65535 {
		return nil, fmt.Errorf("tcpip-forward %s:%d refused: only the guest's loopback may be forwarded", r.Addr, r.Port)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(r.Port))))
	if err != nil {
		return nil, fmt.Errorf("tcpip-forward: %w", err)
	}
	port := uint32(l.Addr().(*net.TCPAddr).Port)
	key := net.JoinHostPort(r.Addr, strconv.Itoa(int(port)))
	s.fwd.mu.Lock()
	if s.fwd.l == nil {
		s.fwd.l = map[string]net.Listener{}
	}
	if _, dup := s.fwd.l[key]; dup {
		s.fwd.mu.Unlock()
		l.Close()
		return nil, fmt.Errorf("tcpip-forward: %s is already forwarded", key)
	}
	s.fwd.l[key] = l
	s.fwd.mu.Unlock()
	if port == guest.ProxyPort {
		s.a.proxyForwards.Add(1)
	}
	s.fwd.wg.Go(func() {
		defer func() {
			if port == guest.ProxyPort {
				s.a.proxyForwards.Add(-1)
			}
		}()
		s.acceptForwarded(l, r.Addr, port)
	})
	s.a.log.Debug("forwarding", "addr", key)
	var reply []byte
	if r.Port == 0 {
		reply = ssh.Marshal(forwardReply{port})
	}
	return reply, nil
}

// cancelForward handles "cancel-tcpip-forward".
func (s *sshServer) cancelForward(payload []byte) error {
	var r forwardRequest
	if err := ssh.Unmarshal(payload, &r); err != nil {
		return fmt.Errorf("cancel-tcpip-forward: %w", err)
	}
	key := net.JoinHostPort(r.Addr, strconv.Itoa(int(r.Port)))
	s.fwd.mu.Lock()
	l, ok := s.fwd.l[key]
	delete(s.fwd.l, key)
	s.fwd.mu.Unlock()
	if !ok {
		return fmt.Errorf("cancel-tcpip-forward: %s is not forwarded", key)
	}
	return l.Close()
}

// closeForwards closes every listener of the connection and waits for
// their connections to end.
func (s *sshServer) closeForwards() {
	s.fwd.mu.Lock()
	for k, l := range s.fwd.l {
		l.Close()
		delete(s.fwd.l, k)
	}
	for c := range s.fwd.conns {
		c.Close()
	}
	s.fwd.mu.Unlock()
	s.fwd.wg.Wait()
}

// acceptForwarded carries each connection accepted on l to the host in
// its own channel, until l is closed.
func (s *sshServer) acceptForwarded(l net.Listener, addr string, port uint32) {
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.a.log.Warn("accept forwarded connection", "err", err)
			}
			return
		}
		s.fwd.mu.Lock()
		if s.fwd.conns == nil {
			s.fwd.conns = map[net.Conn]struct{}{}
		}
		s.fwd.conns[c] = struct{}{}
		s.fwd.mu.Unlock()
		conns.Go(func() {
			defer func() {
				s.fwd.mu.Lock()
				delete(s.fwd.conns, c)
				s.fwd.mu.Unlock()
				c.Close()
			}()
			origin := c.RemoteAddr().(*net.TCPAddr)
			ch, reqs, err := s.conn.OpenChannel("forwarded-tcpip", ssh.Marshal(forwardedTCPIP{
				Addr: addr, Port: port, OriginAddr: origin.IP.String(), OriginPort: uint32(origin.Port),
			}))
			if err != nil {
				s.a.log.Debug("open forwarded-tcpip", "err", err)
				return
			}
			go ssh.DiscardRequests(reqs)
			relay(c.(*net.TCPConn), ch)
		})
	}
}

// relay copies both ways between a guest socket and a channel, passing
// on each side's end of stream, and returns when both are done.
func relay(c *net.TCPConn, ch ssh.Channel) {
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(ch, c)
		_ = ch.CloseWrite()
	})
	_, _ = io.Copy(c, ch)
	_ = c.CloseWrite()
	wg.Wait()
	_ = ch.Close()
}
