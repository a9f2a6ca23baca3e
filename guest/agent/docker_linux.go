package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/guest"
)

// dockerControllers are the cgroup v2 controllers a Docker Engine's
// resource limits use.
var dockerControllers = []string{"cpu", "io", "memory", "pids"}

// cgroup2Magic is CGROUP2_SUPER_MAGIC.
const cgroup2Magic = 0x63677270

// PrepareDockerKernel readies the kernel for a Docker Engine: it loads
// the Docker modules the image carries (dockerModules), mounts
// cgroup v2 on /sys/fs/cgroup, turns on IP forwarding and bridged traffic
// through iptables, then checks every piece and returns a summary, or an
// error that names each missing piece and why. It needs root; running it
// again is harmless.
func PrepareDockerKernel() (string, error) {
	var missing []string
	list, err := dockerModules()
	switch {
	case err != nil:
		missing = append(missing, err.Error())
	case len(list) == 0:
		missing = append(missing, "Docker's kernel modules: this image carries none (it was built before Airlock did); rebuild it")
	}
	loadErrs := map[string]error{}
	for _, p := range list {
		if err := loadModule(p); err != nil {
			loadErrs[moduleName(p)] = err
		}
	}
	for _, m := range DockerModulesNeeded {
		if _, err := os.Stat("/sys/module/" + m); err == nil {
			continue
		}
		why := "not in this image's kernel"
		if err := loadErrs[m]; err != nil {
			why = "failed to load: " + err.Error()
		}
		missing = append(missing, fmt.Sprintf("kernel module %s (%s)", m, why))
	}
	if fs, err := os.ReadFile("/proc/filesystems"); err != nil || !slices.Contains(strings.Fields(string(fs)), "overlay") {
		missing = append(missing, "the overlay file system (Docker's storage driver)")
	}
	controllers, err := mountCgroup2()
	if err != nil {
		missing = append(missing, "cgroup v2 on /sys/fs/cgroup ("+err.Error()+")")
	} else {
		for _, c := range dockerControllers {
			if !slices.Contains(controllers, c) {
				missing = append(missing, "the cgroup v2 controller "+c+" (resource limits of containers)")
			}
		}
	}
	for _, s := range []string{"net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables"} {
		if err := os.WriteFile("/proc/sys/"+s, []byte("1\n"), 0); err != nil {
			missing = append(missing, fmt.Sprintf("sysctl %s (%v)", strings.ReplaceAll(s, "/", "."), errors.Unwrap(err)))
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("the kernel cannot run a Docker Engine; missing: %s", strings.Join(missing, "; "))
	}
	return fmt.Sprintf("ready for a Docker Engine: %d modules, cgroup v2 (%s), overlay, IP forwarding", len(list), strings.Join(controllers, " ")), nil
}

// dockerModules lists the Docker modules' files in load order: in the
// initramfs, or where its module directory is bound after a switch to a
// root disk (the list names them by their initramfs paths).
func dockerModules() ([]string, error) {
	dir := filepath.Dir(guest.DockerModulesOrder)
	if _, err := os.Stat(guest.InitramfsModules + "/" + filepath.Base(guest.DockerModulesOrder)); err == nil {
		dir = guest.InitramfsModules
	}
	list, err := readModuleList(dir + "/" + filepath.Base(guest.DockerModulesOrder))
	for i, p := range list {
		list[i] = filepath.Join(dir, filepath.Base(p))
	}
	return list, err
}

// mountCgroup2 mounts the cgroup v2 hierarchy on /sys/fs/cgroup unless it
// is there, and returns its controllers.
func mountCgroup2() ([]string, error) {
	const dir = "/sys/fs/cgroup"
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, err
	}
	if st.Type != cgroup2Magic {
		if err := unix.Mount("cgroup2", dir, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "nsdelegate"); err != nil {
			return nil, fmt.Errorf("mount: %w", err)
		}
	}
	b, err := os.ReadFile(dir + "/cgroup.controllers")
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

// ContainersCgroup is the cgroup every container of the VM's Docker
// Engine runs under (dockerd --cgroup-parent): its limits hold for all
// of them together, so that no container (a fork bomb, a leak) takes the
// PIDs or the memory the agent, the command and the guest link need.
const ContainersCgroup = "/airlock-containers"

// ContainersPIDs caps the processes and threads of all containers
// together: far more than a project's services use (a JVM's few hundred
// threads each), far fewer than the kernel's 32768.
const ContainersPIDs = 4096

// containersMemory is what the containers may use of memTotal: all but
// an eighth, and at least 256 MiB, kept for the rest of the VM (out of
// memory, the kernel kills inside the containers' cgroup first).
func containersMemory(memTotal int64) int64 {
	reserve := max(memTotal/8, 256<<20)
	return max(memTotal-reserve, 64<<20)
}

// limitContainers makes ContainersCgroup with its limits, and says them.
func limitContainers() (string, error) {
	const root = "/sys/fs/cgroup"
	// Controllers for the children of the root (which may hold
	// processes: it is exempt from cgroup v2's no-internal-process
	// rule), then for the containers' own.
	if err := os.WriteFile(root+"/cgroup.subtree_control", []byte("+cpu +io +memory +pids"), 0); err != nil {
		return "", fmt.Errorf("docker: enable the cgroup controllers: %w", err)
	}
	dir := root + ContainersCgroup
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("docker: %w", err)
	}
	mem, err := memTotal()
	if err != nil {
		return "", fmt.Errorf("docker: %w", err)
	}
	limit := containersMemory(mem)
	for file, v := range map[string]string{
		"pids.max":   strconv.Itoa(ContainersPIDs),
		"memory.max": strconv.FormatInt(limit, 10),
		// What runc enables below: each container's own limits.
		"cgroup.subtree_control": "+cpu +io +memory +pids",
	} {
		if err := os.WriteFile(dir+"/"+file, []byte(v), 0); err != nil {
			return "", fmt.Errorf("docker: limit the containers (%s): %w", file, err)
		}
	}
	return fmt.Sprintf("containers capped at %d processes and %d MiB", ContainersPIDs, limit>>20), nil
}

// memTotal is the VM's memory, from /proc/meminfo.
func memTotal() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/meminfo: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("/proc/meminfo has no MemTotal")
}
