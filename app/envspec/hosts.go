package envspec

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// HostEntry is one line Airlock adds to the guest's /etc/hosts as each
// sandbox starts: devcontainer.json's runArgs --add-host NAME:IP.
type HostEntry struct {
	// Name is a host name: dot-separated labels of letters, digits, '-'
	// and '_', never an address.
	Name string `json:"name"`
	// IP is the address in its canonical form (netip's), never with a
	// zone. host-gateway is the VM's own loopback, 127.0.0.1.
	IP string `json:"ip"`
}

// Line is the entry as /etc/hosts holds it.
func (h HostEntry) Line() string { return h.IP + " " + h.Name }

// MaxAddHosts caps the --add-host entries of one description: a
// devcontainer.json asks for a handful; more is refused, not written.
const MaxAddHosts = 64

// HostGateway is docker's --add-host address for the host's gateway.
// The host is never reachable from a sandbox: the name is the VM itself.
const HostGateway = "host-gateway"

// hostLabel is one label of a host name: letters, digits, '-' and '_',
// neither first nor last a '-', at most 63 characters.
var hostLabel = regexp.MustCompile(`^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$`)

// ParseAddHost reads docker's --add-host value: NAME:IP or NAME=IP, the
// address IPv4 or IPv6 (in brackets or not), or host-gateway (the VM's
// own loopback). It is hostile input: anything else is refused, so what
// reaches /etc/hosts is one name and one address, nothing that could be
// a second line or a second field.
func ParseAddHost(v string) (HostEntry, error) {
	i := strings.IndexAny(v, ":=")
	if i < 0 {
		return HostEntry{}, fmt.Errorf("%q: want NAME:IP (\"db:10.0.0.5\", \"host.docker.internal:host-gateway\")", v)
	}
	name, addr := v[:i], v[i+1:]
	if err := CheckHostName(name); err != nil {
		return HostEntry{}, fmt.Errorf("%q: %w", v, err)
	}
	if addr == HostGateway {
		return HostEntry{Name: name, IP: "127.0.0.1"}, nil
	}
	if strings.HasPrefix(addr, "[") && strings.HasSuffix(addr, "]") {
		addr = addr[1 : len(addr)-1]
	}
	ip, err := checkHostIP(addr)
	if err != nil {
		return HostEntry{}, fmt.Errorf("%q: %w", v, err)
	}
	return HostEntry{Name: name, IP: ip}, nil
}

// CheckHostName reports whether name is a host name /etc/hosts may hold:
// at most 253 characters of dot-separated labels (hostLabel), not an
// address.
func CheckHostName(name string) error {
	if name == "" || len(name) > 253 {
		return fmt.Errorf("the host name %q: want 1 to 253 characters", name)
	}
	for _, l := range strings.Split(name, ".") {
		if !hostLabel.MatchString(l) {
			return fmt.Errorf("the host name %q: want labels of letters, digits, '-' and '_' separated by dots, each 1 to 63 characters, none starting or ending with '-'", name)
		}
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return fmt.Errorf("the host name %q is an address", name)
	}
	return nil
}

// checkHostIP is addr in its canonical form, or why it is not an
// address /etc/hosts may hold (no zone: it would name the guest's
// interfaces, and it is text /etc/hosts does not take).
func checkHostIP(addr string) (string, error) {
	ip, err := netip.ParseAddr(addr)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q is not an IP address or host-gateway", addr)
	case ip.Zone() != "":
		return "", fmt.Errorf("%q has a zone; want an address without one", addr)
	}
	return ip.String(), nil
}

// CheckHostEntry reports whether h is an entry ParseAddHost could have
// made: for a reader of an entry kept elsewhere (sandbox.json), before
// it is written into a guest.
func CheckHostEntry(h HostEntry) error {
	if err := CheckHostName(h.Name); err != nil {
		return err
	}
	ip, err := checkHostIP(h.IP)
	if err != nil {
		return err
	}
	if ip != h.IP {
		return fmt.Errorf("%q is not an address in its canonical form (%s)", h.IP, ip)
	}
	return nil
}
