package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file holds the machine-changing steps PID 1 takes. Each one needs
// root (CAP_SYS_ADMIN and friends); none runs unless the main wires it in.

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// SetHostname sets the kernel's host name (sethostname(2)).
func SetHostname(name string) error {
	if err := unix.Sethostname([]byte(name)); err != nil {
		return fmt.Errorf("sethostname %q: %w", name, err)
	}
	return nil
}

// SetClock sets the system clock (settimeofday(2)).
func SetClock(t time.Time) error {
	tv := unix.NsecToTimeval(t.UnixNano())
	if err := unix.Settimeofday(&tv); err != nil {
		return fmt.Errorf("settimeofday: %w", err)
	}
	return nil
}

// AddEntropy mixes seed into the kernel's random pool and credits it
// (RNDADDENTROPY on /dev/urandom), then reseeds the CRNG from it
// (RNDRESEEDCRNG). Without the privilege to credit, it writes seed to
// /dev/urandom, which mixes it in without credit.
func AddEntropy(seed []byte) error {
	f, err := os.OpenFile("/dev/urandom", os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("add entropy: %w", err)
	}
	defer f.Close()
	// struct rand_pool_info { int entropy_count; int buf_size; __u32 buf[]; }
	info := make([]byte, 8+len(seed))
	binary.NativeEndian.PutUint32(info[0:], uint32(8*len(seed)))
	binary.NativeEndian.PutUint32(info[4:], uint32(len(seed)))
	copy(info[8:], seed)
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("add entropy: %w", err)
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, unix.RNDADDENTROPY, uintptr(unsafe.Pointer(&info[0])))
	}); err != nil {
		return fmt.Errorf("add entropy: %w", err)
	}
	if errno == 0 {
		// Reseed the kernel's CRNG from the pool now, instead of within a
		// minute: guests restored from one snapshot start with one CRNG
		// state, and must part ways before anything random is drawn.
		if err := rc.Control(func(fd uintptr) {
			_, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, unix.RNDRESEEDCRNG, 0)
		}); err != nil {
			return fmt.Errorf("add entropy: reseed: %w", err)
		}
		if errno != 0 {
			return fmt.Errorf("add entropy: reseed: %w", errno)
		}
		return nil
	}
	if _, err := f.Write(seed); err != nil {
		return fmt.Errorf("add entropy: ioctl: %w; write: %w", errno, err)
	}
	return nil
}

// BecomeSubreaper makes orphaned descendants of this process its children
// instead of PID 1's (PR_SET_CHILD_SUBREAPER), so a Reaper in an ordinary
// process behaves as it would in PID 1.
func BecomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become subreaper: %w", err)
	}
	return nil
}

type mount struct {
	source, target, fstype string
	flags                  uintptr
	data                   string
}

// mounts are the file systems PID 1 mounts, in order.
var mounts = []mount{
	{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID, "mode=0755"},
	{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "mode=0620,ptmxmode=0666"},
	{"tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
	{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
	{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
}

// mountAll mounts the system file systems and points /dev/ptmx at the
// devpts instance. A file system that is already mounted is fine.
func mountAll() error {
	var errs []error
	for _, m := range mounts {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			errs = append(errs, fmt.Errorf("mount %s: %w", m.target, err))
			continue
		}
		err := unix.Mount(m.source, m.target, m.fstype, m.flags, m.data)
		if err != nil && !errors.Is(err, unix.EBUSY) {
			errs = append(errs, fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err))
		}
	}
	if target, err := os.Readlink("/dev/ptmx"); err != nil || target != "pts/ptmx" {
		_ = os.Remove("/dev/ptmx")
		if err := os.Symlink("pts/ptmx", "/dev/ptmx"); err != nil {
			errs = append(errs, fmt.Errorf("link /dev/ptmx: %w", err))
		}
	}
	return errors.Join(errs...)
}

// loopbackUp brings the lo interface up, as ip link set lo up does.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: get flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: set flags: %w", err)
	}
	return nil
}

// moduleInitCompressedFile is finit_module's MODULE_INIT_COMPRESSED_FILE:
// the kernel decompresses the module itself (Linux 6.4+).
const moduleInitCompressedFile = 4

// readModuleList reads the image's module list: one path per line, in
// dependency order; blank lines and # comments are skipped. A missing list
// is no modules.
func readModuleList(list string) ([]string, error) {
	b, err := os.ReadFile(list)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read module list: %w", err)
	}
	var paths []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if p := strings.TrimSpace(sc.Text()); p != "" && !strings.HasPrefix(p, "#") {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// deferredModules are loaded after the link is served: nothing on the way
// to first contact needs them.
var deferredModules = map[string]bool{"evdev": true, "button": true, "gpio_keys": true, "virtio_rng": true}

// virtioModules maps a module that drives (or only serves) one kind of
// virtio device to that device's ID, so that a machine without such a
// device does not pay for loading it. Modules not listed always load.
// virtioVsockID is the virtio device ID of a vsock device.
const virtioVsockID = 19

var virtioModules = map[string]uint32{
	"virtio_blk":                        2,
	"ext4":                              2, // the workspace disk's file system, with its dependencies
	"jbd2":                              2,
	"mbcache":                           2,
	"crc16":                             2,
	"crc32c_generic":                    2,
	"virtio_net":                        1,
	"net_failover":                      1,
	"failover":                          1,
	"virtio_rng":                        4,
	"9pnet_virtio":                      9,
	"9p":                                9,
	"vsock":                             19,
	"vmw_vsock_virtio_transport_common": 19,
	"vmw_vsock_virtio_transport":        19,
	"fuse":                              26,
	"virtiofs":                          26,
}

// splitModules splits paths, keeping their order, into the modules to load
// now and those in deferred.
func splitModules(paths []string, deferred map[string]bool) (now, later []string) {
	for _, p := range paths {
		if deferred[moduleName(p)] {
			later = append(later, p)
		} else {
			now = append(now, p)
		}
	}
	return now, later
}

// moduleName is the module name of a .ko path ("virtio_pci" for
// /lib/modules/airlock/virtio_pci.ko.xz).
func moduleName(path string) string {
	name, _, _ := strings.Cut(filepath.Base(path), ".")
	return strings.ReplaceAll(name, "-", "_")
}

// presentVirtioDevices returns the IDs of the virtio devices the kernel
// has found so far (/sys/bus/virtio/devices/*/device).
func presentVirtioDevices() map[uint32]bool {
	ids := map[uint32]bool{}
	files, _ := filepath.Glob("/sys/bus/virtio/devices/*/device")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if id, err := strconv.ParseUint(strings.TrimSpace(string(b)), 0, 32); err == nil {
			ids[uint32(id)] = true
		}
	}
	return ids
}

// loadModules loads paths in order and returns how many loaded. A module
// for a kind of virtio device the machine does not have (devices, asked
// once the virtio bus is up) is skipped; a module that fails is logged and
// skipped: a missing driver must not keep the agent from serving.
func loadModules(paths []string, devices func() map[uint32]bool, log *slog.Logger) int {
	n := 0
	var present map[uint32]bool
	for _, path := range paths {
		name := moduleName(path)
		if id, ok := virtioModules[name]; ok {
			if present == nil {
				present = devices()
			}
			if !present[id] {
				log.Debug("module skipped: no such device", "module", name, "virtio_id", id)
				continue
			}
		}
		t0 := time.Now()
		if err := loadModule(path); err != nil {
			log.Warn("load module", "module", path, "err", err)
			continue
		}
		log.Debug("module loaded", "module", name, "took", time.Since(t0).Round(time.Millisecond))
		n++
	}
	return n
}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	flags := 0
	switch filepath.Ext(path) {
	case ".xz", ".zst", ".gz":
		flags |= moduleInitCompressedFile
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var loadErr error
	if err := rc.Control(func(fd uintptr) { loadErr = unix.FinitModule(int(fd), "", flags) }); err != nil {
		return err
	}
	switch {
	case loadErr == nil, errors.Is(loadErr, unix.EEXIST):
		return nil
	case errors.Is(loadErr, unix.ENOENT):
		return fmt.Errorf("finit_module: unknown symbol (is a module it depends on missing or listed after it?): %w", loadErr)
	}
	return fmt.Errorf("finit_module: %w", loadErr)
}

// installBusybox creates the busybox applet links (/bin/sh and the rest)
// when the image has /bin/busybox but no /bin/sh.
func installBusybox(r *Reaper) error {
	if _, err := os.Stat("/bin/busybox"); err != nil {
		return nil
	}
	if _, err := os.Lstat("/bin/sh"); err == nil {
		return nil
	}
	for _, dir := range []string{"/bin", "/sbin", "/usr/bin", "/usr/sbin"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("install busybox: %w", err)
		}
	}
	_, wait, err := r.Start("/bin/busybox", []string{"busybox", "--install", "-s"},
		&os.ProcAttr{Files: []*os.File{nil, os.Stderr, os.Stderr}})
	if err != nil {
		return fmt.Errorf("install busybox: %w", err)
	}
	if ws := wait(); !ws.Exited() || ws.ExitStatus() != 0 {
		return fmt.Errorf("install busybox: busybox --install exited with status %#x", int(ws))
	}
	return nil
}

// cmdlineHas reports whether the kernel command line has word as one of
// its space-separated arguments.
func cmdlineHas(cmdline, word string) bool {
	for _, f := range strings.Fields(cmdline) {
		if f == word {
			return true
		}
	}
	return false
}

// killGrace is how long processes get between SIGTERM and SIGKILL at power
// off.
const killGrace = 2 * time.Second

// powerOff stops every process (SIGTERM, then SIGKILL after killGrace or as
// soon as none is left), syncs and powers the machine off. It returns only
// if the reboot system call fails.
func powerOff(r *Reaper, log *slog.Logger) error {
	log.Info("powering off")
	unix.Sync()
	_ = syscall.Kill(-1, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), killGrace)
	r.waitAll(ctx)
	cancel()
	_ = syscall.Kill(-1, syscall.SIGKILL)
	ctx, cancel = context.WithTimeout(context.Background(), killGrace)
	r.waitAll(ctx)
	cancel()
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		return fmt.Errorf("power off: %w", err)
	}
	return nil
}

// inputEventSize is sizeof(struct input_event) on 64-bit kernels: a
// struct timeval, type and code (u16), value (s32).
const inputEventSize = 24

const (
	evKey    = 1
	keyPower = 116
)

// watchPowerButton calls press when any input device reports KEY_POWER
// pressed (the ACPI power button on x86, gpio-keys on arm64), so the
// hypervisor's graceful shutdown works. It returns when ctx ends.
func watchPowerButton(ctx context.Context, log *slog.Logger, press func()) {
	paths, _ := filepath.Glob("/dev/input/event*")
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			log.Debug("open input device", "path", p, "err", err)
			continue
		}
		stop := context.AfterFunc(ctx, func() { f.Close() })
		wg.Go(func() {
			defer stop()
			defer f.Close()
			buf := make([]byte, inputEventSize)
			for {
				if _, err := io.ReadFull(f, buf); err != nil {
					return
				}
				typ := binary.NativeEndian.Uint16(buf[16:])
				code := binary.NativeEndian.Uint16(buf[18:])
				value := int32(binary.NativeEndian.Uint32(buf[20:]))
				if typ == evKey && code == keyPower && value == 1 {
					press()
				}
			}
		})
	}
}

// mountShares mounts the virtio-fs shares the kernel command line names
// (guest.VirtiofsArg). The fuse and virtiofs modules are loaded by then:
// loadModules loads them when a virtio-fs device (ID 26) is present. A
// share that fails to mount is logged; the host checks its mount before
// using it.
func mountShares(cmdline string, log *slog.Logger) {
	mounts, bad := shareMounts(cmdline)
	for _, b := range bad {
		log.Warn("virtiofs: ignored malformed kernel argument", "arg", b)
	}
	for _, m := range mounts {
		if err := os.MkdirAll(m.Dir, 0o755); err != nil {
			log.Warn("virtiofs mount", "tag", m.Tag, "dir", m.Dir, "err", err)
			continue
		}
		if err := unix.Mount(m.Tag, m.Dir, "virtiofs", unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			log.Warn("virtiofs mount", "tag", m.Tag, "dir", m.Dir, "err", err)
			continue
		}
		log.Info("virtiofs mounted", "tag", m.Tag, "dir", m.Dir)
	}
}

// DropCaches has the kernel drop its clean caches (page cache, dentries
// and inodes), so that a machine saved now carries less. Zeroing the free
// memory as well was measured: it shrank a 512 MiB guest's state by a
// sixth, but took 20 s under TCG for a 2 GiB guest.
func DropCaches(log *slog.Logger) {
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		log.Debug("drop caches", "err", err)
	}
}
