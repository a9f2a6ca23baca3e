package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// KeychainService is the service name of the audit keys' Keychain items.
const KeychainService = "Airlock audit key"

// KeychainKeys keeps the key in the user's login Keychain on macOS, as a
// generic password (the hex of its PKCS #8 DER: one printable line, which
// security(1) prints back as it was) of service KeychainService and
// account Account (the home's path: one key per home), through Apple's
// security(1). A process of the user may still read it, as it may read a
// file; what the Keychain adds is that the key is not in the home, so a
// copy or backup of the home, or a process confined to it, has the logs
// without the key that could re-sign them.
type KeychainKeys struct {
	Account string
	// Program is security(1); empty means /usr/bin/security.
	Program string
}

var _ Keys = KeychainKeys{}

// Keychain item errors of security(1), by exit status.
const (
	securityNotFound = 44 // errSecItemNotFound
	securityExists   = 45 // errSecDuplicateItem
)

func (k KeychainKeys) program() string {
	if k.Program != "" {
		return k.Program
	}
	return "/usr/bin/security"
}

// Signer reads the key, or makes it when the Keychain has none. Two
// processes making it at once agree on one: adding fails for the second,
// which then reads the first's.
func (k KeychainKeys) Signer() (ed25519.PrivateKey, error) {
	key, err := k.read()
	if !errors.Is(err, ErrNoKey) {
		return key, err
	}
	_, key, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	// The key goes to security(1) on its standard input (its -i mode
	// reads commands there), never in an argument anyone could list.
	// security's own quoting: double quotes, backslash escapes.
	quote := func(s string) string {
		return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
	}
	cmd := exec.Command(k.program(), "-i")
	cmd.Stdin = strings.NewReader(fmt.Sprintf("add-generic-password -s %s -a %s -l %s -w %s\n",
		quote(KeychainService), quote(k.Account), quote(KeychainService), quote(hex.EncodeToString(der))))
	// In -i mode security exits 0 whatever its command did: what it
	// says is the verdict. Another process's key already there is not a
	// failure: that one is read.
	out, err := cmd.CombinedOutput()
	out = bytes.ReplaceAll(out, []byte("security> "), nil) // its prompt
	if msg := strings.TrimSpace(string(out)); (err != nil || msg != "") && code(err) != securityExists && !strings.Contains(msg, "already exists") {
		return nil, k.failed("add", out, err)
	}
	return k.read()
}

// Public reads the key's public half.
func (k KeychainKeys) Public() (ed25519.PublicKey, error) {
	key, err := k.read()
	if err != nil {
		return nil, err
	}
	return key.Public().(ed25519.PublicKey), nil
}

func (k KeychainKeys) read() (ed25519.PrivateKey, error) {
	var out, errOut bytes.Buffer
	cmd := exec.Command(k.program(), "find-generic-password", "-s", KeychainService, "-a", k.Account, "-w")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		if code(err) == securityNotFound {
			return nil, fmt.Errorf("%w: the Keychain has none for %s", ErrNoKey, k.Account)
		}
		return nil, k.failed("read", errOut.Bytes(), err)
	}
	der, err := hex.DecodeString(strings.TrimSpace(out.String()))
	if err != nil {
		return nil, k.bad("not hexadecimal")
	}
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, k.bad(err.Error())
	}
	key, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return nil, k.bad("not an Ed25519 key")
	}
	return key, nil
}

func (k KeychainKeys) bad(why string) error {
	return fmt.Errorf("read the audit key from the Keychain (%q, account %s): %s (delete it in Keychain Access and a new key is made; logs it signed then read as signed by another key)",
		KeychainService, k.Account, why)
}

func (k KeychainKeys) failed(what string, out []byte, err error) error {
	msg := strings.TrimSpace(string(out))
	if msg == "" && err != nil {
		msg = err.Error()
	}
	return fmt.Errorf("%s the audit key in the Keychain (%q, account %s): %s; unlock the login keychain, or set AIRLOCK_AUDIT_KEY=file to keep the key in the Airlock home",
		what, KeychainService, k.Account, msg)
}

// code is a command's exit status, -1 when it did not exit.
func code(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
