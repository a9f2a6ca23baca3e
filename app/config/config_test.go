package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		file    string // "" means no file
		want    Project
		wantErr string
	}{
		{name: "no file"},
		{name: "excludes", file: "exclude = [\"*.log\", \"data/\"]\n", want: Project{Exclude: []string{"*.log", "data/"}}},
		{name: "unknown key", file: "exclud = [\"x\"]\n", wantErr: "unknown keys exclud"},
		{name: "empty pattern", file: "exclude = [\" \"]\n", wantErr: "exclude 1"},
		{name: "bad toml", file: "exclude = [\n", wantErr: "airlock.toml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.file != "" {
				if err := os.WriteFile(filepath.Join(dir, FileName), []byte(tt.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Load(dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load: error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Load (-want +got):\n%s", diff)
			}
		})
	}
}
