package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/atomicfile"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mkSandbox makes a sandbox with a chosen ID.
func mkSandbox(t *testing.T, s *Store, id string) *Sandbox {
	t.Helper()
	dir := filepath.Join(s.Dir(), id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, metaFile), mustJSON(Meta{ID: id, Status: StatusReady, Created: time.Now()}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &Sandbox{ID: id, Dir: dir, store: s}
}

func TestCreate(t *testing.T) {
	s := newStore(t)
	sb, err := s.Create(Meta{Project: "/p", Command: []string{"true"}, Image: "minimal", Arch: "amd64", SyncMode: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	if !ValidID(sb.ID) {
		t.Errorf("ID %q is not %d hex digits", sb.ID, idLen)
	}
	m, err := sb.Meta()
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != sb.ID || m.Status != StatusCreated || m.Project != "/p" || m.Created.IsZero() {
		t.Errorf("meta %+v", m)
	}
	evs, err := sb.ReadAudit()
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Event != EventCreated || evs[0].Time.IsZero() {
		t.Errorf("audit after create: %+v", evs)
	}
	// Updates are atomic: no temporary file is left beside sandbox.json.
	if _, err := sb.Update(func(m *Meta) { m.Status = StatusRunning }); err != nil {
		t.Fatal(err)
	}
	des, _ := os.ReadDir(sb.Dir)
	for _, de := range des {
		if strings.Contains(de.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", de.Name())
		}
	}
	if m, _ := sb.Meta(); m.Status != StatusRunning || !m.Updated.After(m.Created) && !m.Updated.Equal(m.Created) {
		t.Errorf("after update: %+v", m)
	}
}

func TestResolve(t *testing.T) {
	s := newStore(t)
	for _, id := range []string{"ab12cd34", "ab12ff00", "0f0f0f0f"} {
		mkSandbox(t, s, id)
	}
	// Not sandboxes: ignored.
	os.Mkdir(filepath.Join(s.Dir(), "notanid"), 0o700)
	os.WriteFile(filepath.Join(s.Dir(), auditFile), nil, 0o600)
	tests := []struct {
		in      string
		want    string
		wantErr error
		ambig   bool
	}{
		{in: "ab12cd34", want: "ab12cd34"},
		{in: "ab12c", want: "ab12cd34"},
		{in: "AB12F", want: "ab12ff00"},
		{in: "0", want: "0f0f0f0f"},
		{in: "ab12", ambig: true},
		{in: "a", ambig: true},
		{in: "ff", wantErr: ErrNotFound},
		{in: "", wantErr: ErrNotFound},
		{in: "notanid", wantErr: ErrNotFound},
		{in: "../etc", wantErr: ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := s.Resolve(tt.in)
			var ae *AmbiguousError
			switch {
			case tt.ambig:
				if !errors.As(err, &ae) || len(ae.Matches) < 2 {
					t.Errorf("Resolve(%q) = %q, %v; want an AmbiguousError", tt.in, got, err)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("Resolve(%q) = %q, %v; want %v", tt.in, got, err, tt.wantErr)
				}
			case err != nil || got != tt.want:
				t.Errorf("Resolve(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestAuditAppendOnly(t *testing.T) {
	s := newStore(t)
	sb := mkSandbox(t, s, "00000001")
	var prev []byte
	for i := range 5 {
		if err := sb.Audit(Event{Event: EventCommand, Data: map[string]any{"i": i, "text": "line\nbreak"}}); err != nil {
			t.Fatal(err)
		}
		raw, err := sb.AuditRaw()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(raw, prev) {
			t.Fatalf("append %d rewrote earlier lines:\nbefore %q\nafter  %q", i, prev, raw)
		}
		if n := bytes.Count(raw, []byte("\n")); n != i+1 {
			t.Fatalf("after %d appends the log has %d lines", i+1, n)
		}
		prev = raw
	}
	evs, err := sb.ReadAudit()
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		m := ev.Data.(map[string]any)
		if m["i"] != float64(i) || m["text"] != "line\nbreak" {
			t.Errorf("event %d read back as %+v", i, m)
		}
	}
}

func TestConcurrentAuditAndUpdate(t *testing.T) {
	s := newStore(t)
	sb := mkSandbox(t, s, "00000002")
	const workers, each = 8, 40
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker opens the sandbox on its own, as separate
			// commands would.
			other, err := s.Get(sb.ID)
			if err != nil {
				t.Error(err)
				return
			}
			for i := range each {
				if err := other.Audit(Event{Event: EventCommand, Data: map[string]any{"w": w, "i": i, "pad": strings.Repeat("x", 2000)}}); err != nil {
					t.Error(err)
				}
				if _, err := other.Update(func(m *Meta) { m.Excluded++ }); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	raw, _ := sb.AuditRaw()
	lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	if len(lines) != workers*each {
		t.Fatalf("%d lines, want %d", len(lines), workers*each)
	}
	for i, l := range lines {
		var ev Event
		if err := json.Unmarshal(l, &ev); err != nil {
			t.Fatalf("line %d is not one whole JSON object: %v", i+1, err)
		}
	}
	if m, _ := sb.Meta(); m.Excluded != workers*each {
		t.Errorf("concurrent updates lost some: counter %d, want %d", m.Excluded, workers*each)
	}
}

func TestRemoveRefusesLive(t *testing.T) {
	s := newStore(t)
	sb := mkSandbox(t, s, "00000003")
	if sb.Live() {
		t.Fatal("a sandbox nobody runs is live")
	}
	release, err := sb.Hold()
	if err != nil {
		t.Fatal(err)
	}
	if !sb.Live() {
		t.Fatal("a held sandbox is not live")
	}
	if _, err := sb.Hold(); !errors.Is(err, ErrRunning) {
		t.Errorf("second hold: %v, want ErrRunning", err)
	}
	if err := s.Remove("0000", false); !errors.Is(err, ErrRunning) {
		t.Errorf("Remove of a live sandbox: %v, want ErrRunning", err)
	}
	release()
	if sb.Live() {
		t.Error("released sandbox still live")
	}
	if err := s.Remove("00000003", false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sb.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sandbox directory still there: %v", err)
	}
	raw, _ := os.ReadFile(filepath.Join(s.Dir(), auditFile))
	if !bytes.Contains(raw, []byte(`"event":"removed"`)) || !bytes.Contains(raw, []byte(`"sandbox":"00000003"`)) {
		t.Errorf("store audit log: %s", raw)
	}
	if ids, _ := s.IDs(); len(ids) != 0 {
		t.Errorf("IDs after remove: %v", ids)
	}
}

func TestListNewestFirst(t *testing.T) {
	s := newStore(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, id := range []string{"aaaaaaaa", "bbbbbbbb", "cccccccc"} {
		s.now = func() time.Time { return t0.Add(time.Duration(i) * time.Hour) }
		sb, err := s.Create(Meta{Project: id})
		if err != nil {
			t.Fatal(err)
		}
		_ = sb
	}
	mkBroken := filepath.Join(s.Dir(), "dddddddd")
	os.Mkdir(mkBroken, 0o700)
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range list {
		got = append(got, in.Project+"/"+string(in.Status))
	}
	want := "cccccccc/created bbbbbbbb/created aaaaaaaa/created /failed"
	if strings.Join(got, " ") != want {
		t.Errorf("List = %v, want %s", got, want)
	}
}

func TestStatusActive(t *testing.T) {
	for _, tc := range []struct {
		s    Status
		want bool
	}{
		{StatusCreated, true},
		{StatusSnapshot, true},
		{StatusBooting, true},
		{StatusPushing, true},
		{StatusRunning, true},
		{StatusCollecting, true},
		{StatusReady, false},
		{StatusApplied, false},
		{StatusFailed, false},
		{"", false},
		{"from a later version", false},
	} {
		t.Run(string(tc.s), func(t *testing.T) {
			if got := tc.s.Active(); got != tc.want {
				t.Errorf("Status(%q).Active() = %v, want %v", tc.s, got, tc.want)
			}
		})
	}
}

func TestStatusTextStopped(t *testing.T) {
	for _, c := range []struct {
		m    Meta
		want string
	}{
		{Meta{Status: StatusFailed, Error: "boot: no kvm"}, "failed"},
		{Meta{Status: StatusFailed, Stopped: true, Error: "interrupted: context canceled"}, "stopped"},
		{Meta{Status: StatusFailed, Error: "interrupted: context canceled"}, "stopped"}, // before Stopped
		{Meta{Status: StatusReady}, "ready for review"},
	} {
		if got := c.m.StatusText(); got != c.want {
			t.Errorf("StatusText of %+v = %q, want %q", c.m, got, c.want)
		}
	}
}

func TestParseSyncMode(t *testing.T) {
	for in, want := range map[string]SyncMode{"copy": SyncCopy, "disk": SyncDisk, "virtiofs": SyncVirtiofs} {
		if got, err := ParseSyncMode(in); err != nil || got != want {
			t.Errorf("ParseSyncMode(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "9p"} {
		if _, err := ParseSyncMode(in); err == nil || !strings.Contains(err.Error(), "copy, disk or virtiofs") {
			t.Errorf("ParseSyncMode(%q): %v", in, err)
		}
	}
}

// TestCommandLine: a command is shown as a person would type it: the
// app's shell line as typed (never "sh -c sh -c …"), an argv quoted
// where a shell needs it, a script after "sh".
func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		m    Meta
		want string
	}{
		{Meta{Command: []string{"sh", "-c", "sh -c 'make test'"}}, "sh -c 'make test'"},
		{Meta{Command: []string{"go", "test", "./..."}}, "go test ./..."},
		{Meta{Command: []string{"echo", "two words", "it's", ""}}, `echo 'two words' 'it'\''s' ''`},
		{Meta{Command: []string{"--fast"}, ScriptName: "fix.sh"}, "sh fix.sh --fast"},
		{Meta{Command: []string{"sh", "-c", "x"}, ScriptName: "a b.sh"}, "sh 'a b.sh' sh -c x"},
	} {
		if got := tc.m.CommandLine(); got != tc.want {
			t.Errorf("%q (script %q): %q, want %q", tc.m.Command, tc.m.ScriptName, got, tc.want)
		}
	}
	if got := (Meta{Command: []string{"sh", "-c", "make it"}}).CommandArgv(); got != "sh -c 'make it'" {
		t.Errorf("the exact argv: %q", got)
	}
}
