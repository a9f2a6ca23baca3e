package agent

// DockerModulesNeeded are the modules a Docker Engine cannot start or
// network its containers without: its bridge, the veth pairs, bridged
// traffic through netfilter, and the iptables rules it writes, in their
// legacy tables and through nf_tables (Debian's iptables is iptables-nft),
// raw table included.
var DockerModulesNeeded = []string{
	"bridge", "veth", "br_netfilter", "nf_conntrack", "nf_nat",
	"ip_tables", "iptable_filter", "iptable_nat", "iptable_raw",
	"nf_tables", "nft_compat", "nft_chain_nat",
	"xt_MASQUERADE", "xt_conntrack", "xt_addrtype",
}
