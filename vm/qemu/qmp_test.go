package qemu

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/vm"
)

// fakeQMP is a QMP server on a unix socket that answers each command with
// what its handler says: a reply and the events to send around it.
type fakeQMP struct {
	t      *testing.T
	handle func(command string, args json.RawMessage) fakeReply

	mu       sync.Mutex
	commands []string // in the order received
	conn     net.Conn
}

// fakeReply is the server's answer to one command: events sent before the
// reply, the reply (an error when errClass is set) and events sent after.
type fakeReply struct {
	before, after []string // each "NAME" or "NAME {data}"
	ret           string   // JSON; "{}" when empty
	errClass      string
	hangUp        bool // close the connection after the events after
	// stream is written to the migration's file after the events, which
	// endStream then closes, as QEMU does when done with a migration.
	stream    string
	endStream bool
}

// startFakeQMP serves one QMP connection and returns a client connected
// to it, its read loop running.
func startFakeQMP(t *testing.T, handle func(command string, args json.RawMessage) fakeReply) (*fakeQMP, *qmp) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qmp.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeQMP{t: t, handle: handle}
	served := make(chan struct{})
	go func() {
		defer close(served)
		defer l.Close()
		conn, err := l.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conn = conn
		f.mu.Unlock()
		f.serve(conn)
	}()
	q, err := dialQMP(t.Context(), path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	go q.readLoop()
	t.Cleanup(func() {
		q.conn.Close()
		<-q.closed
		f.hangUp()
		<-served
	})
	return f, q
}

func (f *fakeQMP) hangUp() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		f.conn.Close()
	}
}

func (f *fakeQMP) received() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.commands)
}

func (f *fakeQMP) serve(conn net.Conn) {
	defer conn.Close()
	fds := map[string]*os.File{} // getfd's files, by name
	defer func() {
		for _, fd := range fds {
			fd.Close()
		}
	}()
	var passed []*os.File // files that came with the last read
	w := bufio.NewWriter(conn)
	send := func(s string) {
		w.WriteString(s + "\n")
		w.Flush()
	}
	send(`{"QMP": {"version": {}, "capabilities": []}}`)
	var pending []byte
	buf, oob := make([]byte, 4096), make([]byte, 128)
	for {
		line, rest, ok := bytes.Cut(pending, []byte("\n"))
		if !ok {
			n, oobn, _, _, err := conn.(*net.UnixConn).ReadMsgUnix(buf, oob)
			if err != nil {
				return
			}
			pending = append(pending, buf[:n]...)
			msgs, _ := syscall.ParseSocketControlMessage(oob[:oobn])
			for _, m := range msgs {
				rights, _ := syscall.ParseUnixRights(&m)
				for _, fd := range rights {
					passed = append(passed, os.NewFile(uintptr(fd), "passed"))
				}
			}
			continue
		}
		pending = rest
		var req struct {
			Execute   string          `json:"execute"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(line, &req); err != nil {
			f.t.Errorf("fake qmp: %s: %v", line, err)
			return
		}
		if req.Execute == "qmp_capabilities" {
			send(`{"return": {}}`)
			continue
		}
		f.mu.Lock()
		f.commands = append(f.commands, req.Execute)
		f.mu.Unlock()
		var args struct {
			FDName string `json:"fdname"`
			URI    string `json:"uri"`
		}
		json.Unmarshal(req.Arguments, &args)
		switch req.Execute {
		case "getfd":
			if len(passed) != 1 {
				f.t.Errorf("getfd came with %d files, want 1", len(passed))
				return
			}
			fds[args.FDName], passed = passed[0], nil
		case "closefd":
			if fd := fds[args.FDName]; fd != nil {
				fd.Close()
				delete(fds, args.FDName)
			}
		}
		r := f.handle(req.Execute, req.Arguments)
		event := func(e string) {
			name, data, _ := strings.Cut(e, " ")
			if data == "" {
				data = "{}"
			}
			send(fmt.Sprintf(`{"event": %q, "data": %s, "timestamp": {"seconds": 1, "microseconds": 2}}`, name, data))
		}
		for _, e := range r.before {
			event(e)
		}
		switch {
		case r.errClass != "":
			send(fmt.Sprintf(`{"error": {"class": %q, "desc": "%s refused"}}`, r.errClass, req.Execute))
		default:
			ret := r.ret
			if ret == "" {
				ret = "{}"
			}
			send(`{"return": ` + ret + `}`)
		}
		for _, e := range r.after {
			event(e)
		}
		// Like QEMU, write the stream of an fd: migration and close
		// the file once the migration ended.
		if name, ok := strings.CutPrefix(args.URI, "fd:"); ok && r.errClass == "" {
			if fd := fds[name]; fd != nil {
				delete(fds, name)
				fds["migration"] = fd
			}
		}
		if fd := fds["migration"]; fd != nil && (r.stream != "" || r.endStream) {
			if _, err := fd.WriteString(r.stream); err != nil {
				f.t.Errorf("fake qmp: write the migration stream: %v", err)
			}
			if r.endStream {
				fd.Close()
				delete(fds, "migration")
			}
		}
		if r.hangUp {
			return
		}
	}
}

// migration is a MIGRATION event with status s.
func migration(s string) string { return `MIGRATION {"status": "` + s + `"}` }

// checkEventsCapability fails the test unless args turn on the events
// migration capability and x-ignore-shared, the one that keeps shared RAM
// out of the stream (both sides must set it alike).
func checkEventsCapability(t *testing.T, args json.RawMessage) {
	var a struct {
		Capabilities []struct {
			Capability string `json:"capability"`
			State      bool   `json:"state"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(args, &a); err != nil || len(a.Capabilities) != 2 ||
		a.Capabilities[0].Capability != "events" || !a.Capabilities[0].State ||
		a.Capabilities[1].Capability != "x-ignore-shared" || !a.Capabilities[1].State {
		t.Errorf("migrate-set-capabilities %s, want events and x-ignore-shared on", args)
	}
}

// stateStream is a migration stream larger than a pipe's buffer: a reader
// that stopped at the MIGRATION event would cut it short.
var stateStream = strings.Repeat("QEVM state ", 100_000)

func TestMigrateWaitsForEventsAndStream(t *testing.T) {
	setup := []string{"getfd", "migrate-set-capabilities", "migrate"}
	tests := []struct {
		name       string
		migrate    fakeReply
		query      string // query-migrate's reply
		wantErr    string // "" for success
		wantCalls  []string
		wantStream string
	}{{
		name: "completed",
		migrate: fakeReply{before: []string{migration("setup")}, after: []string{"STOP", migration("active"), migration("completed")},
			stream: stateStream, endStream: true},
		wantCalls:  setup,
		wantStream: stateStream,
	}, {
		name: "completed before the reply",
		migrate: fakeReply{before: []string{migration("setup"), migration("active"), migration("completed")},
			stream: stateStream, endStream: true},
		wantCalls:  setup,
		wantStream: stateStream,
	}, {
		name:      "failed",
		migrate:   fakeReply{after: []string{migration("active"), migration("failed")}, stream: "QEVM", endStream: true},
		query:     `{"status": "failed", "error-desc": "Unable to write to file: No space left on device"}`,
		wantErr:   "migration failed: Unable to write to file: No space left on device",
		wantCalls: append(setup, "query-migrate"),
	}, {
		name:      "failed without a reason",
		migrate:   fakeReply{after: []string{migration("failed")}, endStream: true},
		query:     `{"status": "failed"}`,
		wantErr:   "migration failed: QEMU gave no reason",
		wantCalls: append(setup, "query-migrate"),
	}, {
		name:      "cancelled",
		migrate:   fakeReply{after: []string{migration("cancelling"), migration("cancelled")}, endStream: true},
		query:     `{"status": "cancelled"}`,
		wantErr:   "migration cancelled: QEMU gave no reason",
		wantCalls: append(setup, "query-migrate"),
	}, {
		name:      "refused",
		migrate:   fakeReply{errClass: "GenericError"},
		wantErr:   "qmp migrate: GenericError: migrate refused",
		wantCalls: append(setup, "closefd"),
	}, {
		name:      "qemu gone",
		migrate:   fakeReply{after: []string{migration("active")}, hangUp: true},
		wantErr:   "connection closed",
		wantCalls: setup,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, q := startFakeQMP(t, func(command string, args json.RawMessage) fakeReply {
				switch command {
				case "migrate-set-capabilities":
					checkEventsCapability(t, args)
					return fakeReply{}
				case "migrate":
					if got, want := string(args), `{"uri":"fd:`+saveFD+`"}`; got != want {
						t.Errorf("migrate %s, want %s", got, want)
					}
					return tt.migrate
				case "query-migrate":
					return fakeReply{ret: tt.query}
				}
				return fakeReply{}
			})
			var state bytes.Buffer
			err := migrate(t.Context(), q, &state)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("migrate: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("migrate: %v, want an error with %q", err, tt.wantErr)
			}
			if got := f.received(); !slices.Equal(got, tt.wantCalls) {
				t.Errorf("commands %q, want %q", got, tt.wantCalls)
			}
			if tt.wantStream != "" && state.String() != tt.wantStream {
				t.Errorf("saved %d bytes, want the %d of the stream", state.Len(), len(tt.wantStream))
			}
		})
	}
}

func TestMigrateCancelledByContext(t *testing.T) {
	started := make(chan struct{})
	f, q := startFakeQMP(t, func(command string, args json.RawMessage) fakeReply {
		switch command {
		case "migrate":
			close(started)
			return fakeReply{after: []string{migration("setup"), migration("active")}, stream: "QEVM"}
		case "migrate_cancel":
			return fakeReply{after: []string{migration("cancelling"), migration("cancelled")}, endStream: true}
		}
		return fakeReply{}
	})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-started
		cancel()
	}()
	err := migrate(ctx, q, io.Discard)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("migrate: %v, want context.Canceled", err)
	}
	want := []string{"getfd", "migrate-set-capabilities", "migrate", "migrate_cancel", "closefd"}
	if got := f.received(); !slices.Equal(got, want) {
		t.Errorf("commands %q, want %q", got, want)
	}
}

func TestSubscriptionKeepsOrderAndNames(t *testing.T) {
	_, q := startFakeQMP(t, func(command string, args json.RawMessage) fakeReply {
		return fakeReply{before: []string{"STOP", migration("setup")}, after: []string{"RESUME", migration("active"), migration("completed")}}
	})
	sub := q.subscribe("MIGRATION", "RESUME")
	defer q.unsubscribe(sub)
	other := q.subscribe("SHUTDOWN")
	if err := q.execute(t.Context(), "anything"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 4 {
		e, err := sub.next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Name+" "+string(e.Data))
	}
	want := []string{migration("setup"), "RESUME {}", migration("active"), migration("completed")}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	q.unsubscribe(other)
	other.mu.Lock()
	n := len(other.queue)
	other.mu.Unlock()
	if n != 0 {
		t.Errorf("%d events queued for a subscription to other names", n)
	}
	// Once the connection is gone, next says so instead of waiting.
	q.conn.Close()
	if _, err := sub.next(t.Context()); !errors.Is(err, errQMPClosed) {
		t.Errorf("next after close: %v, want errQMPClosed", err)
	}
}

// incomingMachine is a machine waiting for a saved state, over q.
func incomingMachine(q *qmp) *machine {
	return &machine{name: "test", qmp: q, state: vm.StateStarting, incoming: true,
		log: slog.New(slog.DiscardHandler), done: make(chan struct{})}
}

// savedState is a state file for load, handed to QEMU as a descriptor.
func savedState(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(p, []byte("QEVM"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadWaitsForEvents(t *testing.T) {
	tests := []struct {
		name      string
		incoming  fakeReply
		status    string // query-status's status
		wantErr   string
		wantCalls []string
	}{{
		name:      "saved paused",
		incoming:  fakeReply{after: []string{migration("active"), migration("completed")}},
		status:    "paused",
		wantCalls: []string{"migrate-set-capabilities", "getfd", "migrate-incoming", "query-status", "cont"},
	}, {
		name:      "saved running",
		incoming:  fakeReply{after: []string{migration("active"), "RESUME", migration("completed")}},
		status:    "running",
		wantCalls: []string{"migrate-set-capabilities", "getfd", "migrate-incoming", "query-status"},
	}, {
		name:      "load failed",
		incoming:  fakeReply{after: []string{migration("active"), migration("failed")}},
		wantErr:   "loading the saved state: migration failed",
		wantCalls: []string{"migrate-set-capabilities", "getfd", "migrate-incoming"},
	}, {
		name:      "qemu exits",
		incoming:  fakeReply{after: []string{migration("active")}, hangUp: true},
		wantErr:   "qemu ended while loading the saved state",
		wantCalls: []string{"migrate-set-capabilities", "getfd", "migrate-incoming"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, q := startFakeQMP(t, func(command string, args json.RawMessage) fakeReply {
				switch command {
				case "migrate-set-capabilities":
					checkEventsCapability(t, args)
				case "migrate-incoming":
					return tt.incoming
				case "query-status":
					return fakeReply{ret: `{"status": "` + tt.status + `", "running": false}`}
				}
				return fakeReply{}
			})
			m := incomingMachine(q)
			err := m.load(t.Context(), savedState(t))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				if s := m.State(); s != vm.StateRunning {
					t.Errorf("state %s after the load, want running", s)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("load: %v, want an error with %q", err, tt.wantErr)
			}
			if got := f.received(); !slices.Equal(got, tt.wantCalls) {
				t.Errorf("commands %q, want %q", got, tt.wantCalls)
			}
		})
	}
}

func TestLoadCancelled(t *testing.T) {
	started := make(chan struct{})
	_, q := startFakeQMP(t, func(command string, args json.RawMessage) fakeReply {
		if command == "migrate-incoming" {
			close(started)
			return fakeReply{after: []string{migration("active")}}
		}
		return fakeReply{}
	})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-started
		cancel()
	}()
	if err := incomingMachine(q).load(ctx, savedState(t)); !errors.Is(err, context.Canceled) {
		t.Fatalf("load: %v, want context.Canceled", err)
	}
}
