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
	sess, err := yamux.Client(raw, muxConfig())
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
