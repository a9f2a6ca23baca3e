package cli

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"

	"github.com/airlock-dev/airlock/vm/vz/vzconfig"
)

// virtualizationEntitlement lets a process use Virtualization.framework.
const virtualizationEntitlement = "com.apple.security.virtualization"

// macReport is what `airlock doctor` finds on a Mac (macHost, in
// doctor_darwin.go); the checks and output here are plain Go, tested on
// every OS.
type macReport struct {
	// Version is the macOS version; empty when it could not be read.
	Version string `json:"version"`
	// VersionError says why the version could not be read.
	VersionError string `json:"version_error,omitempty"`
	// Executable is the running airlock binary.
	Executable string `json:"executable"`
	// Entitled: the running binary is signed with the virtualization
	// entitlement. EntitlementDetail says how that was found out.
	Entitled          bool   `json:"virtualization_entitlement"`
	EntitlementDetail string `json:"entitlement_detail,omitempty"`
	// Rosetta is whether Rosetta for Linux can run x86-64 guest binaries.
	Rosetta vzconfig.RosettaState `json:"rosetta"`
	// Features are what this macOS version and CPU allow.
	Features []vzconfig.Feature `json:"features"`
}

// issues are the problems that stop VMs from running on this Mac, each
// with what to do.
func (m *macReport) issues() []string {
	var out []string
	if m.VersionError != "" {
		out = append(out, m.VersionError)
	} else if v, err := vzconfig.ParseOSVersion(m.Version); err == nil && !v.AtLeast(vzconfig.MinMacOS) {
		out = append(out, fmt.Sprintf("macOS %s is too old: Airlock needs macOS %s or later (update macOS)", v, vzconfig.MinMacOS))
	}
	if !m.Entitled {
		out = append(out, fmt.Sprintf("%s is not signed with the %s entitlement (%s), so macOS will refuse to start VMs; "+
			"sign it: codesign --force --sign - --entitlements packaging/airlock.entitlements %s (or use Airlock.app from packaging/build-macos.sh)",
			m.Executable, virtualizationEntitlement, m.EntitlementDetail, m.Executable))
	}
	return out
}

// printMac writes the Mac section of doctor's output.
func printMac(w io.Writer, m *macReport) {
	v := m.Version
	if v == "" {
		v = "unknown"
	}
	fmt.Fprintf(w, "macOS\t%s\n", v)
	ent := "yes"
	if !m.Entitled {
		ent = "NO"
	}
	if m.EntitlementDetail != "" {
		ent += " (" + m.EntitlementDetail + ")"
	}
	fmt.Fprintf(w, "  entitlement\t%s: %s\n", virtualizationEntitlement, ent)
	fmt.Fprintf(w, "  rosetta\t%s\n", m.Rosetta)
	for _, f := range m.Features {
		state := "yes"
		if !f.Allowed {
			state = "no"
		}
		if f.Needs != "" {
			state += ": " + f.Needs
		}
		fmt.Fprintf(w, "  feature\t%s: %s\n", f.Name, state)
	}
}

// entitlementFrom reads the output of
// `codesign -d --entitlements - --xml EXE` (and err, how it ended): whether
// the binary carries the virtualization entitlement, and a word on how
// that was found out.
func entitlementFrom(out []byte, err error) (bool, string) {
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			msg := strings.TrimSpace(string(ee.Stderr))
			if i := strings.LastIndex(msg, "\n"); i >= 0 {
				msg = msg[i+1:]
			}
			if strings.Contains(msg, "not signed") {
				return false, "the binary is not signed"
			}
			return false, "codesign: " + msg
		}
		return false, fmt.Sprintf("cannot run codesign: %v", err)
	}
	if hasEntitlement(out, virtualizationEntitlement) {
		return true, "codesign"
	}
	if len(strings.TrimSpace(string(out))) == 0 {
		return false, "signed without entitlements"
	}
	return false, "signed with other entitlements"
}

const (
	// <key>K</key><true/>, as --xml and older codesigns print it.
	xmlTrueRE = `<key>\s*%s\s*</key>\s*<true\s*/>`
	// [Key] K / [Value] / [Bool] true, as codesign prints it without --xml.
	textTrueRE = `\[Key\]\s*%s\s*\[Value\]\s*\[Bool\]\s*true`
)

// hasEntitlement reports whether codesign's display of a binary's
// entitlements, XML or text, sets key to true.
func hasEntitlement(out []byte, key string) bool {
	k := regexp.QuoteMeta(key)
	for _, re := range []string{xmlTrueRE, textTrueRE} {
		if regexp.MustCompile(fmt.Sprintf(re, k)).Match(out) {
			return true
		}
	}
	return false
}
