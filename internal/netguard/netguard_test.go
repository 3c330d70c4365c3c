package netguard

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// TestAddrPolicyRefusesEmbeddedIPv4: IPv6 forms that reach 127.0.0.1,
// 10.0.0.1 or 169.254.169.254 (NAT64, 6to4, Teredo, IPv4-compatible, ...)
// and the other IANA special-purpose ranges are refused at the dial hook,
// with the reason in the message.
func TestAddrPolicyRefusesEmbeddedIPv4(t *testing.T) {
	cases := []struct {
		addr, reason string
	}{
		// IPv4-mapped.
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:10.0.0.1", "private"},
		{"::ffff:169.254.169.254", "link-local"},
		// Well-known NAT64, 64:ff9b::/96: the last 32 bits.
		{"64:ff9b::7f00:1", "NAT64-embedded loopback"},
		{"64:ff9b::a00:1", "NAT64-embedded private"},
		{"64:ff9b::a9fe:a9fe", "NAT64-embedded link-local"},
		{"64:ff9b::169.254.169.254", "NAT64-embedded link-local"},
		// Local-use NAT64, 64:ff9b:1::/48, whose IPv4 address sits where the
		// operator's prefix length puts it: a /96 and a /48 layout.
		{"64:ff9b:1::7f00:1", "local-use NAT64"},
		{"64:ff9b:1::a00:1", "local-use NAT64"},
		{"64:ff9b:1:a9fe:a9:fe00::", "local-use NAT64"},
		// 6to4, 2002::/16: bits 16-47.
		{"2002:7f00:1::", "6to4-embedded loopback"},
		{"2002:a00:1::1", "6to4-embedded private"},
		{"2002:a9fe:a9fe:1::1", "6to4-embedded link-local"},
		// Teredo, 2001::/32: the client's address, inverted, in the last 32
		// bits; the server's in bits 32-63.
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo-embedded loopback"},
		{"2001:0:4136:e378:8000:63bf:f5ff:fffe", "Teredo-embedded private"},
		{"2001:0:4136:e378:8000:63bf:5601:5601", "Teredo-embedded link-local"},
		{"2001:0:7f00:1::f7f7:f7f7", "Teredo"},             // client 8.8.8.8, server 127.0.0.1
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", "Teredo"}, // client 8.8.8.8: still a tunnel
		// IPv4-compatible, ::/96, and IPv4-translated, ::ffff:0:0:0/96.
		{"::7f00:1", "IPv4-compatible-embedded loopback"},
		{"::a00:1", "IPv4-compatible-embedded private"},
		{"::a9fe:a9fe", "IPv4-compatible-embedded link-local"},
		{"::ffff:0:7f00:1", "IPv4-translated-embedded loopback"},
		{"::ffff:0:a9fe:a9fe", "IPv4-translated-embedded link-local"},
		// Other IPv6 special-purpose ranges.
		{"fec0::1", "site-local"},
		{"fc00::1", "private"},
		{"fd12:3456::1", "private"},
		{"100::1", "discard-only"},
		{"2001:db8::1", "documentation"},
		{"3fff::1", "documentation"},
		{"2001:20::1", "ORCHID"},
		{"2001:2::1", "IETF protocol assignment"},
		{"2620:4f:8000::1", "AS112"},
		{"4000::1", "non-global IPv6"},
		// IPv4 special-purpose ranges.
		{"192.0.2.1", "documentation"},
		{"198.51.100.1", "documentation"},
		{"203.0.113.1", "documentation"},
		{"192.88.99.1", "6to4 relay anycast"},
		{"192.0.0.8", "IETF protocol assignment"},
		{"198.18.0.1", "benchmarking"},
	}
	p := NewPolicy(false, nil)
	for _, tc := range cases {
		ap := netip.AddrPortFrom(netip.MustParseAddr(tc.addr), 443)
		err := p.Control("tcp6", ap.String(), nil)
		var refused *RefusedError
		if !errors.As(err, &refused) {
			t.Errorf("%s: got %v, want it refused", tc.addr, err)
			continue
		}
		if refused.Reason != tc.reason {
			t.Errorf("%s: reason %q, want %q", tc.addr, refused.Reason, tc.reason)
		}
		if !strings.HasPrefix(err.Error(), "refused to connect to "+netip.MustParseAddr(tc.addr).Unmap().String()+": a") {
			t.Errorf("%s: message %q", tc.addr, err)
		}
	}
}

// TestAddrPolicyAllowsPublic: public addresses, including well-known NAT64
// of a public IPv4 address (what DNS64 answers on an IPv6-only network),
// pass the dial hook.
func TestAddrPolicyAllowsPublic(t *testing.T) {
	p := NewPolicy(false, nil)
	for _, addr := range []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "::ffff:8.8.8.8",
		"2606:4700:4700::1111", "2001:4860:4860::8888", "2a00:1450:4001::1",
		"64:ff9b::808:808", "64:ff9b::1.1.1.1",
	} {
		ap := netip.AddrPortFrom(netip.MustParseAddr(addr), 80)
		if err := p.Control("tcp", ap.String(), nil); err != nil {
			t.Errorf("%s: %v, want it allowed", addr, err)
		}
	}
}

// TestAddrPolicyExceptions: allow_private lets every address through,
// allow_hosts prefixes and addresses only theirs.
func TestAddrPolicyExceptions(t *testing.T) {
	type opts struct {
		AllowPrivate bool
		AllowHosts   []string
	}
	cases := []struct {
		opts    opts
		allowed []string
		refused []string
	}{
		{opts{AllowPrivate: true}, []string{"127.0.0.1", "64:ff9b::7f00:1", "2002:a00:1::1", "fec0::1"}, nil},
		{opts{AllowHosts: []string{"10.1.0.0/16", "fd00::/8", "[fec0::7]", "192.0.2.9"}},
			[]string{"10.1.2.3", "::ffff:10.1.2.3", "fd00::5", "fec0::7", "192.0.2.9"},
			[]string{"10.2.0.1", "64:ff9b::a01:203", "fec0::8", "192.0.2.10"}},
	}
	for _, tc := range cases {
		p := NewPolicy(tc.opts.AllowPrivate, tc.opts.AllowHosts)
		for _, a := range tc.allowed {
			if err := p.Check(netip.MustParseAddr(a)); err != nil {
				t.Errorf("%+v: %s: %v, want it allowed", tc.opts, a, err)
			}
		}
		for _, a := range tc.refused {
			if err := p.Check(netip.MustParseAddr(a)); err == nil {
				t.Errorf("%+v: %s allowed, want it refused", tc.opts, a)
			}
		}
	}
}

func TestRefusedErrorArticle(t *testing.T) {
	for reason, want := range map[string]string{
		"loopback":                "a loopback address",
		"unspecified":             "an unspecified address",
		"IPv4-compatible":         "an IPv4-compatible address",
		"NAT64-embedded loopback": "a NAT64-embedded loopback address",
	} {
		err := &RefusedError{IP: netip.MustParseAddr("::"), Reason: reason}
		if !strings.Contains(err.Error(), ": "+want+" (") {
			t.Errorf("%q: %s", reason, err)
		}
	}
}

func TestNonPublic(t *testing.T) {
	cases := map[string]string{
		"127.0.0.1":        "loopback",
		"::1":              "loopback",
		"::ffff:127.0.0.1": "loopback",
		"10.1.2.3":         "private",
		"172.16.0.1":       "private",
		"192.168.1.1":      "private",
		"fd00::1":          "private",
		"169.254.169.254":  "link-local",
		"fe80::1":          "link-local",
		"0.0.0.0":          "unspecified",
		"::":               "unspecified",
		"224.0.0.1":        "multicast",
		"ff02::1":          "multicast",
		"100.64.1.1":       "carrier-grade NAT (shared)",
		"0.1.2.3":          `"this network"`,
		"255.255.255.255":  "reserved",
		"8.8.8.8":          "",
		"2606:4700::1111":  "",
	}
	for ip, want := range cases {
		if got := NonPublic(netip.MustParseAddr(ip)); got != want {
			t.Errorf("NonPublic(%s) = %q, want %q", ip, got, want)
		}
	}
}
