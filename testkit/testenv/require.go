package testenv

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// RequireEnv names the capabilities whose absence fails a test instead of
// skipping it: a comma-separated list of Capability names, "all" for
// every one, and "-name" to take one out again ("all,-kvm"). CI sets it
// (scripts/test) to what its machine provides, so that a test it should
// run can never pass by skipping.
const RequireEnv = "AIRLOCK_TEST_REQUIRE"

// Capability is something of the host a test needs and may find missing.
type Capability string

// The capabilities tests skip without.
const (
	KVM         Capability = "kvm"          // /dev/kvm opens
	AMD64       Capability = "amd64"        // an amd64 host (tests boot amd64 kernels)
	Root        Capability = "root"         // running as root
	NonRoot     Capability = "nonroot"      // not root (permission tests; root reads anything)
	QEMU        Capability = "qemu"         // qemu-system-x86_64
	QEMUImg     Capability = "qemu-img"     // qemu-img and qemu-io (Debian: qemu-utils)
	Virtiofsd   Capability = "virtiofsd"    // /usr/lib/qemu/virtiofsd
	Mkfs        Capability = "mkfs"         // mkfs.ext4
	ForeignArch Capability = "foreign-arch" // dpkg offers arm64 packages on amd64 (and back)
	Git         Capability = "git"          // git
	Go          Capability = "go"           // the go command
	Unix        Capability = "unix"         // /bin/sh, tar, /etc/passwd, FIFOs
	Tmux        Capability = "tmux"         // tmux (a real terminal whose screen a test reads)
	Overlayfs   Capability = "overlayfs"    // root, and the kernel mounts an overlay (upper layer on tmpfs)
	Npm         Capability = "npm"          // npm, and the npm registry it reaches
	WasmClang   Capability = "wasm-clang"   // clang-14 and wasi-libc (scripts/build-parsers)
)

// Capabilities is every Capability, the meaning of "all".
var Capabilities = []Capability{KVM, AMD64, Root, NonRoot, QEMU, QEMUImg, Virtiofsd, Mkfs, ForeignArch, Git, Go, Unix, Tmux, Overlayfs, Npm, WasmClang}

// Skip skips a test that cannot run without c, saying why; when
// AIRLOCK_TEST_REQUIRE requires c, it fails the test instead.
func Skip(t testing.TB, c Capability, why string) {
	t.Helper()
	if Required(c) {
		t.Fatalf("%s (%s=%q requires %s)", why, RequireEnv, os.Getenv(RequireEnv), c)
	}
	t.Skip(why)
}

// Required says whether AIRLOCK_TEST_REQUIRE requires c.
func Required(c Capability) bool {
	return slices.Contains(parseRequire(os.Getenv(RequireEnv)), c)
}

// parseRequire is the list of capabilities spec requires.
func parseRequire(spec string) []Capability {
	var out []Capability
	for _, f := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == ' ' }) {
		switch {
		case f == "all":
			out = append(out, Capabilities...)
		case strings.HasPrefix(f, "-"):
			out = slices.DeleteFunc(out, func(c Capability) bool { return c == Capability(f[1:]) })
		default:
			out = append(out, Capability(f))
		}
	}
	return out
}
