package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	seccomp "github.com/elastic/go-seccomp-bpf"
	seccomparch "github.com/elastic/go-seccomp-bpf/arch"
	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// The agent's jail: what the command of a session with a jail request
// (guest.RequestJail: the sandbox's own command and its verify) runs
// in, inside the VM, on top of the VM itself. The VM is the boundary;
// the jail takes from a hijacked agent the ways at the guest's kernel
// and at the guest link (the host's most valuable door) that no build
// or test needs.
//
//   - no_new_privs: no setuid program (sudo, su) gives it more than it
//     has, and the filters below stay on everything it starts.
//   - A seccomp filter (elastic/go-seccomp-bpf: pure Go, a policy of
//     syscall names and argument conditions assembled to BPF; gVisor's
//     pkg/seccomp is a far larger dependency for the same filter)
//     answers EPERM to AF_VSOCK and AF_PACKET sockets, process_vm_*,
//     io_uring, kexec, module loading, bpf, perf_event_open,
//     userfaultfd, the kernel's keyrings, mount and the new mount API,
//     swap, reboot. Each denial is logged by the kernel (the filter's
//     log flag) as an audit record of type 1326.
//   - Landlock (landlock-lsm/go-landlock, the LSM's own Go library),
//     where the guest's kernel has it: writes only below the directories
//     the host names (the workspace, the caches), the command's home,
//     /tmp and /var/tmp, and to the terminals and /dev's harmless files
//     (jailDevices); reads and runs everywhere but in /dev, so that not
//     even root opens the guest link's serial port.
//   - ptrace of PID 1 (the agent that holds the guest link) is EPERM;
//     Landlock keeps every process outside the jail's domain from
//     ptrace and from its memory (/proc/PID/mem), and /proc from any
//     write.
//
// The guest link's devices are root's alone (0600), and the agent's
// user is not root in the images that have one.

// jailWritable are the directories every jailed command may write
// below, besides those the host names and the command's home.
var jailWritable = []string{"/tmp", "/var/tmp", "/dev/pts", "/dev/shm", "/dev/mqueue"}

// jailDevices are the files of /dev a jailed command may open, for
// reading and writing; nothing else of /dev opens.
var jailDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/console"}

// jailDenied are the syscalls the jail answers EPERM, whatever their
// arguments (see the comment above).
var jailDenied = []string{
	"process_vm_readv", "process_vm_writev",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"kexec_load", "kexec_file_load",
	"init_module", "finit_module", "delete_module",
	"bpf", "perf_event_open", "userfaultfd",
	"keyctl", "add_key", "request_key",
	"mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"swapon", "swapoff", "reboot", "acct",
}

// jailSockets are the socket families the jail refuses: vsock (the guest
// link) and raw packets.
var jailSockets = []uint64{unix.AF_VSOCK, unix.AF_PACKET}

// jailFilter is the seccomp filter of the jail.
func jailFilter() seccomp.Filter {
	eperm := seccomp.ActionErrno | seccomp.Action(unix.EPERM)
	var conditional []seccomp.NameWithConditions
	for _, family := range jailSockets {
		for _, call := range []string{"socket", "socketpair"} {
			conditional = append(conditional, seccomp.NameWithConditions{Name: call, Conditions: seccomp.ArgumentConditions{
				{Argument: 0, Operation: seccomp.Equal, Value: family}}})
		}
	}
	// ptrace(request, pid, ...) of PID 1, whatever the request.
	conditional = append(conditional, seccomp.NameWithConditions{Name: "ptrace", Conditions: seccomp.ArgumentConditions{
		{Argument: 1, Operation: seccomp.Equal, Value: 1}}})
	return seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync | seccomp.FilterFlagLog,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{
				{Names: jailDenied, Action: eperm},
				{NamesWithCondtions: conditional, Action: eperm},
			},
		},
	}
}

// Jail puts this process in the agent's jail, writes allowed below
// write (absolute directories; missing ones are skipped) and those of
// jailWritable and home, then replaces it with the program at argv[0],
// run as argv[1:]. It returns only on failure. On a kernel without
// Landlock, the rest of the jail still holds.
func Jail(write []string, home string, argv, env []string) error {
	if len(argv) == 0 {
		return errors.New("jail: no command")
	}
	if err := jailRestrict(write, home); err != nil {
		return err
	}
	path := argv[0]
	if !strings.Contains(path, "/") {
		return fmt.Errorf("jail: %s is not a path", path)
	}
	// A login shell's argv[0] starts with "-": the path is given apart.
	return syscall.Exec(path, argv[1:], env)
}

// jailRestrict applies no_new_privs, Landlock and the seccomp filter to
// every thread of this process.
func jailRestrict(write []string, home string) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("jail: no_new_privs: %w", err)
	}
	dirs := append(append([]string{}, jailWritable...), write...)
	if home != "" {
		dirs = append(dirs, home)
	}
	var rw []string
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("jail: %q is not an absolute directory", d)
		}
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			rw = append(rw, d)
		}
	}
	// Read and run: everything at / but /dev (a rule covers all below
	// it, and nothing can take back part of it).
	top, err := os.ReadDir("/")
	if err != nil {
		return fmt.Errorf("jail: %w", err)
	}
	var roDirs, roFiles, devs []string
	for _, e := range top {
		p := "/" + e.Name()
		fi, err := os.Stat(p) // through symbolic links: /bin is /usr/bin
		switch {
		case err != nil || p == "/dev":
		case fi.IsDir():
			roDirs = append(roDirs, p)
		case fi.Mode().IsRegular():
			roFiles = append(roFiles, p)
		}
	}
	for _, d := range jailDevices {
		if _, err := os.Stat(d); err == nil {
			devs = append(devs, d)
		}
	}
	// BestEffort: the strongest Landlock the kernel has, none without it.
	if err := landlock.V5.BestEffort().RestrictPaths(landlock.RODirs(roDirs...), landlock.ROFiles(roFiles...),
		landlock.RWFiles(devs...), landlock.RWDirs(rw...)); err != nil {
		return fmt.Errorf("jail: landlock: %w", err)
	}
	if err := seccomp.LoadFilter(jailFilter()); err != nil {
		return fmt.Errorf("jail: seccomp: %w", err)
	}
	return nil
}

// JailProbe tries, from inside the jail, what the jail denies, and
// writes one line a probe: "vsock socket: denied (operation not
// permitted)" or "...: allowed". It is what `airlock-guest jail-probe`
// prints, for a user (and a test) to see the walls.
func JailProbe(w io.Writer, outside string) {
	try := func(what string, err error) {
		if err != nil {
			fmt.Fprintf(w, "%s: denied (%v)\n", what, err)
			return
		}
		fmt.Fprintf(w, "%s: allowed\n", what)
	}
	sock := func(family, typ int) error {
		fd, err := unix.Socket(family, typ, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	try("vsock socket", sock(unix.AF_VSOCK, unix.SOCK_STREAM))
	try("packet socket", sock(unix.AF_PACKET, unix.SOCK_RAW))
	// PTRACE_SEIZE, not ATTACH: were it allowed, PID 1 would not stop.
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, 1, 0, 0, 0, 0)
	if e == 0 {
		unix.PtraceDetach(1)
	}
	try("ptrace of PID 1", errnoErr(e))
	if f, err := os.Open("/proc/1/mem"); err == nil {
		f.Close()
		try("read PID 1's memory", nil)
	} else {
		try("read PID 1's memory", err)
	}
	if found, err := openAny("/dev/vport*", "/dev/vsock"); found {
		try("open the guest link's device", err)
	} else {
		fmt.Fprintf(w, "open the guest link's device: none in /dev\n")
	}
	_, _, e = unix.Syscall(unix.SYS_IO_URING_SETUP, 1, 0, 0)
	try("io_uring", errnoErr(e))
	_, _, e = unix.Syscall(unix.SYS_BPF, 0, 0, 0)
	try("bpf", errnoErr(e))
	_, _, e = unix.Syscall(unix.SYS_USERFAULTFD, 0, 0, 0)
	try("userfaultfd", errnoErr(e))
	try("mount", unix.Mount("none", "/mnt", "tmpfs", 0, ""))
	var nnp string
	if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err == nil && v == 1 {
		nnp = "set"
	} else {
		nnp = "not set"
	}
	fmt.Fprintf(w, "no_new_privs: %s\n", nnp)
	if outside != "" {
		f, err := os.OpenFile(outside, os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
			os.Remove(outside)
		}
		try("write "+outside, err)
	}
}

// openAny opens, for reading, each existing file the patterns match:
// found says there was one, err is nil when one opened, the last
// error otherwise.
func openAny(patterns ...string) (found bool, err error) {
	for _, pat := range patterns {
		names, _ := filepath.Glob(pat)
		for _, n := range names {
			found = true
			f, oerr := os.OpenFile(n, os.O_RDONLY|unix.O_NONBLOCK, 0)
			if oerr == nil {
				f.Close()
				return true, nil
			}
			err = oerr
		}
	}
	return found, err
}

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// JailDenials counts the jail's denials the kernel has logged since the
// VM started (its seccomp audit records, type 1326, in /dev/kmsg), by
// syscall name: what `airlock-guest jail-denials` prints for the host's
// audit log after the command. Read as root.
func JailDenials() (map[string]int, error) {
	// Raw reads: an *os.File of a non-blocking descriptor would wait in
	// the runtime's poller at the end of the buffer instead of ending.
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	info, err := seccomparch.GetInfo("")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	buf := make([]byte, 8192) // a record comes whole, and is far shorter
	for range 1 << 20 {       // the ring buffer holds far fewer records
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.EINTR) {
			continue // records were overwritten before this read: go on
		}
		if err != nil || n <= 0 {
			break // EAGAIN: the end of the buffer
		}
		if name, ok := denial(string(buf[:n]), info.SyscallNumbers); ok {
			out[name]++
		}
	}
	return out, nil
}

// denial reads one /dev/kmsg record: a seccomp audit record of an
// errno the jail returned (its code is the action alone, 0x50000) gives
// the syscall's name.
func denial(rec string, names map[int]string) (string, bool) {
	if !strings.Contains(rec, "type=1326 ") || !strings.Contains(rec, " code=0x50000") {
		return "", false
	}
	_, after, ok := strings.Cut(rec, " syscall=")
	if !ok {
		return "", false
	}
	num, _, _ := strings.Cut(after, " ")
	n, err := strconv.Atoi(num)
	if err != nil {
		return "", false
	}
	if name, ok := names[n]; ok {
		return name, true
	}
	return "syscall " + num, true
}
