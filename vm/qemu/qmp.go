package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
)

// qmp is a minimal QEMU Machine Protocol client: one command in flight at a
// time, events logged. Its read loop runs in the machine's goroutine family.
type qmp struct {
	conn net.Conn
	dec  *json.Decoder
	log  *slog.Logger

	cmdMu  sync.Mutex                               // one command at a time
	resp   chan qmpMessage                          // replies to the command in flight
	closed chan struct{}                            // closed when the read loop ends
	err    error                                    // why the read loop ended; set before closed
	events func(event string, data json.RawMessage) // called from the read loop
}

type qmpMessage struct {
	Greeting *json.RawMessage `json:"QMP,omitempty"`
	Return   *json.RawMessage `json:"return,omitempty"`
	Error    *qmpError        `json:"error,omitempty"`
	Event    string           `json:"event,omitempty"`
	Data     json.RawMessage  `json:"data,omitempty"`
}

type qmpError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *qmpError) Error() string { return e.Class + ": " + e.Desc }

// dialQMP connects to the QMP socket at path, reads the greeting and
// leaves capabilities negotiation mode. The socket is listening before
// QEMU starts, so the greeting is the signal that QEMU is up.
func dialQMP(ctx context.Context, path string, log *slog.Logger) (*qmp, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("connect qmp: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	q := &qmp{conn: conn, dec: json.NewDecoder(bufio.NewReader(conn)), log: log,
		resp: make(chan qmpMessage, 1), closed: make(chan struct{})}
	var greeting qmpMessage
	if err := q.dec.Decode(&greeting); err != nil || greeting.Greeting == nil {
		conn.Close()
		if err == nil {
			err = errors.New("no greeting")
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("qmp greeting: %w", err)
	}
	if _, err := fmt.Fprintf(conn, `{"execute":"qmp_capabilities"}`+"\n"); err != nil {
		conn.Close()
		return nil, fmt.Errorf("qmp capabilities: %w", err)
	}
	for {
		var m qmpMessage
		if err := q.dec.Decode(&m); err != nil {
			conn.Close()
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return nil, fmt.Errorf("qmp capabilities: %w", err)
		}
		if m.Error != nil {
			conn.Close()
			return nil, fmt.Errorf("qmp capabilities: %w", m.Error)
		}
		if m.Return != nil {
			return q, nil
		}
	}
}

// readLoop delivers replies and events until the connection ends.
func (q *qmp) readLoop() {
	defer close(q.closed)
	for {
		var m qmpMessage
		if err := q.dec.Decode(&m); err != nil {
			q.err = err
			return
		}
		switch {
		case m.Event != "":
			q.log.Debug("qmp event", "event", m.Event)
			if q.events != nil {
				q.events(m.Event, m.Data)
			}
		case m.Return != nil || m.Error != nil:
			select {
			case q.resp <- m:
			default:
				q.log.Debug("qmp reply nobody waits for")
			}
		}
	}
}

// execute runs one command without arguments and waits for its reply.
func (q *qmp) execute(ctx context.Context, command string) error {
	return q.call(ctx, command, nil, nil)
}

// call runs command with arguments args (nil for none), waits for its
// reply and decodes the reply's return value into ret (nil ignores it).
func (q *qmp) call(ctx context.Context, command string, args, ret any) error {
	q.cmdMu.Lock()
	defer q.cmdMu.Unlock()
	select {
	case <-q.closed:
		return fmt.Errorf("qmp %s: connection closed", command)
	default:
	}
	select { // a late reply to a command whose caller gave up
	case <-q.resp:
	default:
	}
	req := map[string]any{"execute": command}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("qmp %s: %w", command, err)
	}
	if _, err := q.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("qmp %s: %w", command, err)
	}
	select {
	case m := <-q.resp:
		if m.Error != nil {
			return fmt.Errorf("qmp %s: %w", command, m.Error)
		}
		if ret != nil && m.Return != nil {
			if err := json.Unmarshal(*m.Return, ret); err != nil {
				return fmt.Errorf("qmp %s: reply: %w", command, err)
			}
		}
		return nil
	case <-q.closed:
		return fmt.Errorf("qmp %s: connection closed", command)
	case <-ctx.Done():
		return fmt.Errorf("qmp %s: %w", command, ctx.Err())
	}
}
