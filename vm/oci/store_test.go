package oci

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// A blob made here is hashed as it is written: its digest is its
// content's, it is kept read-only under that digest, the same content
// twice is one blob, and nothing is left of an aborted one.
func TestNewBlob(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	content := bytes.Repeat([]byte("layer bytes\n"), 100000)
	sum := sha256.Sum256(content)
	want := hex.EncodeToString(sum[:])
	for range 2 {
		bw, err := s.NewBlob()
		if err != nil {
			t.Fatal(err)
		}
		for rest := content; len(rest) > 0; {
			n := min(len(rest), 4093)
			if _, err := bw.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		d, n, err := bw.Commit()
		if err != nil {
			t.Fatal(err)
		}
		if d.Algorithm != "sha256" || d.Hex != want || n != int64(len(content)) {
			t.Fatalf("committed %s, %d bytes; want sha256:%s, %d", d, n, want, len(content))
		}
		got, err := os.ReadFile(s.Path(d))
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("the kept blob: %v, %d bytes", err, len(got))
		}
		if fi, _ := os.Stat(s.Path(d)); fi.Mode().Perm() != 0o400 {
			t.Errorf("the kept blob's mode is %v", fi.Mode())
		}
	}
	bw, err := s.NewBlob()
	if err != nil {
		t.Fatal(err)
	}
	bw.Write([]byte("half a layer"))
	bw.Abort()
	entries, _ := os.ReadDir(filepath.Join(s.Dir, "blobs", "sha256"))
	if len(entries) != 1 || entries[0].Name() != want {
		t.Errorf("the store holds %v, want only %s", entries, want)
	}
}
