//go:build cgo

package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/vz"
	"github.com/airlock-dev/airlock/vm/vz/vzconfig"
)

// macHost inspects this Mac for `airlock doctor`: the macOS version, the
// running binary's virtualization entitlement (as codesign shows it),
// Rosetta, and what this version allows.
func macHost(ctx context.Context) *macReport {
	m := &macReport{Rosetta: vz.Rosetta()}
	s, err := syscall.Sysctl("kern.osproductversion")
	if err == nil {
		var v vzconfig.OSVersion
		if v, err = vzconfig.ParseOSVersion(s); err == nil {
			m.Version = v.String()
			m.Features = vzconfig.Features(v, vm.Arch(runtime.GOARCH))
		}
	}
	if err != nil {
		m.VersionError = "read the macOS version (sysctl kern.osproductversion): " + err.Error()
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		m.EntitlementDetail = "cannot find the running binary: " + err.Error()
		return m
	}
	m.Executable = exe
	out, err := exec.CommandContext(ctx, "/usr/bin/codesign", "-d", "--entitlements", "-", "--xml", exe).Output()
	m.Entitled, m.EntitlementDetail = entitlementFrom(out, err)
	return m
}
