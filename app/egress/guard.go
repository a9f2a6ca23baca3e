package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// The address guard: a host name the policy allows (often through a
// wildcard whose DNS someone else controls) must not lead to the host
// itself or its neighbourhood: loopback, the host's own interface
// addresses, private and shared ranges (the user's LAN, services bound to
// 0.0.0.0), link-local and unique local addresses (cloud metadata
// services), and what embeds one of them (NAT64, 6to4). The proxy resolves
// each name once, checks every address, and dials exactly the addresses
// that passed, for CONNECT tunnels, intercepted hosts and plain HTTP
// alike, so that a second answer from DNS (rebinding) is never used. An
// address the guest asked for by itself is not checked: only a rule
// spelling it out lets the policy allow it; and a name resolving to an
// address that an Allow rule spells out is let through.

// guardError is a refusal of the address guard: every address host
// resolved to was one a name must not lead to.
type guardError struct {
	host    string
	refused []refusal
}

type refusal struct {
	addr netip.Addr
	why  string
}

func (e *guardError) Error() string {
	var parts []string
	for _, r := range e.refused {
		parts = append(parts, fmt.Sprintf("%s, %s", r.addr, r.why))
	}
	return fmt.Sprintf("%s resolves to %s; a host name never leads there, so that an allowed name whose DNS someone else controls cannot reach this computer or its network",
		e.host, strings.Join(parts, "; and to "))
}

// Ranges a host name must not resolve to, with the words that say why.
var guardedRanges = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `the "this network" range 0.0.0.0/8, which reaches the host itself`},
	{netip.MustParsePrefix("127.0.0.0/8"), "the host's own loopback"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private (RFC 1918) address, as on the host's LAN"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private (RFC 1918) address, as on the host's LAN"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private (RFC 1918) address, as on the host's LAN"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT, RFC 6598) address, where some clouds keep their metadata service (100.100.100.200)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address, where cloud metadata services live (169.254.169.254)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved or broadcast address"},
	{netip.MustParsePrefix("::1/128"), "the host's own loopback"},
	{netip.MustParsePrefix("::/96"), "the unspecified address or a deprecated IPv4-compatible one"},
	{netip.MustParsePrefix("fc00::/7"), "a unique local IPv6 address, as on the host's LAN (AWS's metadata service is fd00:ec2::254)"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address, where cloud metadata services live"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

// Prefixes that embed an IPv4 address, which is checked in turn: NAT64
// (RFC 6052 and RFC 8215's local use) and 6to4. A NAT64 address of a
// public IPv4 address is an ordinary route on an IPv6-only network.
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
)

// guardedWhy says why a name must not lead to ip, or "" if it may; local
// are the host's own interface addresses.
func guardedWhy(ip netip.Addr, local []netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	for _, l := range local {
		if l.Unmap().WithZone("") == ip {
			return "an address of this computer's own network interfaces"
		}
	}
	for _, r := range guardedRanges {
		if r.prefix.Contains(ip) {
			return r.why
		}
	}
	var v4 [4]byte
	switch b := ip.As16(); {
	case nat64.Contains(ip), nat64Local.Contains(ip):
		copy(v4[:], b[12:])
	case sixToFour.Contains(ip):
		copy(v4[:], b[2:6])
	default:
		return ""
	}
	inner := netip.AddrFrom4(v4)
	if why := guardedWhy(inner, local); why != "" {
		return fmt.Sprintf("which embeds %s, %s", inner, why)
	}
	return ""
}

// interfaceAddrs returns the host's own interface addresses (none if they
// cannot be listed: the ranges still hold).
func interfaceAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr())
		}
	}
	return out
}

// spellsOut reports whether an Allow rule names ip itself on this port
// (either default port: the name was already allowed for its request) and
// no Deny rule names it.
func (p *Policy) spellsOut(ip netip.Addr, port int) bool {
	ip = ip.Unmap()
	match := func(r Rule) bool {
		a, err := netip.ParseAddr(normHost(r.Host))
		return err == nil && a.Unmap() == ip && (r.matchPort(port, true) || r.matchPort(port, false))
	}
	for _, r := range p.Deny {
		if match(r) {
			return false
		}
	}
	for _, r := range p.Allow {
		if match(r) {
			return true
		}
	}
	return false
}

// dialUpstream is the proxy's only way to an upstream (the transport's
// DialContext and CONNECT's dial): resolve a name once, refuse what the
// guard refuses, dial the addresses that passed.
func (p *Proxy) dialUpstream(ctx context.Context, network, addr string) (net.Conn, error) {
	if p.cfg.Dial != nil && p.cfg.Resolve == nil {
		// A whole test network of names: there are no addresses to check.
		return p.cfg.Dial(ctx, network, addr)
	}
	dial := p.cfg.Dial
	if dial == nil {
		d := &net.Dialer{KeepAlive: 30 * time.Second}
		dial = d.DialContext
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: bad port", addr)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := netip.ParseAddr(host); err == nil {
		// The address itself: allowed only by a rule that names it.
		return dial(ctx, network, addr)
	}
	var ips []netip.Addr
	if host == "localhost" {
		// A rule that says localhost spells the loopback out (RFC 6761:
		// never asked of DNS).
		ips = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}
	} else {
		resolve := p.cfg.Resolve
		if resolve == nil {
			resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		found, err := resolve(ctx, host)
		if err != nil {
			return nil, err
		}
		pol := p.policy.Load()
		local := p.localAddrs()
		gerr := &guardError{host: host}
		for _, ip := range found {
			if why := guardedWhy(ip, local); why != "" && !pol.spellsOut(ip, port) {
				gerr.refused = append(gerr.refused, refusal{ip.Unmap(), why})
				continue
			}
			ips = append(ips, ip.Unmap())
		}
		if len(ips) == 0 {
			if len(gerr.refused) == 0 {
				return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
			}
			p.log.Warn("egress: address guard", "host", host, "refused", gerr.Error())
			return nil, gerr
		}
	}
	return dialFirst(ctx, dial, network, ips, port)
}

// fallbackDelay is how long the first address family gets before the
// other is tried too (RFC 8305, as net.Dialer does).
const fallbackDelay = 300 * time.Millisecond

// dialFirst dials ips in order (the resolver's, RFC 6724), the other
// address family racing after fallbackDelay, and returns the first
// connection made.
func dialFirst(ctx context.Context, dial func(context.Context, string, string) (net.Conn, error), network string, ips []netip.Addr, port int) (net.Conn, error) {
	var primary, fallback []netip.Addr
	for _, ip := range ips {
		if ip.Is4() == ips[0].Is4() {
			primary = append(primary, ip)
		} else {
			fallback = append(fallback, ip)
		}
	}
	serial := func(ctx context.Context, ips []netip.Addr) (net.Conn, error) {
		var errs []error
		for i, ip := range ips {
			actx, cancel := ctx, context.CancelFunc(func() {})
			if dl, ok := ctx.Deadline(); ok && i < len(ips)-1 {
				// Leave time for the addresses after this one, as net
				// does: an equal share, at least two seconds.
				share := time.Until(dl) / time.Duration(len(ips)-i)
				actx, cancel = context.WithTimeout(ctx, max(share, 2*time.Second))
			}
			c, err := dial(actx, network, net.JoinHostPort(ip.String(), strconv.Itoa(port)))
			cancel()
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		return nil, errors.Join(errs...)
	}
	if len(fallback) == 0 {
		return serial(ctx, primary)
	}
	type result struct {
		c   net.Conn
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan result, 2)
	go func() { c, err := serial(ctx, primary); results <- result{c, err} }()
	timer := time.NewTimer(fallbackDelay)
	defer timer.Stop()
	started, pending := false, 1
	var errs []error
	startFallback := func() {
		if !started {
			started = true
			pending++
			go func() { c, err := serial(ctx, fallback); results <- result{c, err} }()
		}
	}
	for {
		select {
		case <-timer.C:
			startFallback()
		case r := <-results:
			pending--
			if r.err == nil {
				if pending > 0 {
					// The loser is closed when it arrives.
					go func() {
						if l := <-results; l.c != nil {
							l.c.Close()
						}
					}()
				}
				return r.c, nil
			}
			errs = append(errs, r.err)
			if !started {
				startFallback()
				continue
			}
			if pending == 0 {
				return nil, errors.Join(errs...)
			}
		}
	}
}
