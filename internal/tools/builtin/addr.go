package builtin

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// extraBlocked are special-purpose IPv4 ranges netip has no predicate for.
var extraBlocked = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (shared)"},
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network"`},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
}

// nonPublic says why ip is not a public unicast address, or "" if it is one.
func nonPublic(ip netip.Addr) string {
	ip = ip.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	switch {
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsMulticast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, b := range extraBlocked {
		if b.prefix.Contains(ip) {
			return b.what
		}
	}
	return ""
}

// RefusedError is a connection http_fetch refused to open.
type RefusedError struct {
	IP     netip.Addr
	Reason string // "loopback", "private", ...
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused to connect to %s: a %s address (not allowed by the server's configuration)", e.IP, e.Reason)
}

// addrPolicy decides which addresses http_fetch may connect to.
type addrPolicy struct {
	allowPrivate bool
	hosts        map[string]bool // host names allowed to be non-public, lower case
	prefixes     []netip.Prefix  // addresses allowed to be non-public
}

// newAddrPolicy reads AllowHosts entries: a host name, an IP address or a
// CIDR prefix.
func newAddrPolicy(opts HTTPFetchOptions) addrPolicy {
	p := addrPolicy{allowPrivate: opts.AllowPrivate, hosts: map[string]bool{}}
	for _, h := range opts.AllowHosts {
		h = strings.TrimSpace(h)
		if pfx, err := netip.ParsePrefix(h); err == nil {
			p.prefixes = append(p.prefixes, pfx.Masked())
		} else if ip, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
			p.prefixes = append(p.prefixes, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
		} else if h != "" {
			p.hosts[normalHost(h)] = true
		}
	}
	return p
}

func normalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// hostAllowed reports whether a host name from a URL is allowed to resolve
// to any address.
func (p addrPolicy) hostAllowed(host string) bool {
	return p.allowPrivate || p.hosts[normalHost(host)]
}

// check returns a *RefusedError if ip is not public and not allowed.
func (p addrPolicy) check(ip netip.Addr) error {
	if p.allowPrivate {
		return nil
	}
	reason := nonPublic(ip)
	if reason == "" {
		return nil
	}
	for _, pfx := range p.prefixes {
		if pfx.Contains(ip.Unmap()) {
			return nil
		}
	}
	return &RefusedError{IP: ip.Unmap(), Reason: reason}
}

// control is a net.Dialer Control hook: it runs after name resolution, on the
// very address about to be connected, so DNS answers that change between
// checks (rebinding) and redirects to private hosts are caught too.
func (p addrPolicy) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	return p.check(ap.Addr())
}

// dialer returns the dial function of http_fetch's transport: hosts allowed
// by name dial freely, every other connection goes through the check.
func (p addrPolicy) dialer(base net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	guarded := base
	guarded.Control = p.control
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err == nil && p.hostAllowed(host) {
			return base.DialContext(ctx, network, addr)
		}
		return guarded.DialContext(ctx, network, addr)
	}
}
