package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/airlock-dev/airlock/guest"
)

// Mux turns a single-stream link (a virtio-serial port) into one that can be
// dialled many times: it dials the raw stream once, runs a yamux session
// over it, and hands out one stream per Dial, which is what the guest agent
// expects on such a link (see guest.SerialPortName). Without it a closed
// connection's tail and the next connection's hello would share one byte
// stream with nothing to tell them apart.
type Mux struct {
	dial DialFunc

	mu   sync.Mutex
	sess *yamux.Session
}

// NewMux returns a Mux over the raw stream dial opens. It dials nothing yet.
func NewMux(dial DialFunc) *Mux { return &Mux{dial: dial} }

// Dial opens a new link connection: a stream of the session, which is
// started (or restarted, after the raw stream broke) as needed.
func (m *Mux) Dial(ctx context.Context) (net.Conn, error) {
	sess, err := m.session(ctx)
	if err != nil {
		return nil, err
	}
	s, err := sess.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("open link stream: %w", err)
	}
	return s, nil
}

func (m *Mux) session(ctx context.Context) (*yamux.Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sess != nil && !m.sess.IsClosed() {
		return m.sess, nil
	}
	raw, err := m.dial(ctx)
	if err != nil {
		return nil, err
	}
	// The magic starts a fresh session in the agent, even one that still
	// serves a session of a machine that was saved (a restore, a
	// rollback); the agent's answer marks where its frames begin.
	if _, err := raw.Write([]byte(guest.SessionMagic)); err != nil {
		raw.Close()
		return nil, fmt.Errorf("start link session: %w", err)
	}
	sess, err := yamux.Client(&sessionConn{Conn: raw}, muxConfig())
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("start link session: %w", err)
	}
	m.sess = sess
	return sess, nil
}

// Close ends the session and every stream of it. It is idempotent.
func (m *Mux) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sess == nil {
		return nil
	}
	err := m.sess.Close()
	m.sess = nil
	if errors.Is(err, yamux.ErrSessionShutdown) {
		err = nil
	}
	return err
}

// muxConfig is the yamux configuration of the host's end of a serial link.
func muxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	// The link is local and the guest may still be booting, slowly under
	// TCG: no keepalive pings, and a stream waits for the guest's ack as
	// long as its caller's context allows (Connect bounds it).
	c.EnableKeepAlive = false
	c.StreamOpenTimeout = 0
	c.ConnectionWriteTimeout = 30 * time.Second
	c.MaxStreamWindowSize = 4 << 20
	c.LogOutput = io.Discard
	return c
}

// maxSessionSkip bounds what the host skips before the agent's session
// magic: the tail of a saved session is small; more is a broken guest.
const maxSessionSkip = 16 << 20

// sessionConn is the raw link of one session: its first Read skips
// everything up to and including the agent's guest.SessionMagic, one byte
// at a time so that nothing after it is taken from yamux.
type sessionConn struct {
	net.Conn
	started bool
}

func (c *sessionConn) Read(b []byte) (int, error) {
	if !c.started {
		if err := skipToMagic(c.Conn); err != nil {
			return 0, err
		}
		c.started = true
	}
	return c.Conn.Read(b)
}

// skipToMagic reads r up to and including guest.SessionMagic.
func skipToMagic(r io.Reader) error {
	magic := []byte(guest.SessionMagic)
	var c [1]byte
	matched := 0
	for n := 0; matched < len(magic); n++ {
		if n > maxSessionSkip {
			return fmt.Errorf("link session: no session magic from the guest in its first %d bytes", maxSessionSkip)
		}
		if _, err := io.ReadFull(r, c[:]); err != nil {
			return err
		}
		switch {
		case c[0] == magic[matched]:
			matched++
		case c[0] == magic[0]:
			matched = 1
		default:
			matched = 0
		}
	}
	return nil
}
