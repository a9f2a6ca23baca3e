package audit

import (
	"crypto/ed25519"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// fakeSecurity is a security(1) that keeps generic passwords as files in
// dir, answering as Apple's does: exit 44 for an item not found, 45 for a
// duplicate, commands on standard input with -i. It logs its arguments
// and input, so a test can see where the key travelled.
func fakeSecurity(t *testing.T) (prog, log string) {
	t.Helper()
	dir := t.TempDir()
	prog, log = filepath.Join(dir, "security"), filepath.Join(dir, "calls")
	script := `#!/bin/sh
store="` + dir + `/items"; mkdir -p "$store"
echo "args: $*" >> "` + log + `"
item() { printf '%s' "$1|$2" | od -An -tx1 | tr -d ' \n'; }
case "$1" in
find-generic-password)
  shift; s= a=
  while [ $# -gt 0 ]; do case "$1" in -s) s=$2; shift;; -a) a=$2; shift;; esac; shift; done
  f="$store/$(item "$s" "$a")"
  [ -f "$f" ] || { echo "security: SecKeychainSearchCopyNext: The specified item could not be found in the keychain." >&2; exit 44; }
  cat "$f"; echo ;;
-i)
  read -r line
  echo "stdin: $line" >> "` + log + `"
  printf 'security> '
  eval "set -- $line"
  shift; s= a= w=
  while [ $# -gt 0 ]; do case "$1" in -s) s=$2; shift;; -a) a=$2; shift;; -w) w=$2; shift;; esac; shift; done
  f="$store/$(item "$s" "$a")"
  if [ -f "$f" ]; then echo "security: SecKeychainItemCreateFromContent (<default>): The specified item already exists in the keychain."; exit 0; fi
  printf '%s' "$w" > "$f" ;;
*) echo "unexpected: $*" >&2; exit 2 ;;
esac
`
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return prog, log
}

func TestKeychainKeys(t *testing.T) {
	prog, log := fakeSecurity(t)
	k := KeychainKeys{Account: "/Users/me/Library/Application Support/Airlock", Program: prog}
	if runtime.GOOS == "darwin" && os.Getenv("AIRLOCK_KEYCHAIN_TEST") != "" {
		// The real login keychain, with an account of its own.
		k = KeychainKeys{Account: "airlock-test-" + t.Name() + "-" + filepath.Base(t.TempDir())}
		t.Cleanup(func() {
			exec.Command("/usr/bin/security", "delete-generic-password", "-s", KeychainService, "-a", k.Account).Run()
		})
	}
	if _, err := k.Public(); !errors.Is(err, ErrNoKey) {
		t.Fatalf("Public before any key: %v, want ErrNoKey", err)
	}
	// Two processes' worth of first uses agree on one key.
	var wg sync.WaitGroup
	keys := make([]ed25519.PrivateKey, 4)
	errs := make([]error, 4)
	for i := range keys {
		wg.Add(1)
		go func() { defer wg.Done(); keys[i], errs[i] = k.Signer() }()
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil {
			t.Fatalf("Signer %d: %v", i, errs[i])
		}
		if !keys[i].Equal(keys[0]) {
			t.Fatalf("Signer %d made another key", i)
		}
	}
	pub, err := k.Public()
	if err != nil || !pub.Equal(keys[0].Public()) {
		t.Fatalf("Public = %v, %v; want the signer's", pub, err)
	}
	if k.Program != prog {
		return
	}
	calls, _ := os.ReadFile(log)
	for _, l := range strings.Split(string(calls), "\n") {
		// The key is never an argument: only on standard input.
		if strings.HasPrefix(l, "args:") && strings.Contains(l, "-w ") && !strings.HasSuffix(l, "-w") {
			t.Errorf("the key was passed as an argument: %s", l)
		}
	}
	if !strings.Contains(string(calls), "stdin: add-generic-password") {
		t.Errorf("no key was added through standard input:\n%s", calls)
	}

	// A damaged item is a named error, never another key made silently.
	items, _ := filepath.Glob(filepath.Join(filepath.Dir(prog), "items", "*"))
	for _, f := range items {
		os.WriteFile(f, []byte("zz"), 0o600)
	}
	if _, err := k.Signer(); err == nil || !strings.Contains(err.Error(), "Keychain Access") {
		t.Errorf("a damaged key: %v, want an error saying what to do", err)
	}
	// A locked keychain says how to go on.
	locked := KeychainKeys{Account: "x", Program: "/bin/false"}
	if _, err := locked.Signer(); err == nil || !strings.Contains(err.Error(), "AIRLOCK_AUDIT_KEY=file") {
		t.Errorf("security failing: %v, want the way out", err)
	}
}
