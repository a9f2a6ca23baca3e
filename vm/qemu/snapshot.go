package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"time"

	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/vm"
)

// Saving and restoring use QEMU migration. Save hands QEMU the write end
// of a pipe (getfd, then an fd: migration URI) and copies the stream into
// the state file: the pipe's end is the sign that QEMU is done with the
// migration, which its MIGRATION event comes a little before. QEMU 7.2
// (Debian 12) has no file: migration URI, so Restore hands QEMU the state
// file's descriptor the same way (getfd, fd:): QEMU runs with spawn=deny
// (Sandbox) and could not start a reader of its own. Next to the
// state file, Save writes SavedMachine (path + SavedSuffix): the
// accelerator, firmware and command line of the saved machine. Restore
// takes the spec from its caller, as vm.Restorer says, and checks that the
// command line it builds from it is the saved one: a migration stream only
// loads into the same devices, and the accelerator and firmware are host
// choices a spec does not name.
//
// The guest RAM does not go through the stream when it can be copied out
// instead. A booted machine's RAM is a memfd shared with the backend
// (Memory.Shared); Save migrates with QEMU's x-ignore-shared capability,
// which leaves shared RAM out of the stream, and copies the memfd into a
// sparse file beside the state (path + RAMSuffix) while the machine is
// still paused. Restore maps that file private (Memory.File): the guest
// reads pages from it as it touches them and writes into private copies,
// so a restored machine holds only what it uses, the file never changes,
// and machines restored from one file share the pages they only read (the
// host's page cache). A restored machine's RAM is that private mapping,
// which cannot be copied out: its own Save streams the RAM as before, and
// such a state restores into anonymous memory.

// SavedSuffix is appended to a state file's path to name the file that
// describes the saved machine.
const SavedSuffix = ".qemu.json"

// RAMSuffix is appended to a state file's path to name the file holding
// the saved machine's RAM, when it is not in the state (SavedMachine.RAMFile).
const RAMSuffix = ".ram"

// incomingArgs make QEMU wait for a migrate-incoming instead of booting.
var incomingArgs = []string{"-incoming", "defer"}

// savedVersion is the version of SavedMachine's format. Version 1 had
// the RAM in the stream, without x-ignore-shared.
const savedVersion = 2

// SavedMachine is what Restore needs besides the spec: the host choices
// the saved machine ran with and its command line.
type SavedMachine struct {
	Version int      `json:"version"`
	Accel   Accel    `json:"accel"`
	Arch    vm.Arch  `json:"host_arch"`
	QBoot   string   `json:"qboot,omitempty"`
	Vsock   bool     `json:"vsock,omitempty"`
	Args    []string `json:"args"`
	// RAMFile says the RAM is in the file path + RAMSuffix, not in the
	// state.
	RAMFile bool `json:"ram_file,omitempty"`
}

// loadFD is the name the state file's descriptor is given to QEMU
// under for a restore (getfd, then the fd: migration URI).
const loadFD = "airlock-load"

// errShares says why a machine with virtio-fs shares cannot be saved.
func errShares(n int) error {
	return fmt.Errorf("%w: the machine has %d virtio-fs share(s), and QEMU cannot migrate vhost-user-fs devices (the file system state lives in virtiofsd, outside QEMU); use a machine without shares", vm.ErrNotSupported, n)
}

var (
	cidArg     = regexp.MustCompile(`^(vhost-vsock-pci,guest-cid=)\d+$`)
	consoleArg = regexp.MustCompile(`^(file,id=console,path=)(?:[^,]|,,)*$`)
	driveArg   = regexp.MustCompile(`^(if=none,id=disk\d+,format=\w+,file=)(?:[^,]|,,)*((?:,readonly=on)?)$`)
	memoryArg  = regexp.MustCompile(`^memory-backend-\w+,(id=mem,size=\d+M)(?:,.*)?$`)
)

// migrationArgs is a QEMU command line with what a migration stream does
// not depend on masked (and the -sandbox filter left out): the vsock cid (the guest rereads it), the
// machine's name, the console log's path and the disks' files. A machine
// restores into another run directory (a warm snapshot restored for each
// sandbox) with other disk files: whoever restores vouches for what they
// hold (vm.Restorer).
func migrationArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		switch {
		case a == "-sandbox" || i > 0 && args[i-1] == "-sandbox":
			// QEMU's system call filter: no part of the machine.
			continue
		case i > 0 && args[i-1] == "-name":
			a = "*"
		default:
			a = cidArg.ReplaceAllString(a, "${1}*")
			a = consoleArg.ReplaceAllString(a, "${1}*")
			a = driveArg.ReplaceAllString(a, "${1}*${2}")
			a = memoryArg.ReplaceAllString(a, "memory-backend-*,${1}")
		}
		out = append(out, a)
	}
	return out
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}

// RestoreArgs is the command line that restores the machine saved as
// saved, its state at path, from spec (defaults applied), with vsock guest
// cid cid, and the host it assumes. It fails when spec does not describe
// the saved machine. The guest re-reads its cid after a restore, so the
// cid may be a new one. The RAM is path + RAMSuffix mapped private when
// the save wrote it there, else anonymous memory the state is loaded into.
func RestoreArgs(spec vm.Spec, saved SavedMachine, path string, cid uint32, goos string) ([]string, Host, error) {
	if saved.Version != savedVersion {
		return nil, Host{}, fmt.Errorf("saved machine format %d, want %d: save the machine again with this Airlock", saved.Version, savedVersion)
	}
	if len(spec.Shares) > 0 {
		return nil, Host{}, errShares(len(spec.Shares))
	}
	host := Host{Accel: saved.Accel, Arch: saved.Arch, OS: goos, Vsock: saved.Vsock, QBoot: saved.QBoot}
	if saved.RAMFile {
		host.Memory.File = path + RAMSuffix
	}
	if saved.Vsock {
		host.CID = cid
	}
	args, err := Args(spec, host)
	if err != nil {
		return nil, Host{}, err
	}
	got, want := migrationArgs(args), migrationArgs(saved.Args)
	for i := 0; i < max(len(got), len(want)); i++ {
		var got, want = at(got, i), at(want, i)
		if got != want {
			return nil, Host{}, fmt.Errorf("the spec does not describe the saved machine: QEMU argument %d is %q, the saved machine had %q; restore with the spec it was started with", i, got, want)
		}
	}
	return append(args, incomingArgs...), host, nil
}

// Save writes the machine's state to path, which must not exist, its
// description to path+SavedSuffix and, for a booted machine on Linux, its
// RAM to path+RAMSuffix. A running machine is paused for the save (QMP
// stop, migrate, copy the RAM, cont) and runs again after it. Disks are
// not saved: a restore expects them unchanged.
func (m *machine) Save(ctx context.Context, path string) error {
	if err := m.save(ctx, path); err != nil {
		return fmt.Errorf("save qemu %s: %w", m.name, err)
	}
	return nil
}

func (m *machine) save(ctx context.Context, path string) error {
	if n := len(m.spec.Shares); n > 0 {
		return errShares(n)
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	for _, p := range []string{path, path + SavedSuffix, path + RAMSuffix} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s already exists", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	m.mu.Lock()
	q, st := m.qmp, m.state
	m.mu.Unlock()
	if q == nil || (st != vm.StateRunning && st != vm.StatePaused) {
		return fmt.Errorf("not possible while %s: %w", st, vm.ErrNotRunning)
	}
	// x-ignore-shared leaves the shared memfd's RAM out of the stream; a
	// restored machine's private RAM goes into it.
	ramFile := m.ram != nil
	desc, err := json.MarshalIndent(SavedMachine{Version: savedVersion, Accel: m.host.Accel, Arch: m.host.Arch,
		QBoot: m.host.QBoot, Vsock: m.link == vm.LinkVsock, Args: m.args, RAMFile: ramFile}, "", "  ")
	if err != nil {
		return err
	}

	wasRunning := st == vm.StateRunning
	if wasRunning {
		if err := m.Pause(ctx); err != nil {
			return err
		}
	}
	// Write beside path and rename, so a failed save leaves nothing there.
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".saving")
	tmpRAM := tmp + RAMSuffix
	os.Remove(tmp)
	os.Remove(tmpRAM)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		err = migrate(ctx, q, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil && ramFile {
		// The machine is still paused (postmigrate): the RAM is the one
		// the state goes with.
		if err = copyRAM(tmpRAM, m.ram); err != nil {
			err = fmt.Errorf("copy the guest RAM: %w", err)
		}
	}
	if wasRunning {
		// The migration leaves QEMU in postmigrate; cont runs the guest.
		if rerr := m.Resume(context.WithoutCancel(ctx)); rerr != nil {
			err = errors.Join(err, fmt.Errorf("resume after saving: %w", rerr))
		}
	}
	if err == nil {
		err = atomicfile.WriteFile(path+SavedSuffix, append(desc, '\n'), 0o600)
	}
	if err == nil && ramFile {
		err = os.Rename(tmpRAM, path+RAMSuffix)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		os.Remove(tmpRAM)
		os.Remove(path + SavedSuffix)
		os.Remove(path + RAMSuffix)
		return err
	}
	return nil
}

// migrationCaps are the migration capabilities of both sides: events
// makes QEMU report each change of a migration's status as a MIGRATION
// event; x-ignore-shared leaves shared RAM out of the stream (the saving
// side copies it into the RAM file, the restoring side maps that file),
// and changes the stream's format, so both sides set it.
var migrationCaps = map[string]any{"capabilities": []map[string]any{
	{"capability": "events", "state": true},
	{"capability": "x-ignore-shared", "state": true},
}}

// migrationStatus is the data of a MIGRATION event.
type migrationStatus struct {
	Status string `json:"status"`
}

// waitMigration waits for the MIGRATION event that ends a migration and
// returns its status: completed, failed or cancelled.
func waitMigration(ctx context.Context, sub *subscription) (string, error) {
	for {
		e, err := sub.next(ctx)
		if err != nil {
			return "", err
		}
		var d migrationStatus
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return "", fmt.Errorf("qmp MIGRATION event: %w", err)
		}
		switch d.Status {
		case "completed", "failed", "cancelled":
			return d.Status, nil
		}
	}
}

// saveFD is the name under which Save hands QEMU the migration pipe.
const saveFD = "airlock-save"

// migrate runs an outgoing migration into w and waits for its end: the
// MIGRATION event says how it ended, the end of the stream that QEMU is
// done (a completed migration has left the machine in postmigrate by
// then). When ctx ends first the migration is cancelled.
func migrate(ctx context.Context, q *qmp, w io.Writer) error {
	r, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(w, r)
		copied <- err
	}()
	// Until QEMU holds the only write end, ending the copy is ours to do.
	endCopy := func() error {
		r.Close()
		return <-copied
	}
	sub := q.subscribe("MIGRATION")
	defer q.unsubscribe(sub)
	err = q.callFile(ctx, "getfd", map[string]string{"fdname": saveFD}, nil, pw)
	pw.Close()
	if err != nil {
		endCopy()
		return err
	}
	err = q.call(ctx, "migrate-set-capabilities", migrationCaps, nil)
	if err == nil {
		err = q.call(ctx, "migrate", map[string]string{"uri": "fd:" + saveFD}, nil)
	}
	if err != nil && ctx.Err() == nil {
		// QEMU keeps a file it did not use until told to close it.
		q.call(ctx, "closefd", map[string]string{"fdname": saveFD}, nil)
		endCopy()
		return err
	}
	var status string
	if err == nil {
		status, err = waitMigration(ctx, sub)
	}
	var copyErr error
	if err == nil {
		// Whatever the end, QEMU closes the stream once done with it.
		select {
		case copyErr = <-copied:
			copied <- copyErr // for endCopy
		case <-ctx.Done():
		}
	}
	if ctx.Err() != nil {
		// Cancel a migration that may have started, and wait (a little)
		// for QEMU to say it stopped, so that the machine can run again.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if q.execute(cctx, "migrate_cancel") == nil {
			waitMigration(cctx, sub)
		}
		q.call(cctx, "closefd", map[string]string{"fdname": saveFD}, nil)
		endCopy()
		return ctx.Err()
	}
	endCopy()
	if err != nil {
		return err
	}
	if status == "completed" {
		if copyErr != nil {
			return fmt.Errorf("write the saved state: %w", copyErr)
		}
		return nil
	}
	// The event carries no reason; query-migrate does, until the next
	// migration starts.
	var info struct {
		Status    string `json:"status"`
		ErrorDesc string `json:"error-desc"`
	}
	desc := "QEMU gave no reason"
	if err := q.call(ctx, "query-migrate", nil, &info); err != nil {
		desc += " (" + err.Error() + ")"
	} else if info.ErrorDesc != "" {
		desc = info.ErrorDesc
	}
	return fmt.Errorf("migration %s: %s", status, desc)
}

// ReadSaved reads the description Save wrote next to the state file path.
func ReadSaved(path string) (SavedMachine, error) {
	var s SavedMachine
	b, err := os.ReadFile(path + SavedSuffix)
	if err != nil {
		return s, fmt.Errorf("saved machine description: %w (Save writes it next to the state file)", err)
	}
	if len(b) > 1<<20 {
		return s, fmt.Errorf("saved machine description %s: too large", path+SavedSuffix)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("saved machine description %s: %w", path+SavedSuffix, err)
	}
	return s, nil
}

// Restore starts a machine from the state Save wrote to path. spec must be
// the one the saved machine was started with (same devices and StateDir);
// the accelerator and firmware are the saved machine's. The machine comes
// back running; guest-link connections of the saved machine are gone.
func (b *Backend) Restore(ctx context.Context, spec vm.Spec, path string) (vm.Machine, error) {
	m, err := b.restore(ctx, spec, path)
	if err != nil {
		return nil, fmt.Errorf("restore qemu %s: %w", spec.Name, err)
	}
	return m, nil
}

func (b *Backend) restore(ctx context.Context, spec vm.Spec, path string) (*machine, error) {
	raw := spec
	spec = spec.WithDefaults(hostArch())
	if len(spec.Shares) > 0 {
		return nil, errShares(len(spec.Shares))
	}
	if err := b.validate(spec, raw); err != nil {
		return nil, err
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("saved state: %w", err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("saved state %s is not a regular file", path)
	}
	saved, err := ReadSaved(path)
	if err != nil {
		return nil, err
	}
	if saved.Vsock && !hostVsock(b.root) {
		return nil, fmt.Errorf("%w: the machine was saved with a vsock link and this host has no usable /dev/vhost-vsock", vm.ErrNotSupported)
	}
	if saved.Accel == KVM && saved.Arch != hostArch() {
		return nil, fmt.Errorf("%w: the machine was saved under KVM on a %s host; this host is %s", vm.ErrNotSupported, saved.Arch, hostArch())
	}
	_, host, err := RestoreArgs(spec, saved, path, 3+rand.Uint32N(1<<31-3), runtime.GOOS)
	if err != nil {
		return nil, err
	}
	if f := host.Memory.File; f != "" {
		if err := checkRAMFile(f, spec.MemoryMiB); err != nil {
			return nil, err
		}
	}
	prog, err := b.program(spec.Arch)
	if err != nil {
		return nil, err
	}
	b.log.Info("restoring qemu", "machine", spec.Name, "accel", host.Accel, "state", path)
	t0 := time.Now()
	m, err := b.start(ctx, prog, spec, host, true, b.confinement(prog, spec, host, path))
	if err != nil {
		return nil, err
	}
	b.log.Debug("qemu waiting for the saved state", "machine", spec.Name, "after", time.Since(t0))
	defer func() { b.log.Debug("qemu restored", "machine", spec.Name, "after", time.Since(t0)) }()
	if err := m.load(ctx, path); err != nil {
		m.kill("its restore failed")
		<-m.done
		if m.err != nil {
			err = fmt.Errorf("%w\n%w", err, m.err)
		}
		return nil, err
	}
	return m, nil
}

// checkRAMFile checks that the RAM file at path holds mib MiB. QEMU would
// refuse a shorter one, but it would grow an empty one (ftruncate): the
// saved RAM must never change.
func checkRAMFile(path string, mib int) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("saved RAM: %w (Save writes it next to the state file; save the machine again)", err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("saved RAM %s is not a regular file", path)
	case fi.Size() != int64(mib)<<20:
		return fmt.Errorf("saved RAM %s holds %d bytes, the machine has %d MiB: save the machine again", path, fi.Size(), mib)
	}
	return nil
}

// load feeds the saved state at path to a QEMU waiting with -incoming
// defer and runs the guest.
func (m *machine) load(ctx context.Context, path string) error {
	m.mu.Lock()
	q := m.qmp
	m.mu.Unlock()
	if q == nil {
		return fmt.Errorf("qemu ended before the restore: %w", vm.ErrNotRunning)
	}
	sub := q.subscribe("MIGRATION")
	defer q.unsubscribe(sub)
	if err := q.call(ctx, "migrate-set-capabilities", migrationCaps, nil); err != nil {
		return err
	}
	// The state file goes to QEMU as a descriptor: QEMU starts no
	// process to read it (its seccomp filter forbids that, Sandbox).
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = q.callFile(ctx, "getfd", map[string]string{"fdname": loadFD}, nil, f)
	f.Close() // QEMU holds its own copy
	if err != nil {
		return err
	}
	if err := q.call(ctx, "migrate-incoming", map[string]string{"uri": "fd:" + loadFD}, nil); err != nil {
		return err
	}
	// QEMU says completed once the state is loaded; when the load fails
	// it says failed and exits, its reason on its stderr (m.err).
	status, err := waitMigration(ctx, sub)
	switch {
	case errors.Is(err, errQMPClosed):
		return errors.New("qemu ended while loading the saved state")
	case err != nil:
		return err
	case status != "completed":
		return fmt.Errorf("loading the saved state: migration %s", status)
	}
	// The loaded machine takes the run state it was saved in: Save
	// pauses it, so it usually waits for a cont.
	var st struct {
		Status string `json:"status"`
	}
	if err := q.call(ctx, "query-status", nil, &st); err != nil {
		return err
	}
	if st.Status != "running" {
		if err := q.execute(ctx, "cont"); err != nil {
			return err
		}
	}
	m.mu.Lock()
	if m.state == vm.StateStarting {
		m.state = vm.StateRunning
	}
	m.mu.Unlock()
	return nil
}
