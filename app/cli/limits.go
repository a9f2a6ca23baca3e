package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/airlock-dev/airlock/app/config"
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
