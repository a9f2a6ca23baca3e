package cli

import (
	"context"
	"crypto/x509"
	"net"
)

// WithBuildNetwork has the builder VMs' requests (an environment's
// packages, its Compose services' images) reach their hosts by dial,
// verified against roots, instead of the host's DNS and roots (tests: a
// registry under its real host name).
func WithBuildNetwork(dial func(ctx context.Context, network, addr string) (net.Conn, error), roots *x509.CertPool) Option {
	return func(e *env) { e.buildDial, e.buildRoots = dial, roots }
}
