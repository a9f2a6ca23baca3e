package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/airlock-dev/airlock/app/audit"
)

// EventKind names an audit event.
type EventKind string

const (
	EventCreated   EventKind = "created"
	EventExcluded  EventKind = "excluded"  // paths left out of the snapshot, with reasons
	EventSnapshot  EventKind = "snapshot"  // the baseline manifest
	EventLimits    EventKind = "limits"    // the VM's limits and network mode, before boot
	EventBooted    EventKind = "booted"    // the VM answered
	EventStopped   EventKind = "stopped"   // the host stopped the VM itself (hard time limit)
	EventPushed    EventKind = "pushed"    // the baseline is in /workspace
	EventDocker    EventKind = "docker"    // the Docker Engine in the VM answered, before the command
	EventHosts     EventKind = "hosts"     // the /etc/hosts entries written in the VM (runArgs --add-host), before the command
	EventStart     EventKind = "start"     // a start command ran (postStartCommand, postAttachCommand), before the command
	EventServices  EventKind = "services"  // the Compose services started in the VM (which, how long), before the command
	EventCommand   EventKind = "command"   // the command started
	EventExit      EventKind = "exit"      // the command ended
	EventCollected EventKind = "collected" // the changes came back
	EventSkipped   EventKind = "skipped"   // what the guest's walk left out: special files, unreadable, invalid names, files over the size cap (with their size)
	EventDisk      EventKind = "disk"      // the workspace disk's size and the host space it took, before its removal
	EventFailed    EventKind = "failed"
	EventDecisions EventKind = "decisions"
	EventApplied   EventKind = "applied" // with before/after hashes per file
	EventUndone    EventKind = "undone"
	EventRecovered EventKind = "recovered" // an interrupted apply was finished
	EventRemoved   EventKind = "removed"   // in the store's audit log
	EventCapped    EventKind = "capped"    // a log the guest filled (transcript, verify.log) was cut to its cap: bytes seen and kept
	EventSeccomp   EventKind = "seccomp"   // the calls the agent's jail refused it, by syscall (the guest kernel's count)
	EventDiskFull  EventKind = "disk-full" // the sandbox's disk was full when the command ended (its size and what was used)
	EventExec      EventKind = "exec"      // a command ran in the kept VM after the run (an MCP tool call): the command, its exit code
	EventWrite     EventKind = "write"     // a file of /workspace written from the host (an MCP tool call): its path and size
	EventSubmitted EventKind = "submitted" // the work was handed to the user's review (an MCP tool call), with the agent's summary
)

// AuditHeadFile is the signed head of a sandbox's audit log: the last
// line's number and hash (app/audit).
const AuditHeadFile = "audit.head"

// Event is one line of audit.jsonl, less the chain's fields (seq, prev,
// key, sig), which app/audit adds and a reader of events ignores.
type Event struct {
	Time  time.Time `json:"time"`
	Event EventKind `json:"event"`
	// Sandbox is set in the store-wide log only.
	Sandbox string `json:"sandbox,omitempty"`
	// Data carries the event's details; read back it is a
	// map[string]any (or whatever JSON decoding gives).
	Data any `json:"data,omitempty"`
}

// maxAuditLine caps one audit line read back; longer lines are an error.
const maxAuditLine = 64 << 20

// Audit appends one event to the sandbox's audit.jsonl (Time is filled
// in when zero): a line chained to the one before and signed with the
// home's key, written whole under the sandbox's lock and synced, and the
// head (audit.head) rewritten after it (app/audit).
func (sb *Sandbox) Audit(ev Event) error {
	if ev.Time.IsZero() {
		ev.Time = sb.store.now().UTC()
	}
	if err := sb.auditLog().Append(ev); err != nil {
		return fmt.Errorf("audit %s: %w", sb.ID, err)
	}
	return nil
}

// auditLog is the sandbox's chained audit log.
func (sb *Sandbox) auditLog() audit.Log {
	return audit.Log{Name: sb.ID, Path: sb.Path(auditFile), HeadPath: sb.Path(AuditHeadFile), LockPath: sb.Path(lockFile), Keys: sb.store.Keys()}
}

// VerifyAudit checks the sandbox's audit log against its head and the
// home's key; an *audit.Error names the first bad line.
func (sb *Sandbox) VerifyAudit() (audit.Result, error) {
	return sb.auditLog().Check()
}

// AuditRaw returns audit.jsonl as it is on disk.
func (sb *Sandbox) AuditRaw() ([]byte, error) {
	data, err := os.ReadFile(sb.Path(auditFile))
	if err != nil {
		return nil, fmt.Errorf("read audit of %s: %w", sb.ID, err)
	}
	return data, nil
}

// ReadAudit returns the sandbox's audit events in order.
func (sb *Sandbox) ReadAudit() ([]Event, error) {
	data, err := sb.AuditRaw()
	if err != nil {
		return nil, err
	}
	var out []Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxAuditLine)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return out, fmt.Errorf("read audit of %s: line %d: %w", sb.ID, n, err)
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read audit of %s: %w", sb.ID, err)
	}
	return out, nil
}
