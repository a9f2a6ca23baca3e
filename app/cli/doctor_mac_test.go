package cli

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/vz/vzconfig"
)

func TestHasEntitlement(t *testing.T) {
	const xmlYes = `<?xml version="1.0" encoding="UTF-8"?><!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "https://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0"><dict><key>com.apple.security.virtualization</key><true/></dict></plist>`
	const textYes = "[Dict]\n\t[Key] com.apple.security.network.client\n\t[Value]\n\t\t[Bool] true\n" +
		"\t[Key] com.apple.security.virtualization\n\t[Value]\n\t\t[Bool] true\n"
	for _, tt := range []struct {
		name, out string
		want      bool
	}{
		{"xml", xmlYes, true},
		{"xml indented", "<dict>\n\t<key>com.apple.security.virtualization</key>\n\t<true/>\n</dict>", true},
		{"text", textYes, true},
		{"xml false", strings.Replace(xmlYes, "<true/>", "<false/>", 1), false},
		{"text false", strings.Replace(textYes, "virtualization\n\t[Value]\n\t\t[Bool] true", "virtualization\n\t[Value]\n\t\t[Bool] false", 1), false},
		{"other key", strings.Replace(xmlYes, "virtualization", "network.client", 1), false},
		{"prefix of another key", strings.Replace(xmlYes, "virtualization<", "virtualization.extra<", 1), false},
		{"empty", "", false},
	} {
		if got := hasEntitlement([]byte(tt.out), virtualizationEntitlement); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestEntitlementFrom(t *testing.T) {
	unsigned := &exec.ExitError{Stderr: []byte("/tmp/airlock: code object is not signed at all\n")}
	for _, tt := range []struct {
		out    string
		err    error
		ok     bool
		detail string
	}{
		{"<key>com.apple.security.virtualization</key><true/>", nil, true, "codesign"},
		{"", nil, false, "signed without entitlements"},
		{"<key>com.apple.security.cs.allow-jit</key><true/>", nil, false, "signed with other entitlements"},
		{"", unsigned, false, "the binary is not signed"},
		{"", &exec.ExitError{Stderr: []byte("Executable=/x\nsomething odd\n")}, false, "codesign: something odd"},
		{"", errors.New("exec: \"codesign\": not found"), false, "cannot run codesign: exec: \"codesign\": not found"},
	} {
		ok, detail := entitlementFrom([]byte(tt.out), tt.err)
		if ok != tt.ok || detail != tt.detail {
			t.Errorf("entitlementFrom(%q, %v) = %v, %q; want %v, %q", tt.out, tt.err, ok, detail, tt.ok, tt.detail)
		}
	}
}

func TestMacReport(t *testing.T) {
	v := vzconfig.OSVersion{Major: 14, Minor: 5}
	m := &macReport{
		Version: v.String(), Executable: "/Users/me/airlock",
		Entitled: false, EntitlementDetail: "signed without entitlements",
		Rosetta: vzconfig.RosettaInstalled, Features: vzconfig.Features(v, vm.ARM64),
	}
	issues := m.issues()
	if len(issues) != 1 || !strings.Contains(issues[0], "codesign --force --sign - --entitlements packaging/airlock.entitlements /Users/me/airlock") {
		t.Errorf("issues = %q, want one saying how to sign", issues)
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	printMac(tw, m)
	tw.Flush()
	for _, want := range []string{
		"macOS          14.5\n",
		"  entitlement  com.apple.security.virtualization: NO (signed without entitlements)\n",
		"  rosetta      installed\n",
		"  feature      save and restore machine state (warm starts, checkpoints): yes\n",
		"  feature      nested virtualization in guests: no: macOS 15.0 or later (this Mac runs 14.5)\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}

	m.Entitled, m.Version = true, "12.7"
	if issues := m.issues(); len(issues) != 1 || !strings.Contains(issues[0], "macOS 12.7 is too old") {
		t.Errorf("issues on macOS 12.7 = %q", issues)
	}
	m.Version, m.VersionError = "", "read the macOS version: boom"
	if issues := m.issues(); len(issues) != 1 || issues[0] != m.VersionError {
		t.Errorf("issues without a version = %q", issues)
	}
}
