package cli

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/pflag"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/vm"
)

// memoryFlag is --memory: a size (2G, 512M), or a bare number of MiB as
// the flag always took.
type memoryFlag struct{ config.Size }

func (m *memoryFlag) Set(v string) error {
	if v = strings.TrimSpace(v); v != "" && strings.Trim(v, "0123456789") == "" {
		v += "M"
	}
	return m.Size.Set(v)
}

var _ pflag.Value = (*memoryFlag)(nil)

// limitFlags are the limit flags of a command; zero values are not given.
type limitFlags struct {
	disk         config.Size
	timeout      config.Duration
	maxPullBytes config.Size
	maxFiles     int
	maxFileSize  config.Size
}

// registerTimeout adds --timeout, whose default comes from the
// configuration.
func (l *limitFlags) registerTimeout(fl *pflag.FlagSet, what string) {
	fl.Var(&l.timeout, "timeout", what+" (default: [limits] timeout, "+config.DefaultLimits().Timeout.String()+"; none for no limit)")
}

// registerRun adds the flags only run has: the workspace disk and the
// caps on what is collected.
func (l *limitFlags) registerRun(fl *pflag.FlagSet) {
	d := config.DefaultLimits()
	fl.Var(&l.disk, "disk", "size of the VM's own disk for /workspace, its quota (default: [limits] disk, "+d.Disk.String()+"; none keeps /workspace in memory)")
	fl.Var(&l.maxPullBytes, "max-pull-bytes", "cap on the bytes of the files collected from /workspace (default: [limits] max_pull_bytes, "+d.MaxPullBytes.String()+")")
	fl.IntVar(&l.maxFiles, "max-files", 0, fmt.Sprintf("cap on the files collected from /workspace (default: [limits] max_files, %d)", d.MaxFiles))
	fl.Var(&l.maxFileSize, "max-file-size", "cap on one collected file (default: [limits] max_file_size, "+d.MaxFileSize.String()+")")
}

// resolveLimits merges Airlock's defaults, the user's config.toml, the
// project's airlock.toml (which may only narrow; project is empty for a
// command without one) and the flags, and tells the user what was ignored.
func (e *env) resolveLimits(project string, b *bootFlags, l *limitFlags) (config.Effective, error) {
	src := config.Sources{
		Flags: config.Limits{
			CPUs: b.cpus, Memory: b.memory.Size, Disk: l.disk, Timeout: l.timeout,
			MaxPullBytes: l.maxPullBytes, MaxFiles: l.maxFiles, MaxFileSize: l.maxFileSize,
		},
		OpenNetworkFlag: b.openNetwork,
		HostCPUs:        runtime.NumCPU(),
		// The trust-confirmation mechanism plugs in here
		// (config.Sources.ConfirmWiden); until then a project file only
		// narrows.
		ConfirmWiden: nil,
	}
	path, err := config.UserPath(os.Getenv)
	if err != nil {
		return config.Effective{}, err
	}
	if src.User, err = config.LoadUser(path); err != nil {
		return config.Effective{}, err
	}
	if project != "" {
		if src.Project, err = config.Load(project); err != nil {
			return config.Effective{}, err
		}
	}
	eff, err := config.Resolve(src)
	if err != nil {
		return config.Effective{}, err
	}
	for _, n := range eff.Notes {
		e.note("%s", n)
	}
	return eff, nil
}

// applyLimits sizes the machine of a launch.
func applyLimits(b *bootFlags, eff config.Effective) {
	b.cpus, b.memory.Size = eff.Limits.CPUs, eff.Limits.Memory
	b.network = vm.NetworkNone
	if eff.OpenNetwork {
		b.network = vm.NetworkNAT
	}
}

// manifestLimits are the caps of eff as the collect step takes them.
func manifestLimits(l config.Limits) manifest.Limits {
	return manifest.Limits{MaxTotalBytes: int64(l.MaxPullBytes), MaxEntries: l.MaxFiles, MaxFileSize: int64(l.MaxFileSize)}
}

// openNetworkWarning is printed when a VM gets an open network.
const openNetworkWarning = "WARNING: open network: this VM can reach the internet and your local network directly, " +
	"with no proxy, no allow-list and no request log (--open-network / open_network)"

// warnOpenNetwork prints the open-network warning on stderr, even with
// --quiet (only --json, which carries it as a field, leaves it out).
func (e *env) warnOpenNetwork() {
	if e.json {
		return
	}
	fmt.Fprintln(e.stderr, "airlock: "+openNetworkWarning)
}
