// Package sandbox is the sandbox store: the records under
// $AIRLOCK_HOME/sandboxes/<id>/ (sandbox.json written atomically, an
// append-only audit.jsonl, locks, short IDs with prefix matching, the
// baseline and guest manifests, the transcript, the agent's summary and
// final message, the verify log, a kept VM's checkpoint records), the
// review kept with a sandbox (review.json), and review on a stored
// sandbox: changeset, apply, undo, recover, staleness, compare, a reply
// round's prompt and what each round changed; and what promotion did (the
// stage, Promotion): the promotion itself, with the host's git, is
// app/promote's. app/pipeline runs sandboxes and records them here; the
// CLI and the GUI render both.
//
// It must not import vm, guest, app/machine/launch, app/machine/vmhost, app/pipeline,
// app/promote, app/cli, app/gui or fyne: a stored sandbox needs no VM,
// and promotion builds on the store, not the store on it.
package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/app/audit"
	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/internal/filelock"
	"github.com/airlock-dev/airlock/sync/objects"
)

// NetworkMode is a sandbox's network mode as recorded in sandbox.json.
type NetworkMode string

const (
	// NetworkNone: no network device (the default).
	NetworkNone NetworkMode = "none"
	// NetworkOpen: an unprotected NAT network device (--open-network).
	NetworkOpen NetworkMode = "open"
)

// Open reports whether the network was open (unprotected).
func (n NetworkMode) Open() bool { return n == NetworkOpen }

// Errors callers branch on.
var (
	// ErrNotFound means no sandbox has the ID or prefix asked for.
	ErrNotFound = errors.New("no such sandbox")
	// ErrRunning means the sandbox's run is still going (another process
	// holds it).
	ErrRunning = errors.New("sandbox is running")
)

// AmbiguousError is a prefix that matches several sandboxes.
type AmbiguousError struct {
	Prefix  string
	Matches []string
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%q matches several sandboxes (%s): give more of the ID", e.Prefix, strings.Join(e.Matches, ", "))
}

// Status is where a sandbox stands.
type Status string

const (
	StatusCreated    Status = "created"
	StatusSnapshot   Status = "snapshotting"
	StatusBooting    Status = "booting"
	StatusPushing    Status = "pushing"
	StatusRunning    Status = "running"
	StatusCollecting Status = "collecting"
	StatusReady      Status = "ready for review"
	StatusApplied    Status = "applied"
	StatusFailed     Status = "failed"
)

// Active reports whether a run is (or should be) under way in this
// status: from created to collecting. Ready, applied, failed and any
// status this version does not know are not active.
func (s Status) Active() bool {
	switch s {
	case StatusCreated, StatusSnapshot, StatusBooting, StatusPushing, StatusRunning, StatusCollecting:
		return true
	}
	return false
}

// MetaFile is the name of a sandbox's description in its directory,
// replaced atomically (by rename) on every change.
const MetaFile = "sandbox.json"

// Files in a sandbox directory.
const (
	metaFile       = MetaFile
	auditFile      = "audit.jsonl"
	lockFile       = "lock"     // held briefly around every update
	runLockFile    = "run.lock" // held by the process running the sandbox
	BaselineFile   = "baseline.json"
	GuestFile      = "guest.json"
	TranscriptFile = "transcript.log"
	SummaryFile    = "summary.md"
	FinalFile      = "final.md" // the agent's final message, from its output
	ScriptFile     = "script"
	appliesDir     = "applies"
)

// Origin is what started a sandbox when a person did not.
type Origin struct {
	// MCP is the MCP tool call that made it (sandbox_open).
	MCP string `json:"mcp,omitempty"`
	// Parent is the sandbox it was forked from, and Approach the name of
	// the approach it runs, for a sandbox forked by an agent's tool.
	Parent   string `json:"parent,omitempty"`
	Approach string `json:"approach,omitempty"`
	// Submitted says the MCP client handed the sandbox to the user's
	// review (sandbox_submit): its tools reach it no more.
	Submitted bool `json:"submitted,omitempty"`
}

// Meta is sandbox.json.
type Meta struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Project is the absolute path of the real project.
	Project string `json:"project"`
	Image   string `json:"image"`
	Arch    string `json:"arch"`
	// Docker says a Docker Engine was started in the VM before the
	// command; a reply round starts it again.
	Docker bool `json:"docker,omitempty"`
	// Start and Hosts are the environment's start commands and
	// /etc/hosts entries, run and written before the command of every
	// round (a reply round too).
	Start []StartStep `json:"start,omitempty"`
	Hosts []HostEntry `json:"hosts,omitempty"`
	// Services are the Compose services started in the VM before the
	// command; a reply round starts them again.
	Services *Services `json:"services,omitempty"`
	// CacheFrom is the sandbox whose run left the project's dependency
	// caches this run started with (its verify passed): what it put there
	// could sway this run's result. Empty for a run that started with none.
	CacheFrom string   `json:"cache_from,omitempty"`
	Command   []string `json:"command"`
	// Script is the SHA-256 of the script run with --script, if any, and
	// ScriptName its file name; a copy is kept in the sandbox directory.
	Script     string `json:"script_sha256,omitempty"`
	ScriptName string `json:"script_name,omitempty"`
	Status     Status `json:"status"`
	// Error says why a failed sandbox failed.
	Error string `json:"error,omitempty"`
	// SyncMode is how the project reached the VM: SyncCopy or SyncVirtiofs.
	SyncMode SyncMode `json:"sync_mode"`
	// Network is NetworkOpen when the VM had an unprotected network
	// device; NetworkNone (or empty, in older sandboxes) when it had none.
	Network NetworkMode `json:"network,omitempty"`
	// Limits are the limits the VM ran with, when they were recorded.
	Limits *config.Limits `json:"limits,omitempty"`
	// Baseline names the file holding the baseline manifest (in the
	// sandbox directory); BaselineSHA256 is its hash.
	Baseline       string `json:"baseline,omitempty"`
	BaselineSHA256 string `json:"baseline_sha256,omitempty"`
	// BaselineTime is when the project was snapshotted for the baseline
	// (Staleness compares the project with it later).
	BaselineTime time.Time `json:"baseline_time,omitzero"`
	// BaselineCommit is the commit the project's git repository had
	// checked out (HEAD) when the baseline was taken: a branch made from
	// the sandbox (apply --branch) starts there. Empty when the project
	// was not a repository, and in sandboxes from before it was kept.
	BaselineCommit string `json:"baseline_commit,omitempty"`
	// Stage is how far the changes have climbed: sandbox, applied,
	// committed, pushed. It is worked out from Status and Promotion
	// whenever sandbox.json is read (see stageOf).
	Stage Stage `json:"stage,omitempty"`
	// Promotion is the commit made of the sandbox's changes and where it
	// was pushed, once one was (apply --commit or --branch, push).
	Promotion *Promotion `json:"promotion,omitempty"`
	// Group names the fan-out this sandbox is one attempt of (Attempt
	// counts from 1); empty for a single run.
	Group   string `json:"group,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Agent is the agent preset the run used ("" for a plain command).
	Agent string `json:"agent,omitempty"`
	// Origin says what started the sandbox when a person did not (an MCP
	// tool call); nil for a person's run.
	Origin *Origin `json:"origin,omitempty"`
	// Prompt is the task the user gave the run (the agent's prompt, or
	// $AIRLOCK_PROMPT of a command), as typed; lists show its first line.
	Prompt string `json:"prompt,omitempty"`
	// Stopped marks a failed run that was stopped (Stop in the app,
	// Ctrl-C in a terminal) rather than one that went wrong.
	Stopped bool `json:"stopped,omitempty"`
	// Secrets are the project paths the snapshot left out because they
	// look like secrets (a folder ends in /): never copied, and named to
	// the user.
	Secrets []string `json:"secrets,omitempty"`
	// Round counts the agent's rounds on this sandbox: 1 for the run,
	// one more per reply (0 in sandboxes from before replies means 1).
	Round int `json:"round,omitempty"`
	// Verify is the verify step's result, once it ran.
	Verify *VerifyResult `json:"verify,omitempty"`
	// DiskFull says the sandbox's disk (its quota) was full when the
	// command ended: what the command wrote past it failed in the VM.
	DiskFull *DiskUsage `json:"disk_full,omitempty"`
	// Guest names the file holding the manifest of /workspace after the
	// run, once collected.
	Guest string `json:"guest,omitempty"`
	// ExitCode is the command's, once it ran (128+N for signal N).
	ExitCode *int `json:"exit_code,omitempty"`
	// Excluded counts the project paths left out of the snapshot.
	Excluded int `json:"excluded"`
	// Changes summarises the collected changeset.
	Changes *ChangeStats `json:"changes,omitempty"`
	Timings Timings      `json:"timings"`
}

// ChangeStats counts a changeset by kind and lines.
type ChangeStats struct {
	Files        int `json:"files"`
	Added        int `json:"added"`
	Modified     int `json:"modified"`
	Deleted      int `json:"deleted"`
	Renamed      int `json:"renamed"`
	ModeChanged  int `json:"mode_changed"`
	TypeChanged  int `json:"type_changed"`
	LinesAdded   int `json:"lines_added"`
	LinesRemoved int `json:"lines_removed"`
	// Overview says what the changes mean in one line
	// (review.Changeset.Overview), shown safely already.
	Overview string `json:"overview,omitempty"`
}

// Timings of each step, in milliseconds.
type Timings struct {
	SnapshotMS int64 `json:"snapshot_ms,omitempty"`
	BootMS     int64 `json:"boot_ms,omitempty"`
	PushMS     int64 `json:"push_ms,omitempty"`
	RunMS      int64 `json:"run_ms,omitempty"`
	CollectMS  int64 `json:"collect_ms,omitempty"`
	TotalMS    int64 `json:"total_ms,omitempty"`
}

// Store is the sandboxes/ directory of an Airlock home, with the shared
// content store. Its methods are safe for concurrent use by several
// processes: each sandbox has a lock file.
type Store struct {
	// HostExec, if set, returns the user's patterns of files that run on
	// their machine (config.toml's [review] host_exec), added to the
	// built-in list whenever a changeset is built; its error stops that
	// build, so that a broken config never drops a pattern silently. Set
	// it after Open, before use. Nil: the built-in list alone.
	HostExec func() ([]string, error)
	// MergeTool, if set, returns the user's merge tool, config.toml's
	// [review] merge_tool split into words (placeholders left in them;
	// nil when none is set), read each time promote.MergeTool runs one.
	// Nil: none.
	MergeTool func() ([]string, error)

	home    home.Layout
	objects *objects.Store
	now     func() time.Time
}

// Open opens (creating if needed) the sandbox store of an Airlock home.
// The home and its folders are made private to the user (0700), and an
// older home that others could read is tightened (home.Make).
func Open(h string) (*Store, error) {
	if err := home.Make(h); err != nil {
		return nil, fmt.Errorf("open sandbox store: %w", err)
	}
	l := home.Layout{Root: h}
	dir := l.Sandboxes()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open sandbox store: %w", err)
	}
	objs, err := objects.Open(l.Objects())
	if err != nil {
		return nil, err
	}
	return &Store{home: l, objects: objs, now: time.Now}, nil
}

// Dir is the sandboxes/ directory.
func (s *Store) Dir() string { return s.home.Sandboxes() }

// Now is the store's clock (tests set it).
func (s *Store) Now() time.Time { return s.now() }

// Objects is the content store that holds baselines and pulled files.
func (s *Store) Objects() *objects.Store { return s.objects }

// idLen is the number of hex digits of a sandbox ID: short enough to type,
// and any unique prefix works.
const idLen = 8

// NewID is a new random sandbox (or fan-out group) ID.
func NewID() (string, error) {
	var b [idLen / 2]byte
	if _, err := io.ReadFull(rand.Reader, b[:]); err != nil {
		return "", fmt.Errorf("new sandbox id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// ValidID reports whether s is shaped like a sandbox ID (and so safe as a
// path element, or on a terminal).
func ValidID(s string) bool {
	if len(s) != idLen {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Create makes a new sandbox from m (its ID, Created, Updated and Status
// are filled in) and records "created" in its audit log.
func (s *Store) Create(m Meta) (*Sandbox, error) {
	for range 10 {
		id, err := NewID()
		if err != nil {
			return nil, err
		}
		dir := s.home.Sandbox(id)
		if err := os.Mkdir(dir, 0o700); errors.Is(err, fs.ErrExist) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("create sandbox: %w", err)
		}
		sb := &Sandbox{ID: id, Dir: dir, store: s}
		m.ID, m.Created, m.Updated = id, s.now().UTC(), s.now().UTC()
		if m.Status == "" {
			m.Status = StatusCreated
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, metaFile), mustJSON(m), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("create sandbox: %w", err)
		}
		data := map[string]any{
			"project": m.Project, "image": m.Image, "arch": m.Arch, "command": m.Command, "script_name": m.ScriptName, "sync_mode": m.SyncMode,
		}
		if m.Origin != nil {
			data["origin"] = m.Origin
		}
		if err := sb.Audit(Event{Event: EventCreated, Data: data}); err != nil {
			return nil, err
		}
		return sb, nil
	}
	return nil, errors.New("create sandbox: could not find a free id")
}

// IDs lists every sandbox ID, sorted.
func (s *Store) IDs() ([]string, error) {
	des, err := os.ReadDir(s.Dir())
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	var ids []string
	for _, de := range des {
		if de.IsDir() && ValidID(de.Name()) {
			ids = append(ids, de.Name())
		}
	}
	return ids, nil
}

// Resolve turns an ID or a unique prefix of one into the ID.
func (s *Store) Resolve(prefix string) (string, error) {
	prefix = strings.ToLower(strings.TrimSpace(prefix))
	if prefix == "" {
		return "", fmt.Errorf("%w: no ID given (airlock ls lists them)", ErrNotFound)
	}
	ids, err := s.IDs()
	if err != nil {
		return "", err
	}
	var matches []string
	for _, id := range ids {
		if id == prefix {
			return id, nil
		}
		if strings.HasPrefix(id, prefix) {
			matches = append(matches, id)
		}
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("%w %q (airlock ls lists them)", ErrNotFound, prefix)
	case 1:
		return matches[0], nil
	}
	return "", &AmbiguousError{Prefix: prefix, Matches: matches}
}

// Get opens the sandbox with this ID or unique ID prefix.
func (s *Store) Get(idOrPrefix string) (*Sandbox, error) {
	id, err := s.Resolve(idOrPrefix)
	if err != nil {
		return nil, err
	}
	return &Sandbox{ID: id, Dir: s.home.Sandbox(id), store: s}, nil
}

// CommandLine is the command for people: a shell line as typed (the
// app runs what is typed as sh -c LINE), else the argv quoted as a shell
// would need it, after "sh SCRIPT" when a script was run.
func (m Meta) CommandLine() string {
	if m.ScriptName == "" && len(m.Command) == 3 && m.Command[0] == "sh" && m.Command[1] == "-c" {
		return m.Command[2]
	}
	return m.CommandArgv()
}

// CommandArgv is the command exactly, its argv quoted as a shell would
// need it (sh -c kept), after "sh SCRIPT" when a script was run: for
// records, such as a commit's trailer.
func (m Meta) CommandArgv() string {
	args := m.Command
	if m.ScriptName != "" {
		args = append([]string{"sh", m.ScriptName}, args...)
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// shellQuote quotes a for a POSIX shell when it needs it.
func shellQuote(a string) string {
	if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}

// StatusText is the status for people: "stopped" for a run that was
// stopped (older sandboxes say so in their error), else the status.
func (m Meta) StatusText() string {
	if m.Status == StatusFailed && (m.Stopped || strings.HasPrefix(m.Error, "interrupted: ")) {
		return "stopped"
	}
	return string(m.Status)
}

// Info is a sandbox as listed: its metadata and whether a process is
// running it right now.
type Info struct {
	Meta
	// Live is true while a process runs the sandbox.
	Live bool `json:"live"`
}

// List returns every sandbox, newest first. A sandbox whose sandbox.json
// cannot be read is listed with StatusFailed and the reason.
func (s *Store) List() ([]Info, error) {
	ids, err := s.IDs()
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(ids))
	for _, id := range ids {
		sb := &Sandbox{ID: id, Dir: s.home.Sandbox(id), store: s}
		m, err := sb.Meta()
		if err != nil {
			m = Meta{ID: id, Status: StatusFailed, Error: err.Error()}
		}
		out = append(out, Info{Meta: m, Live: sb.Live()})
	}
	slices.SortStableFunc(out, func(a, b Info) int { return b.Created.Compare(a.Created) })
	return out, nil
}

// Remove deletes a sandbox's directory. A sandbox that a process is still
// running is refused with ErrRunning unless force is set. The removal is
// recorded in the store's own audit log (sandboxes/audit.jsonl), since the
// sandbox's goes with it. The content store keeps the objects.
func (s *Store) Remove(id string, force bool) error {
	sb, err := s.Get(id)
	if err != nil {
		return err
	}
	if !force && sb.Live() {
		return fmt.Errorf("remove %s: %w", sb.ID, ErrRunning)
	}
	m, _ := sb.Meta()
	if err := os.RemoveAll(sb.Dir); err != nil {
		return fmt.Errorf("remove %s: %w", sb.ID, err)
	}
	return s.auditLog().Append(Event{
		Time: s.now().UTC(), Event: EventRemoved, Sandbox: sb.ID,
		Data: map[string]any{"project": m.Project, "status": m.Status, "forced": force},
	})
}

// StoreLog is the name the store's own audit log is signed under.
const StoreLog = "store"

// auditLog is the store's own audit log: sandboxes/audit.jsonl, chained
// like a sandbox's.
func (s *Store) auditLog() audit.Log {
	return audit.Log{Name: StoreLog, Path: filepath.Join(s.Dir(), auditFile), HeadPath: filepath.Join(s.Dir(), AuditHeadFile), LockPath: filepath.Join(s.Dir(), ".audit.lock"), Keys: s.Keys()}
}

// VerifyAudit checks the store's own audit log (removals).
func (s *Store) VerifyAudit() (audit.Result, error) { return s.auditLog().Check() }

// Keys is the key that signs the home's audit logs (AuditKeys).
func (s *Store) Keys() audit.Keys { return AuditKeys(s.home) }

// AuditKeyEnv chooses where a Mac keeps a home's audit key: "file" keeps
// it in the home (the only place on other systems), anything else the
// login Keychain.
const AuditKeyEnv = "AIRLOCK_AUDIT_KEY"

// AuditKeys is where the key that signs home l's audit logs is kept: on
// macOS the login Keychain, one item per home (audit.KeychainKeys), so
// that a copy of the home has its logs without the key that could
// re-sign them; elsewhere, with $AIRLOCK_AUDIT_KEY=file, or for a home
// that already has a key file (it goes on signing with that key), the
// file keys/audit.key.
func AuditKeys(l home.Layout) audit.Keys {
	file := audit.FileKeys{Path: l.AuditKey()}
	if runtime.GOOS != "darwin" || os.Getenv(AuditKeyEnv) == "file" {
		return file
	}
	if _, err := os.Lstat(file.Path); err == nil {
		return file
	}
	root, err := filepath.Abs(l.Root)
	if err != nil {
		root = l.Root
	}
	return audit.KeychainKeys{Account: root}
}

// DiskUsage is a guest file system's size and what was used of it, in
// bytes, as the guest said, and the directory asked about.
type DiskUsage struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	Used int64  `json:"used"`
}

// Sandbox is one sandbox directory.
type Sandbox struct {
	ID    string
	Dir   string
	store *Store
}

// Store is the store the sandbox is in.
func (sb *Sandbox) Store() *Store { return sb.store }

// Path returns the path of a file in the sandbox directory.
func (sb *Sandbox) Path(name string) string { return filepath.Join(sb.Dir, name) }

// Meta reads sandbox.json.
func (sb *Sandbox) Meta() (Meta, error) {
	var m Meta
	data, err := os.ReadFile(sb.Path(metaFile))
	if err != nil {
		return m, fmt.Errorf("read sandbox %s: %w", sb.ID, err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("read sandbox %s: %w", sb.ID, err)
	}
	m.Stage = m.stageOf()
	return m, nil
}

// Update changes sandbox.json under the sandbox's lock: it reads the
// current metadata, calls change, and writes the result atomically.
func (sb *Sandbox) Update(change func(*Meta)) (Meta, error) {
	unlock, err := filelock.Lock(sb.Path(lockFile))
	if err != nil {
		return Meta{}, fmt.Errorf("update sandbox %s: %w", sb.ID, err)
	}
	defer unlock()
	m, err := sb.Meta()
	if err != nil {
		return m, err
	}
	change(&m)
	m.Stage = m.stageOf()
	m.Updated = sb.store.now().UTC()
	if err := atomicfile.WriteFile(sb.Path(metaFile), mustJSON(m), 0o600); err != nil {
		return m, fmt.Errorf("update sandbox %s: %w", sb.ID, err)
	}
	return m, nil
}

// Live reports whether a process is running this sandbox now: it holds
// run.lock for as long as its run lasts, and the kernel releases the lock
// when that process dies, so a crashed run does not look live.
func (sb *Sandbox) Live() bool {
	f, err := os.OpenFile(sb.Path(runLockFile), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// Hold takes run.lock for the lifetime of a run (Live reports it); the
// returned function releases it. A held sandbox is refused ErrRunning.
func (sb *Sandbox) Hold() (func(), error) {
	f, err := os.OpenFile(sb.Path(runLockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock sandbox %s: %w", sb.ID, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock sandbox %s: %w", sb.ID, ErrRunning)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err) // only our own plain types are encoded
	}
	return append(b, '\n')
}
