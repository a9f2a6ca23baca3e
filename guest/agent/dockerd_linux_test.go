package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The daemon gets a fixed PATH and the proxy variables, nothing else of
// the command's environment (no placeholder of a secret, no HOME).
func TestDockerEnv(t *testing.T) {
	got := dockerEnv([]string{"HTTPS_PROXY=http://127.0.0.1:3128", "ANTHROPIC_API_KEY=airlock-placeholder", "SSL_CERT_FILE=/etc/airlock/ca-bundle.pem",
		"PATH=/evil", "no_proxy=localhost", "HTTPS_PROXYX=no"})
	want := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HTTPS_PROXY=http://127.0.0.1:3128",
		"SSL_CERT_FILE=/etc/airlock/ca-bundle.pem", "no_proxy=localhost"}
	if !slices.Equal(got, want) {
		t.Errorf("dockerEnv = %q, want %q", got, want)
	}
}

// logTail reads only the end of a log, however long it is.
func TestLogTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(p, []byte(strings.Repeat("x", 10000)+"the end\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := logTail(p, 8); got != "the end" {
		t.Errorf("logTail = %q", got)
	}
	if got := logTail(filepath.Join(t.TempDir(), "none"), 8); !strings.Contains(got, "no such file") {
		t.Errorf("logTail of a missing file = %q", got)
	}
}
