package qemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/vm"
)

// KVMFacts are what the host says about KVM, gathered by reading files
// (see hostKVMFacts) or written out by tests.
type KVMFacts struct {
	// GuestArch and HostArch: KVM runs only guests of the host's arch.
	GuestArch, HostArch vm.Arch
	// DevErr is why /dev/kvm cannot be opened read-write; nil means it can.
	DevErr error
	// Modules are the KVM drivers loaded (/sys/module/kvm_*): kvm_intel,
	// kvm_amd, kvm_pvm, …
	Modules []string
	// Probe is the verdict of a probe boot; nil when none has run.
	Probe *ProbeResult
}

// ProbeResult is the verdict of a KVM probe boot: the real guest kernel
// booted under KVM with airlock.probe on its command line, whose guest
// agent prints ProbeMarker and powers off.
type ProbeResult struct {
	OK  bool   `json:"ok"`
	Why string `json:"why,omitempty"` // why not, for people
}

// ProbeMarker is what the guest agent prints on the console when booted
// with ProbeCmdline on its command line, before powering off.
const (
	ProbeMarker  = "AIRLOCK_PROBE_OK"
	ProbeCmdline = "airlock.probe"
)

// Choice is an accelerator decision.
type Choice struct {
	Accel Accel
	Why   string // for people: "kvm_intel driver", "forced by config", …
	// NeedProbe says the answer depends on a probe boot: run one, put its
	// result in KVMFacts.Probe and choose again.
	NeedProbe bool
}

// trustedKVM are drivers stock kernels run well on.
var trustedKVM = []string{"kvm_intel", "kvm_amd"}

// ChooseAccel decides between KVM and TCG. It is pure: the facts come in,
// a Choice goes out. override (Config.Accel) wins when set.
func ChooseAccel(override Accel, f KVMFacts) Choice {
	switch override {
	case KVM:
		return Choice{Accel: KVM, Why: "forced by configuration"}
	case TCG:
		return Choice{Accel: TCG, Why: "forced by configuration"}
	}
	if f.GuestArch != f.HostArch {
		return Choice{Accel: TCG, Why: fmt.Sprintf("%s guests on %s hosts can only be emulated", f.GuestArch, f.HostArch)}
	}
	if f.DevErr != nil {
		return Choice{Accel: TCG, Why: fmt.Sprintf("/dev/kvm: %v", unwrapPath(f.DevErr))}
	}
	for _, m := range f.Modules {
		if slices.Contains(trustedKVM, m) {
			return Choice{Accel: KVM, Why: m + " driver"}
		}
	}
	// arm64 KVM is built into the kernel, with no vendor module to name.
	if f.HostArch == vm.ARM64 {
		return Choice{Accel: KVM, Why: "/dev/kvm usable"}
	}
	driver := "an unknown driver"
	if len(f.Modules) > 0 {
		driver = strings.Join(f.Modules, ", ") + " driver"
	}
	if f.Probe == nil {
		return Choice{Accel: TCG, Why: driver, NeedProbe: true}
	}
	if f.Probe.OK {
		return Choice{Accel: KVM, Why: driver + ", probe boot passed"}
	}
	why := driver + ", probe boot failed"
	if f.Probe.Why != "" {
		why += ": " + f.Probe.Why
	}
	return Choice{Accel: TCG, Why: why}
}

// TCGNotice is the one line people see when a machine runs under TCG.
func TCGNotice(c Choice) string {
	return fmt.Sprintf("KVM is not usable here (%s); running under TCG, about 10x slower", c.Why)
}

// unwrapPath drops the "open /dev/kvm:" prefix of a *fs.PathError.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// hostKVMFacts reads the KVM facts of this host under root ("/" normally).
func hostKVMFacts(root string, guest, host vm.Arch) KVMFacts {
	f := KVMFacts{GuestArch: guest, HostArch: host}
	dev, err := os.OpenFile(filepath.Join(root, "dev/kvm"), os.O_RDWR, 0)
	if err != nil {
		f.DevErr = err
	} else {
		dev.Close()
	}
	mods, _ := filepath.Glob(filepath.Join(root, "sys/module/kvm_*"))
	for _, m := range mods {
		f.Modules = append(f.Modules, filepath.Base(m))
	}
	return f
}

// hostVsock says whether /dev/vhost-vsock under root can be opened.
func hostVsock(root string) bool {
	f, err := os.OpenFile(filepath.Join(root, "dev/vhost-vsock"), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// probeCacheKey identifies the circumstances a probe verdict holds for.
type probeCacheKey struct {
	QEMU          string  `json:"qemu"`         // qemu --version first line
	HostKernel    string  `json:"host_kernel"`  // uname -r
	Kernel        string  `json:"kernel"`       // guest kernel path
	KernelSize    int64   `json:"kernel_size"`  // …its size
	KernelModTime int64   `json:"kernel_mtime"` // …and mtime, unix nanoseconds
	Initrd        string  `json:"initrd"`       // guest initrd path
	InitrdSize    int64   `json:"initrd_size"`  // …
	InitrdModTime int64   `json:"initrd_mtime"` // …
	Arch          vm.Arch `json:"arch"`
}

func (k probeCacheKey) file() string {
	b, _ := json.Marshal(k)
	sum := sha256.Sum256(b)
	return "kvm-probe-" + hex.EncodeToString(sum[:8]) + ".json"
}

type probeRecord struct {
	Key    probeCacheKey `json:"key"`
	Result ProbeResult   `json:"result"`
	When   time.Time     `json:"when"`
}

// loadProbe returns the cached verdict for key in dir, if any.
func loadProbe(dir string, key probeCacheKey) (ProbeResult, bool) {
	if dir == "" {
		return ProbeResult{}, false
	}
	r, ok := readProbeRecord(filepath.Join(dir, key.file()))
	if !ok || r.Key != key {
		return ProbeResult{}, false
	}
	return r.Result, true
}

func readProbeRecord(path string) (probeRecord, bool) {
	var r probeRecord
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &r) != nil {
		return probeRecord{}, false
	}
	return r, true
}

// saveProbe caches a verdict, atomically.
func saveProbe(dir string, key probeCacheKey, res ProbeResult, now time.Time) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save kvm probe verdict: %w", err)
	}
	b, err := json.MarshalIndent(probeRecord{Key: key, Result: res, When: now}, "", "  ")
	if err != nil {
		return fmt.Errorf("save kvm probe verdict: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, key.file()), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save kvm probe verdict: %w", err)
	}
	return nil
}

// fileIdentity is size and mtime of path; zero when it cannot be read.
// programIdentity names a program file by path, size and modification
// time: it changes when the program is upgraded.
func programIdentity(prog string) string {
	size, mtime := fileIdentity(prog)
	return fmt.Sprintf("%s %d %d", prog, size, mtime)
}

func fileIdentity(path string) (size, mtime int64) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0
	}
	return fi.Size(), fi.ModTime().UnixNano()
}

// ProbeFunc boots spec under KVM and reports whether the guest printed
// ProbeMarker. It is Config.Probe; the default is Backend.probeBoot.
type ProbeFunc func(ctx context.Context, spec vm.Spec) ProbeResult
