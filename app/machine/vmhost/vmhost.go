// Package vmhost owns Airlock's VM supervisors: one process per VM
// (`airlock vmhost`, the same binary) that owns the machine (vz in-process
// on macOS, the QEMU child on Linux), boots it or restores it from saved
// state, serves a control socket (state, stop, kill, pause, resume, save,
// wait: one JSON request and one JSON response per connection) and exposes the guest link as a unix socket on
// which every connection is a fresh link stream. The CLI and the GUI are
// clients: a VM outlives the client that started it, and a crash in one VM
// harms no other.
//
// It holds the server (Serve, Supervise), the protocol types, the client
// (Dial), and Backend, a vm.Backend that starts each machine under its own
// supervisor. It must not import a hypervisor package (vm/qemu, vm/vz: the
// backend is handed in), fyne, or the app packages above it (launch,
// sandbox, cli).
package vmhost

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/vm"
)

// Files of a supervisor's run directory (the machine's vm.Spec.StateDir).
const (
	// ControlSocket serves the control protocol.
	ControlSocket = "control.sock"
	// GuestSocket is the guest link: each connection is one link stream.
	GuestSocket = "guest.sock"
	// SpecFile is the machine's vm.Spec as JSON, written by whoever starts
	// the supervisor.
	SpecFile = "vmhost.json"
	// RestoreFile, when present, holds the path of the saved state the
	// supervisor restores its machine from instead of booting it.
	RestoreFile = "vmhost-restore"
	// LogFile receives the supervisor's standard output and error.
	LogFile = "vmhost.log"
)

// ReadyFDEnv names the environment variable that tells a supervisor which
// file descriptor to write "ready" to once its machine runs (Spawn sets it).
const ReadyFDEnv = "AIRLOCK_VMHOST_READY_FD"

// Op is a control operation.
type Op string

const (
	OpState  Op = "state"  // the Status now
	OpStop   Op = "stop"   // ask the guest to power off; forced after Request.TimeoutMS
	OpKill   Op = "kill"   // force the machine off at once
	OpPause  Op = "pause"  // stop the vCPUs (vm.Pauser)
	OpResume Op = "resume" // run them again (vm.Pauser)
	OpSave   Op = "save"   // save the machine's state to Request.Path (vm.Snapshotter)
	OpWait   Op = "wait"   // answered twice: at once, and once the machine is gone, with why (Status.Exit)
)

// Request is one control request. A connection carries one request and
// its response (two for OpWait), each a line of JSON.
type Request struct {
	Op   Op     `json:"op"`
	Path string `json:"path,omitempty"`
	// TimeoutMS bounds the graceful part of a stop; zero means the
	// supervisor's default.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// Response answers a Request: the machine's Status, or an error.
type Response struct {
	Status *Status `json:"status,omitempty"`
	Error  string  `json:"error,omitempty"`
	// Code classifies Error for errors.Is on the client: one of the
	// code* constants.
	Code string `json:"code,omitempty"`
}

// Error codes carried in Response.Code.
const (
	codeNotSupported = "not_supported"
	codeNotRunning   = "not_running"
)

// Status is what a supervisor says about its machine.
type Status struct {
	// Name is the machine's vm.Spec.Name.
	Name    string      `json:"name"`
	Backend string      `json:"backend"`
	State   vm.State    `json:"state"`
	Link    vm.LinkKind `json:"link"`
	Console string      `json:"console"`
	// PID is the supervisor's process ID.
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// Can lists the optional operations the machine supports (pause and
	// resume, save).
	Can []Op `json:"can,omitempty"`
	// Emulated says the guest's CPU is emulated (vm.Emulator).
	Emulated bool `json:"emulated,omitempty"`
	// Confined says how the supervisor and its hypervisor are confined
	// on the host (Landlock on Linux), "" when the backend does not say.
	Confined string `json:"confined,omitempty"`
	// Exit is why the machine ended (wait only; empty after a clean
	// power-off).
	Exit string `json:"exit,omitempty"`
}

// maxSocketPath is the longest unix socket path goos can bind or connect
// to: sun_path is 104 bytes on macOS and the BSDs, 108 on Linux, with the
// terminating NUL.
func maxSocketPath(goos string) int {
	if goos == "linux" {
		return 107
	}
	return 103
}

// socketPath is where the socket name of the supervisor of run directory
// dir lives: in dir when that path fits goos's limit, else in short (a
// per-user directory with a short path) under a name made from a hash of
// dir, so that the server and every client find the same one.
func socketPath(dir, name, goos, short string) string {
	if p := filepath.Join(dir, name); len(p) <= maxSocketPath(goos) {
		return p
	}
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	return filepath.Join(short, hex.EncodeToString(sum[:8])+"-"+name)
}

// Paths are the sockets of the supervisor of a run directory.
type Paths struct {
	Dir     string
	Control string
	Guest   string
}

// PathsOf returns the socket paths of the supervisor of run directory dir
// on this host.
func PathsOf(dir string) Paths {
	dir, _ = filepath.Abs(dir)
	short := shortDir()
	return Paths{
		Dir:     dir,
		Control: socketPath(dir, ControlSocket, runtime.GOOS, short),
		Guest:   socketPath(dir, GuestSocket, runtime.GOOS, short),
	}
}

// shortDir is the per-user directory for sockets whose run directory has
// too long a path: $XDG_RUNTIME_DIR/airlock where there is one, else
// airlock-UID in the temporary directory.
func shortDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && runtime.GOOS == "linux" {
		return filepath.Join(d, "airlock")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("airlock-%d", os.Getuid()))
}

// ensureShortDir creates the directory of a socket outside the run
// directory, refusing one that another user owns or could write to.
func ensureShortDir(p Paths) error {
	for _, s := range []string{p.Control, p.Guest} {
		d := filepath.Dir(s)
		if d == p.Dir {
			continue
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create socket directory: %w", err)
		}
		if err := checkPrivateDir(d); err != nil {
			return err
		}
	}
	return nil
}

// checkPrivateDir makes sure d is a real directory of ours that nobody
// else can write to.
func checkPrivateDir(d string) error {
	fi, err := os.Lstat(d)
	if err != nil {
		return fmt.Errorf("check socket directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("socket directory %s is not a private directory of this user (mode %s); remove it", d, fi.Mode())
	}
	return nil
}
