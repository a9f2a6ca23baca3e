package agent

import (
	"slices"
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
