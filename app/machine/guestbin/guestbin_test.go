package guestbin

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestFindPrebuiltBesideExecutable(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "airlock")
	want := filepath.Join(dir, Name("arm64"))
	for _, p := range []string{exe, want} {
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Finder{Executable: exe, SourceDir: "/nonexistent"}.Find(context.Background(), "arm64")
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("Find = %q, want %q", got, want)
	}
}

func TestFindNothing(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "airlock")
	if err := os.WriteFile(exe, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	_, err := Finder{Executable: exe}.Find(context.Background(), "amd64")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Find = %v, want ErrNotFound", err)
	}
}

func TestIsSourceTree(t *testing.T) {
	dir := t.TempDir()
	if isSourceTree(dir) {
		t.Fatal("empty dir taken for the source tree")
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+Module+"\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !isSourceTree(dir) {
		t.Fatal("source tree not recognised")
	}
}

func TestWithin(t *testing.T) {
	for _, tt := range []struct {
		path, dir string
		want      bool
	}{
		{"/src/airlock/bin/airlock", "/src/airlock", true},
		{"/src/airlock", "/src/airlock", true},
		{"/usr/local/bin/airlock", "/src/airlock", false},
		{"/src/airlock-old/bin/airlock", "/src/airlock", false},
		{"/src/..airlock", "/src", true},
	} {
		if got := within(tt.path, tt.dir); got != tt.want {
			t.Errorf("within(%q, %q) = %v, want %v", tt.path, tt.dir, got, tt.want)
		}
	}
}

// A guest built from source is the same binary for the same source,
// whatever go env holds: images record the guest agent's hash, so one
// stamped with the commit (go's default in a git checkout, which a go env
// file's GOFLAGS may or may not turn off) would rebuild them for nothing.
func TestBuildIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the guest agent twice")
	}
	src, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if !isSourceTree(src) {
		t.Fatalf("%s is not the Airlock source tree", src)
	}
	var sums []string
	for _, env := range []string{"", t.TempDir()} {
		// This machine's go env, then an empty XDG_CONFIG_HOME and
		// GOFLAGS: no go env file and no flags, go's defaults (VCS
		// stamping on).
		if env != "" {
			t.Setenv("XDG_CONFIG_HOME", env)
			t.Setenv("GOFLAGS", "")
		}
		p, err := Finder{Executable: "/nonexistent/airlock", SourceDir: src, BuildDir: t.TempDir()}.Find(t.Context(), "amd64")
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, fmt.Sprintf("%x", sha256.Sum256(b)))
	}
	if sums[0] != sums[1] {
		t.Errorf("the guest agent built with this machine's go env (%.12s) differs from the one built with go's defaults (%.12s)", sums[0], sums[1])
	}
}
