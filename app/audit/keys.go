package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/airlock-dev/airlock/internal/atomicfile"
)

// ErrNoKey means the home has no audit key yet: nothing was signed in it.
var ErrNoKey = errors.New("no audit key")

// Keys keeps the one Ed25519 key that signs an Airlock home's audit logs.
// FileKeys keeps it in a file; the Keychain on macOS would be another.
type Keys interface {
	// Signer returns the key, making it on first use.
	Signer() (ed25519.PrivateKey, error)
	// Public returns its public half, or ErrNoKey when there is none yet;
	// it never makes one.
	Public() (ed25519.PublicKey, error)
}

// KeyID names a public key for people and in every line it signs: the
// first 16 hex digits of its SHA-256.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// FileKeys keeps the key as a PKCS #8 PEM file (0600, in a 0700
// directory), $AIRLOCK_HOME/keys/audit.key.
type FileKeys struct{ Path string }

var _ Keys = FileKeys{}

// Signer reads the key, or makes it when the file does not exist. Two
// processes making it at once agree on one: the file appears whole by a
// hard link, which fails when another got there first, and then that one
// is read.
func (k FileKeys) Signer() (ed25519.PrivateKey, error) {
	key, err := k.read()
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if err := k.create(); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("make the audit key %s: %w", k.Path, err)
	}
	return k.read()
}

// Public reads the key's public half.
func (k FileKeys) Public() (ed25519.PublicKey, error) {
	key, err := k.read()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist", ErrNoKey, k.Path)
	}
	if err != nil {
		return nil, err
	}
	return key.Public().(ed25519.PublicKey), nil
}

func (k FileKeys) read() (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(k.Path)
	if err != nil {
		return nil, err
	}
	bad := func(why string) error {
		return fmt.Errorf("read the audit key %s: %s (move it away and a new key is made; logs it signed then read as signed by another key)", k.Path, why)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, bad("not a PEM private key")
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, bad(err.Error())
	}
	key, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return nil, bad("not an Ed25519 key")
	}
	return key, nil
}

func (k FileKeys) create() error {
	dir := filepath.Dir(k.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".audit.key.*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp, k.Path); err != nil {
		return err
	}
	return atomicfile.SyncDir(dir)
}
