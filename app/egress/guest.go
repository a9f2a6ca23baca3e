package egress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
)

// Where the sandbox's CA goes in the guest: the certificate alone, and a
// bundle of the guest's system roots with it (tools that take one file
// replace their roots with it, and tunnelled hosts still need the real
// roots).
const (
	GuestCAPath     = "/etc/airlock/ca.pem"
	GuestBundlePath = "/etc/airlock/ca-bundle.pem"
)

// guestSystemBundle is Debian's system trust store in the guest. The CA is
// appended to it when it exists.
const guestSystemBundle = "/etc/ssl/certs/ca-certificates.crt"

// CAEnv is the environment that makes common tools trust the sandbox's
// CA: OpenSSL and Go (SSL_CERT_FILE), Node (NODE_EXTRA_CA_CERTS, which
// adds to its roots), Python requests, curl and git.
func CAEnv() map[string]string {
	return map[string]string{
		"SSL_CERT_FILE":       GuestBundlePath,
		"NODE_EXTRA_CA_CERTS": GuestCAPath,
		"REQUESTS_CA_BUNDLE":  GuestBundlePath,
		"CURL_CA_BUNDLE":      GuestBundlePath,
		"GIT_SSL_CAINFO":      GuestBundlePath,
	}
}

// ExecFunc runs a shell script in the guest with stdin.
type ExecFunc func(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error

// InstallCA writes the CA certificate into the guest (GuestCAPath), makes
// the bundle (GuestBundlePath) and appends the CA to the guest's system
// trust store when it has one.
func InstallCA(ctx context.Context, exec ExecFunc, ca *CA) error {
	script := strings.Join([]string{
		"set -e",
		"mkdir -p /etc/airlock",
		"cat > " + GuestCAPath,
		"if [ -f " + guestSystemBundle + " ]; then cat " + GuestCAPath + " >> " + guestSystemBundle + "; cat " + guestSystemBundle + " > " + GuestBundlePath + "; else cat " + GuestCAPath + " > " + GuestBundlePath + "; fi",
		"chmod 0644 " + GuestCAPath + " " + GuestBundlePath,
	}, "\n")
	var stderr bytes.Buffer
	if err := exec(ctx, script, bytes.NewReader(ca.CertPEM()), io.Discard, &stderr); err != nil {
		return fmt.Errorf("install the sandbox CA in the guest: %w (%s)", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
