package home

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestDirFor(t *testing.T) {
	userHome := func() (string, error) { return "/home/ada", nil }
	tests := []struct {
		name string
		goos string
		env  map[string]string
		want string
	}{
		{"linux default", "linux", nil, "/home/ada/.local/share/airlock"},
		{"linux xdg", "linux", map[string]string{"XDG_DATA_HOME": "/data"}, "/data/airlock"},
		{"linux relative xdg ignored", "linux", map[string]string{"XDG_DATA_HOME": "rel"}, "/home/ada/.local/share/airlock"},
		{"darwin default", "darwin", nil, "/home/ada/Library/Application Support/Airlock"},
		{"override", "darwin", map[string]string{Env: "/srv/airlock"}, "/srv/airlock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dirFor(tt.goos, func(k string) string { return tt.env[k] }, userHome)
			if err != nil {
				t.Fatal(err)
			}
			if got != filepath.FromSlash(tt.want) {
				t.Errorf("dirFor = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDirForNoHome(t *testing.T) {
	_, err := dirFor("linux", func(string) string { return "" }, func() (string, error) { return "", errors.New("no $HOME") })
	if err == nil {
		t.Fatal("want an error without a home directory")
	}
}
