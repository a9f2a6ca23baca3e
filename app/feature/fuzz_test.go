package feature

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/testkit/ocitest"
)

// FuzzRead feeds Read layers a registry could send: it must never panic,
// and what it accepts is inside the feature, has install.sh and
// metadata, and survives being re-made by Tar.
func FuzzRead(f *testing.F) {
	f.Add(ocitest.Tar(f, good()...))
	f.Add(oversize())
	f.Add([]byte{0x1f, 0x8b, 0, 0})
	f.Fuzz(func(t *testing.T, layer []byte) {
		files, m, err := Read(layer)
		if err != nil {
			return
		}
		if m == nil || m.ID == "" {
			t.Fatalf("accepted metadata without an id: %+v", m)
		}
		for _, fl := range files {
			if strings.HasPrefix(fl.Name, "/") || fl.Name == ".." || strings.HasPrefix(fl.Name, "../") || strings.Contains(fl.Name, "/../") {
				t.Fatalf("accepted %q", fl.Name)
			}
		}
		b, err := Tar(files)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := Read(b); err != nil {
			t.Fatalf("the re-made tar does not read: %v", err)
		}
	})
}
