package guestbin

import (
	"context"
	"errors"
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
