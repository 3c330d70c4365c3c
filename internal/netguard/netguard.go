// Package netguard decides which addresses the server may connect to on a
// user's behalf (the http_fetch tool, webhook endpoints): public unicast
// addresses only, unless configured otherwise. Its check runs in the
// dialer, on the very address about to be connected, so DNS answers that
// change between checks (rebinding) and redirects to private hosts are
// refused too.
package netguard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"

	"code.dny.dev/ssrf"
)

// guardian holds the deny lists kept in step with IANA's IPv4 and IPv6
// special-purpose registries: every IPv4 special-purpose prefix, every IPv6
// address outside global unicast (2000::/3), and the special-purpose prefixes
// inside it (Teredo, 6to4, documentation, ...). Only its address check is
// used; ports and networks are not restricted.
var guardian = ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork())

// nat64 is the well-known NAT64 prefix (RFC 6052), whose last 32 bits are
// the IPv4 address the gateway connects to.
var nat64 = ssrf.IPv6NAT64Prefix

// embedders are the IPv6 prefixes whose addresses carry an IPv4 address in a
// fixed place; v4 extracts it.
var embedders = []struct {
	prefix netip.Prefix
	kind   string
	v4     func(a [16]byte) [4]byte
}{
	{nat64, "NAT64", func(a [16]byte) [4]byte { return [4]byte(a[12:16]) }},
	// 6to4 (RFC 3056): the site's IPv4 address is bits 16-47.
	{netip.MustParsePrefix("2002::/16"), "6to4", func(a [16]byte) [4]byte { return [4]byte(a[2:6]) }},
	// Teredo (RFC 4380): the client's IPv4 address, inverted, is the last 32
	// bits.
	{netip.MustParsePrefix("2001::/32"), "Teredo", func(a [16]byte) [4]byte {
		return [4]byte{^a[12], ^a[13], ^a[14], ^a[15]}
	}},
	// IPv4-compatible (RFC 4291, deprecated): ::a.b.c.d.
	{netip.MustParsePrefix("::/96"), "IPv4-compatible", func(a [16]byte) [4]byte { return [4]byte(a[12:16]) }},
	// IPv4-translated (RFC 2765): ::ffff:0:a.b.c.d.
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "IPv4-translated", func(a [16]byte) [4]byte { return [4]byte(a[12:16]) }},
}

// embeddedIPv4 returns the IPv4 address an IPv6 address of a translation or
// tunnelling prefix stands for, and the prefix's kind.
func embeddedIPv4(ip netip.Addr) (netip.Addr, string, bool) {
	if !ip.Is6() || ip.Is4In6() {
		return netip.Addr{}, "", false
	}
	for _, e := range embedders {
		if e.prefix.Contains(ip) {
			return netip.AddrFrom4(e.v4(ip.As16())), e.kind, true
		}
	}
	return netip.Addr{}, "", false
}

// named names, for the refusal message, the special-purpose prefixes netip
// has no predicate for; whether an address is refused is guardian's call,
// not this list's.
var named = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network"`},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (shared)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.31.196.0/24"), "AS112"},
	{netip.MustParsePrefix("192.52.193.0/24"), "AMT"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast"},
	{netip.MustParsePrefix("192.175.48.0/24"), "AS112"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("2001:10::/28"), "ORCHID"},
	{netip.MustParsePrefix("2001:20::/28"), "ORCHID"},
	{netip.MustParsePrefix("2001::/23"), "IETF protocol assignment"},
	{netip.MustParsePrefix("2002::/16"), "6to4"},
	{netip.MustParsePrefix("2620:4f:8000::/48"), "AS112"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
}

// NonPublic says why ip is not a public unicast address, or "" if it is one.
// An IPv6 address that stands for an IPv4 one (NAT64, 6to4, Teredo,
// IPv4-compatible) is refused as that IPv4 address would be; of those, only
// well-known NAT64 of a public IPv4 address is public, as IANA lists it
// globally reachable (the others are tunnels or deprecated, and refused).
func NonPublic(ip netip.Addr) string {
	ip = ip.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	if v4, kind, ok := embeddedIPv4(ip); ok && !ip.IsUnspecified() && !ip.IsLoopback() {
		if why := NonPublic(v4); why != "" {
			return kind + "-embedded " + why
		}
		if kind == "NAT64" {
			return ""
		}
	}
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
	if guardian.SafeAddr(ip) == nil {
		return ""
	}
	for _, n := range named {
		if n.prefix.Contains(ip) {
			return n.what
		}
	}
	if ip.Is6() {
		return "non-global IPv6"
	}
	return "special-purpose"
}

// RefusedError is a connection the policy refused to open.
type RefusedError struct {
	IP     netip.Addr
	Reason string // "loopback", "private", "NAT64-embedded loopback", ...
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused to connect to %s: %s %s address (not allowed by the server's configuration)", e.IP, article(e.Reason), e.Reason)
}

// article is the indefinite article read before a reason.
func article(reason string) string {
	if reason != "" && strings.ContainsRune("aeiouAEIOU", rune(reason[0])) {
		return "an"
	}
	return "a"
}

// Policy decides which addresses may be connected to.
type Policy struct {
	allowPrivate bool
	hosts        map[string]bool // host names allowed to be non-public, lower case
	prefixes     []netip.Prefix  // addresses allowed to be non-public
}

// NewPolicy returns the policy that refuses every non-public address
// unless allowPrivate, except those allowHosts names: a host name, an IP
// address or a CIDR prefix each.
func NewPolicy(allowPrivate bool, allowHosts []string) Policy {
	p := Policy{allowPrivate: allowPrivate, hosts: map[string]bool{}}
	for _, h := range allowHosts {
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

// HostAllowed reports whether a host name from a URL is allowed to resolve
// to any address.
func (p Policy) HostAllowed(host string) bool {
	return p.allowPrivate || p.hosts[normalHost(host)]
}

// Check returns a *RefusedError if ip is not public and not allowed.
func (p Policy) Check(ip netip.Addr) error {
	if p.allowPrivate {
		return nil
	}
	reason := NonPublic(ip)
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

// Control is a net.Dialer Control hook: it runs after name resolution, on the
// very address about to be connected, so DNS answers that change between
// checks (rebinding) and redirects to private hosts are caught too.
func (p Policy) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	return p.Check(ap.Addr())
}

// Dialer returns the dial function of a transport under the policy: hosts
// allowed by name dial freely, every other connection goes through Check.
func (p Policy) Dialer(base net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	guarded := base
	guarded.Control = p.Control
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err == nil && p.HostAllowed(host) {
			return base.DialContext(ctx, network, addr)
		}
		return guarded.DialContext(ctx, network, addr)
	}
}

// Resolver looks host names up (net.DefaultResolver is one).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// CheckHost checks the host of a URL ahead of any connection: an address
// itself, a name every address it resolves to. A name that does not
// resolve passes (the connection will be checked when it is made); a
// *RefusedError names the first address refused.
func (p Policy) CheckHost(ctx context.Context, r Resolver, host string) error {
	if p.allowPrivate || p.HostAllowed(host) {
		return nil
	}
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return p.Check(ip)
	}
	ips, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, ip := range ips {
		if err := p.Check(ip); err != nil {
			return err
		}
	}
	return nil
}
