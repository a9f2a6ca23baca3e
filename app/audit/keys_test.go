package audit

import (
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// The key is made on first use, 0600 in a 0700 directory, once even when
// several make it at once; Public never makes one.
func TestFileKeys(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	k := FileKeys{Path: filepath.Join(dir, "audit.key")}
	if _, err := k.Public(); !errors.Is(err, ErrNoKey) {
		t.Fatalf("Public before any key: %v, want ErrNoKey", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatal("Public made the keys directory")
	}
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key, err := k.Signer()
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = KeyID(key.Public().(ed25519.PublicKey))
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent first uses made different keys: %v", ids)
		}
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, k.Path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", p, fi.Mode().Perm(), err, want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries in keys/, want the key alone (no temporary file left)", len(ents))
	}
	pub, err := k.Public()
	if err != nil || KeyID(pub) != ids[0] {
		t.Errorf("Public: %v, %v", KeyID(pub), err)
	}
	os.WriteFile(k.Path, []byte("garbage"), 0o600)
	if _, err := k.Signer(); err == nil {
		t.Error("a garbage key file was used")
	}
}
