package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"syscall"
)

// qmp is a minimal QEMU Machine Protocol client: one command in flight at a
// time; events go to a callback and to subscriptions. Its read loop runs in
// the machine's goroutine family.
type qmp struct {
	conn net.Conn
	dec  *json.Decoder
	log  *slog.Logger

	cmdMu  sync.Mutex                               // one command at a time
	resp   chan qmpMessage                          // replies to the command in flight
	closed chan struct{}                            // closed when the read loop ends
	err    error                                    // why the read loop ended; set before closed
	events func(event string, data json.RawMessage) // called from the read loop

	subMu sync.Mutex
	subs  map[*subscription]struct{}
}

// qmpEvent is one QMP event: its name and its data member.
type qmpEvent struct {
	Name string
	Data json.RawMessage
}

// subscription queues the events of the names it was made for, in order.
// The read loop never blocks on it: a waiter takes events with next.
type subscription struct {
	q      *qmp
	names  []string
	notify chan struct{} // capacity 1: an event was queued

	mu    sync.Mutex
	queue []qmpEvent
}

// subscribe starts queueing the events named names; a waiter subscribes
// before the command that causes them, so that none is missed. End it
// with unsubscribe.
func (q *qmp) subscribe(names ...string) *subscription {
	s := &subscription{q: q, names: names, notify: make(chan struct{}, 1)}
	q.subMu.Lock()
	if q.subs == nil {
		q.subs = make(map[*subscription]struct{})
	}
	q.subs[s] = struct{}{}
	q.subMu.Unlock()
	return s
}

func (q *qmp) unsubscribe(s *subscription) {
	q.subMu.Lock()
	delete(q.subs, s)
	q.subMu.Unlock()
}

// publish queues e for every subscription to its name.
func (q *qmp) publish(e qmpEvent) {
	q.subMu.Lock()
	defer q.subMu.Unlock()
	for s := range q.subs {
		if !slices.Contains(s.names, e.Name) {
			continue
		}
		s.mu.Lock()
		s.queue = append(s.queue, e)
		s.mu.Unlock()
		select {
		case s.notify <- struct{}{}:
		default:
		}
	}
}

// errQMPClosed says the QMP connection ended: QEMU is gone or going.
var errQMPClosed = errors.New("qmp connection closed")

// next returns the oldest queued event, waiting for one until ctx ends or
// the connection closes (errQMPClosed; events read before are returned
// first).
func (s *subscription) next(ctx context.Context) (qmpEvent, error) {
	for {
		if e, ok := s.pop(); ok {
			return e, nil
		}
		select {
		case <-s.notify:
		case <-s.q.closed:
			if e, ok := s.pop(); ok {
				return e, nil
			}
			return qmpEvent{}, errQMPClosed
		case <-ctx.Done():
			return qmpEvent{}, ctx.Err()
		}
	}
}

func (s *subscription) pop() (qmpEvent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return qmpEvent{}, false
	}
	e := s.queue[0]
	s.queue = s.queue[1:]
	return e, true
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
			q.publish(qmpEvent{Name: m.Event, Data: m.Data})
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
	return q.callFile(ctx, command, args, ret, nil)
}

// callFile is call with the file f (nil for none) passed along the
// command (SCM_RIGHTS), as getfd wants it. QEMU holds its own copy of f.
func (q *qmp) callFile(ctx context.Context, command string, args, ret any, f *os.File) error {
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
	b = append(b, '\n')
	if f == nil {
		_, err = q.conn.Write(b)
	} else if uc, ok := q.conn.(*net.UnixConn); !ok {
		err = errors.New("passing a file needs a unix socket")
	} else {
		_, _, err = uc.WriteMsgUnix(b, syscall.UnixRights(int(f.Fd())), nil)
	}
	if err != nil {
		return fmt.Errorf("qmp %s: %w", command, err)
	}
	var m qmpMessage
	select {
	case m = <-q.resp:
	case <-q.closed:
		// The reply may have come just before the connection ended.
		select {
		case m = <-q.resp:
		default:
			return fmt.Errorf("qmp %s: connection closed", command)
		}
	case <-ctx.Done():
		return fmt.Errorf("qmp %s: %w", command, ctx.Err())
	}
	if m.Error != nil {
		return fmt.Errorf("qmp %s: %w", command, m.Error)
	}
	if ret != nil && m.Return != nil {
		if err := json.Unmarshal(*m.Return, ret); err != nil {
			return fmt.Errorf("qmp %s: reply: %w", command, err)
		}
	}
	return nil
}
