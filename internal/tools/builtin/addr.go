package builtin

import "github.com/parleyhq/parley/internal/netguard"

// RefusedError is a connection http_fetch refused to open.
type RefusedError = netguard.RefusedError

// newAddrPolicy is the address policy of http_fetch's options: AllowHosts
// entries are a host name, an IP address or a CIDR prefix.
func newAddrPolicy(opts HTTPFetchOptions) netguard.Policy {
	return netguard.NewPolicy(opts.AllowPrivate, opts.AllowHosts)
}
