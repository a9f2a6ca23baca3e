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
		{
			name: "network",
			file: "[network]\nallow = [\"github.com\"]\ndeny = [\"gist.github.com\"]\n[[network.host]]\nhost = \"api.github.com\"\nmethods = [\"GET\"]\n",
			want: Project{Network: Network{Allow: []string{"github.com"}, Deny: []string{"gist.github.com"}, Host: []HostRule{{Host: "api.github.com", Methods: []string{"GET"}}}}},
		},
		{
			name: "environment",
			file: "[environment]\nimage = \"golang:1.24\"\napt = [\"make\"]\nsetup = [\"go version\"]\nuser = \"dev\"\nhosts = [\"proxy.golang.org\"]\n[environment.env]\nGOFLAGS = \"-mod=mod\"\n",
			want: Project{Environment: &Environment{
				Image: "golang:1.24", Apt: []string{"make"}, Setup: []string{"go version"},
				Env: map[string]string{"GOFLAGS": "-mod=mod"}, User: "dev", Hosts: []string{"proxy.golang.org"},
			}},
		},
		{name: "empty environment", file: "[environment]\n", want: Project{Environment: &Environment{}}},
		{name: "environment typo", file: "[environment]\nimgae = \"x\"\n", wantErr: "unknown keys environment.imgae (known: "},
		{name: "environment typo names the keys", file: "[environment]\nimgae = \"x\"\n", wantErr: "[environment] image, dockerfile, context, args, target, docker, apt, setup, env, user, hosts"},
		{name: "environment env not a string", file: "[environment.env]\nN = 1\n", wantErr: "airlock.toml"},
		{
			name:    "bad network, every problem",
			file:    "[network]\nallow = [\"*\", \"a.com:0\"]\n[[network.secret]]\nhost = \"*.x.com\"\nheader = \"bad header\"\nenv = \"K\"\n",
			wantErr: "wildcard",
		},
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
			if (tt.file != "") != (len(got.SHA256) == 64) {
				t.Errorf("SHA256 %q for file %q", got.SHA256, tt.file)
			}
			got.SHA256 = ""
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Load (-want +got):\n%s", diff)
			}
		})
	}
}
