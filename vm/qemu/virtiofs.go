package qemu

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/airlock-dev/airlock/vm"
)

// DefaultVirtiofsd is where Debian's qemu-system-common puts QEMU's C
// virtiofsd (QEMU 7.2; later QEMUs ship the Rust one separately).
const DefaultVirtiofsd = "/usr/lib/qemu/virtiofsd"

// virtiofsdAptPackage holds DefaultVirtiofsd on Debian and Ubuntu.
const virtiofsdAptPackage = "qemu-system-common"

// virtiofsdFD is the listening vhost-user socket virtiofsd inherits
// (--fd): the backend binds it before virtiofsd and QEMU start, so QEMU's
// connect never races virtiofsd's startup.
const virtiofsdFD = 3

// VirtiofsdArgs is the virtiofsd command line serving share sh, program
// name first. It is a pure function.
//
// The daemon runs in its own mount, PID and network namespaces with the
// shared directory as its root (sandbox=namespace, the default, spelled
// out), so a symlink the guest plants resolves inside the share, never on
// the host. No xattrs, no host locks: the guest needs neither.
func VirtiofsdArgs(prog string, sh vm.Share) []string {
	return []string{prog,
		fmt.Sprintf("--fd=%d", virtiofsdFD),
		"-o", "source=" + fuseEscape(sh.HostPath),
		"-o", "sandbox=namespace",
		"-o", "cache=auto",
		"-o", "no_xattr",
		"-o", "no_posix_lock",
		"-o", "no_flock",
		"-o", "log_level=warn",
	}
}

// fuseEscape quotes a value inside a -o list, where ',' separates options
// and '\' escapes.
func fuseEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `,`, `\,`).Replace(s)
}

// checkShares reports what the QEMU backend cannot do with spec's shares.
func checkShares(spec vm.Spec) error {
	var errs []error
	for i, sh := range spec.Shares {
		if sh.ReadOnly {
			errs = append(errs, fmt.Errorf("share %d (%s): read-only shares: %w by QEMU 7.2's virtiofsd", i, sh.Tag, vm.ErrNotSupported))
		}
	}
	return errors.Join(errs...)
}

// virtiofsdProgram finds virtiofsd, or says how to install it.
func (b *Backend) virtiofsdProgram() (string, error) {
	path := b.cfg.Virtiofsd
	if path == "" {
		path = DefaultVirtiofsd
	}
	fi, err := os.Stat(path)
	if err == nil && (fi.IsDir() || fi.Mode()&0o111 == 0) {
		err = errors.New("not an executable file")
	}
	if err != nil {
		return "", fmt.Errorf("virtiofsd (for --sync virtiofs): %w: %w; install it with `sudo apt-get install %s` (Debian, Ubuntu)",
			vm.ErrHypervisorMissing, err, virtiofsdAptPackage)
	}
	return path, nil
}

// validateShares checks the host side of spec's shares: virtiofsd, the
// directories, root.
func (b *Backend) validateShares(spec vm.Spec) error {
	if len(spec.Shares) == 0 {
		return nil
	}
	errs := []error{checkShares(spec)}
	if _, err := b.virtiofsdProgram(); err != nil {
		errs = append(errs, err)
	}
	if os.Geteuid() != 0 {
		errs = append(errs, fmt.Errorf("virtiofs shares: %w for a non-root user here: QEMU 7.2's virtiofsd needs root (its namespace sandbox); use the default copy mode", vm.ErrNotSupported))
	}
	for i, sh := range spec.Shares {
		if fi, err := os.Stat(sh.HostPath); err != nil {
			errs = append(errs, fmt.Errorf("share %d (%s): %w", i, sh.Tag, err))
		} else if !fi.IsDir() {
			errs = append(errs, fmt.Errorf("share %d (%s): %s is not a directory", i, sh.Tag, sh.HostPath))
		}
	}
	return errors.Join(errs...)
}

// virtiofsd is one virtiofsd child serving a share.
type virtiofsd struct {
	tag  string
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{} // closed once it is reaped; err is set

	mu     sync.Mutex
	exited bool
	err    error
}

// startVirtiofsd binds the vhost-user socket of share i and starts a
// virtiofsd on it. Like QEMU it is in its own process group and dies with
// our thread (Pdeathsig); the machine kills it when QEMU is gone.
func startVirtiofsd(prog string, spec vm.Spec, i int) (*virtiofsd, error) {
	sh := spec.Shares[i]
	sock := ShareSocket(spec, i)
	f, err := listenUnix(sock)
	if err != nil {
		return nil, fmt.Errorf("virtiofs share %s: %w", sh.Tag, err)
	}
	defer f.Close()
	args := VirtiofsdArgs(prog, sh)
	d := &virtiofsd{tag: sh.Tag, out: &tailBuffer{max: 8 << 10}, done: make(chan struct{})}
	d.cmd = exec.Command(prog, args[1:]...)
	d.cmd.ExtraFiles = []*os.File{f} // fd 3 = virtiofsdFD
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	d.cmd.Dir = spec.StateDir
	d.cmd.SysProcAttr = sysProcAttr()
	if err := d.cmd.Start(); err != nil {
		os.Remove(sock)
		return nil, fmt.Errorf("virtiofs share %s: run %s: %w", sh.Tag, prog, err)
	}
	go func() {
		err := d.cmd.Wait()
		d.mu.Lock()
		d.exited, d.err = true, err
		d.mu.Unlock()
		close(d.done)
	}()
	return d, nil
}

// kill forces virtiofsd off and waits until it is reaped.
func (d *virtiofsd) kill() {
	d.mu.Lock()
	if !d.exited {
		_ = killProcess(d.cmd.Process)
	}
	d.mu.Unlock()
	<-d.done
}

// why says how virtiofsd ended, with its last words.
func (d *virtiofsd) why() string {
	d.mu.Lock()
	err := d.err
	d.mu.Unlock()
	s := fmt.Sprintf("virtiofsd of share %s exited", d.tag)
	if err != nil {
		s += " (" + err.Error() + ")"
	}
	if lines := d.out.lines(3); len(lines) > 0 {
		s += ": " + strings.Join(lines, " | ")
	}
	return s
}
