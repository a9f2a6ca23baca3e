package envspec

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// valueFlags are the docker run flags that take a value as the next
// argument when it is not joined with '='.
var valueFlags = map[string]bool{
	"--cap-add": true, "--cap-drop": true, "--security-opt": true, "-v": true, "--volume": true, "--mount": true,
	"--add-host": true, "-e": true, "--env": true, "--env-file": true, "--network": true, "--net": true,
	"--device": true, "--ulimit": true, "--shm-size": true, "--name": true, "--label": true, "-l": true,
	"-p": true, "--publish": true, "-u": true, "--user": true, "--gpus": true, "-m": true, "--memory": true,
	"--cpus": true, "-h": true, "--hostname": true, "-w": true, "--workdir": true, "--entrypoint": true,
	"--platform": true, "--dns": true, "--tmpfs": true, "--ipc": true, "--pid": true, "--runtime": true,
	"--userns": true, "--cgroupns": true, "--sysctl": true, "--group-add": true, "--device-cgroup-rule": true,
}

// notNeededOpts are the --security-opt values that lift a container's
// confinement, which a VM does not have.
var notNeededOpts = map[string]bool{
	"seccomp=unconfined": true, "seccomp:unconfined": true,
	"apparmor=unconfined": true, "apparmor:unconfined": true,
	"label=disable": true, "label:disable": true,
}

// runArgs classifies devcontainer.json's runArgs (docker run's
// arguments; there is no docker run in a sandbox).
func (d *dc) runArgs() {
	raw, ok := d.doc["runArgs"]
	if !ok || string(raw) == "null" {
		return
	}
	var args []string
	if err := json.Unmarshal(raw, &args); err != nil {
		d.c.failf("runArgs", "want an array of strings")
		return
	}
	for i := 0; i < len(args); i++ {
		key := fmt.Sprintf("runArgs[%d]", i)
		if !d.c.text(key, args[i]) {
			continue
		}
		flag, value, joined := strings.Cut(args[i], "=")
		if !joined && valueFlags[flag] && i+1 < len(args) {
			i++
			value = args[i]
			d.c.text(key, value)
		}
		arg := strings.TrimSpace(flag + " " + value)
		kind := classifyArg(flag, value)
		d.env.RunArgs = append(d.env.RunArgs, RunArg{Arg: arg, Kind: kind})
		switch kind {
		case ArgNotNeeded:
			d.warn(key, true, "runArgs %q is not needed: a sandbox is a VM, which has what a container asks for this.", arg)
		case ArgDocker:
			d.env.Docker = true
			d.warn(key, true, "runArgs %q: the host's Docker is never shared with a sandbox; Docker runs inside the VM instead.", arg)
		case ArgVolume:
			d.warn(key, true, "runArgs %q is a named volume: its folder is on the sandbox's own disk, empty at first.", arg)
		case ArgHosts:
			d.addHost(key, arg, value)
		default:
			d.warn(key, false, "runArgs %q is ignored: there is no `docker run` in a sandbox.", arg)
		}
	}
	if n := len(d.env.AddHosts); n > MaxAddHosts {
		d.c.failf("runArgs", "%d --add-host entries, more than the %d a description may add to /etc/hosts", n, MaxAddHosts)
	}
}

// addHost reads one --add-host value into an /etc/hosts entry of every
// sandbox; a malformed one refuses the file.
func (d *dc) addHost(key, arg, value string) {
	h, err := ParseAddHost(value)
	if err != nil {
		d.c.failf(key, "--add-host %v", err)
		return
	}
	d.env.AddHosts = append(d.env.AddHosts, h)
	if strings.HasSuffix(value, HostGateway) {
		d.warn(key, true, "runArgs %q: %s is the VM itself (%s): a sandbox never reaches your machine, and what runs beside the agent runs in the VM.", arg, h.Name, h.IP)
	}
}

func classifyArg(flag, value string) ArgKind {
	switch flag {
	case "--add-host":
		return ArgHosts
	case "--privileged", "--init":
		return ArgNotNeeded
	case "--cap-add":
		if strings.EqualFold(strings.TrimPrefix(strings.ToUpper(value), "CAP_"), "SYS_PTRACE") {
			return ArgNotNeeded
		}
	case "--security-opt":
		if notNeededOpts[value] {
			return ArgNotNeeded
		}
	case "-v", "--volume":
		src, _, _ := strings.Cut(value, ":")
		return mountKind("", src)
	case "--mount":
		m := mountSpec(value)
		if m["type"] == "" {
			m["type"] = "volume" // docker's default
		}
		return mountKind(m["type"], m["source"])
	}
	return ArgIgnored
}

// mountKind is what a mount of source (a path or a volume's name) is
// in a sandbox. typ is "bind", "volume", "tmpfs" or empty (-v, where the
// source decides: a name is a volume, a path a bind).
func mountKind(typ, source string) ArgKind {
	switch {
	case isDockerSocket(source):
		return ArgDocker
	case typ == "volume" || typ == "tmpfs":
		return ArgVolume
	case typ == "" && source != "" && !strings.ContainsAny(source, "/\\$~") && !strings.HasPrefix(source, "."):
		return ArgVolume
	}
	return ArgIgnored
}

func isDockerSocket(p string) bool {
	p = path.Clean(p)
	return p == "/var/run/docker.sock" || p == "/run/docker.sock"
}

// mountSpec parses docker's --mount syntax (type=bind,source=…,target=…).
func mountSpec(s string) map[string]string {
	m := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k = strings.TrimSpace(k); k {
		case "src":
			k = "source"
		case "dst", "destination":
			k = "target"
		}
		m[k] = strings.TrimSpace(v)
	}
	return m
}

// mounts classifies devcontainer.json's mounts (a string in --mount
// syntax, or an object of type, source and target).
func (d *dc) mounts() {
	raw, ok := d.doc["mounts"]
	if !ok || string(raw) == "null" {
		return
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		d.c.failf("mounts", "want an array of mounts")
		return
	}
	for i, r := range list {
		key := fmt.Sprintf("mounts[%d]", i)
		m := map[string]string{}
		var s string
		if json.Unmarshal(r, &s) == nil {
			m = mountSpec(s)
		} else {
			var o struct{ Type, Source, Target string }
			if err := json.Unmarshal(r, &o); err != nil {
				d.c.failf(key, "want a string or an object of type, source and target")
				continue
			}
			m["type"], m["source"], m["target"] = o.Type, o.Source, o.Target
			s = fmt.Sprintf("type=%s,source=%s,target=%s", o.Type, o.Source, o.Target)
		}
		d.c.text(key, s)
		typ := m["type"]
		if typ == "" {
			typ = "volume" // docker's --mount default
		}
		switch mountKind(typ, m["source"]) {
		case ArgDocker:
			d.env.Docker = true
			d.warn(key, true, "mounts %q: the host's Docker is never shared with a sandbox; Docker runs inside the VM instead.", s)
		case ArgVolume:
			d.warn(key, true, "mounts %q is a volume: its folder is on the sandbox's own disk, empty at first.", s)
		default:
			d.warn(key, false, "mounts %q is not mounted: nothing of the host is mounted into a sandbox.", s)
		}
	}
}
