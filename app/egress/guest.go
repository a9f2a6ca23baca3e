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
func CAEnv() map[string]string { return caEnv(GuestCAPath, GuestBundlePath) }

// BuildCADir is where a builder VM keeps the CA (InstallBuildCA): on
// /run, a tmpfs, so that no trace of it reaches the layer the build keeps.
const BuildCADir = "/run/airlock-build"

// BuildCAEnv is CAEnv for a builder VM's CA (InstallBuildCA).
func BuildCAEnv() map[string]string {
	return caEnv(BuildCADir+"/ca.pem", BuildCADir+"/ca-bundle.pem")
}

func caEnv(ca, bundle string) map[string]string {
	return map[string]string{
		"SSL_CERT_FILE":       bundle,
		"NODE_EXTRA_CA_CERTS": ca,
		"REQUESTS_CA_BUNDLE":  bundle,
		"CURL_CA_BUNDLE":      bundle,
		"GIT_SSL_CAINFO":      bundle,
	}
}

// InstallBuildCA is InstallCA for a builder VM: the certificate and a
// bundle of the system roots with it go to BuildCADir (a tmpfs), and the
// system trust store is left as it is, so the image built keeps no trust
// in a CA whose key is gone.
func InstallBuildCA(ctx context.Context, exec ExecFunc, ca *CA) error {
	ca1, bundle := BuildCADir+"/ca.pem", BuildCADir+"/ca-bundle.pem"
	script := strings.Join([]string{
		"set -e",
		"mkdir -p " + BuildCADir,
		"cat > " + ca1,
		"if [ -f " + guestSystemBundle + " ]; then cat " + guestSystemBundle + " " + ca1 + " > " + bundle + "; else cat " + ca1 + " > " + bundle + "; fi",
		"chmod 0644 " + ca1 + " " + bundle,
	}, "\n")
	var stderr bytes.Buffer
	if err := exec(ctx, script, bytes.NewReader(ca.CertPEM()), io.Discard, &stderr); err != nil {
		return fmt.Errorf("install the build's CA in the guest: %w (%s)", err, strings.TrimSpace(stderr.String()))
	}
	return nil
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
