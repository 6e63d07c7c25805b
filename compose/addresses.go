package compose

import (
	"fmt"
	"net/netip"
	"strconv"

	composetypes "github.com/docker/cli/cli/compose/types"
)

// checkAddresses refuses a name server that is not an IP address and a
// network subnet that is not a CIDR prefix. docker/cli's convert (v29 on)
// parses both into net/netip values and drops what does not parse without a
// word, so a typo would deploy a service without its name server, or a
// network on an address range the daemon picked. Earlier, both reached the
// daemon as text, which refused the subnet.
func (p *project) checkAddresses(cfg *composetypes.Config) error {
	for _, svc := range cfg.Services {
		if p.inc.reused(svc.Name) {
			continue
		}
		for i, s := range svc.DNS {
			if _, err := netip.ParseAddr(s); err != nil {
				return p.fault("services."+svc.Name+".dns", fmt.Errorf("name server %d, %q, is not an IP address", i+1, s))
			}
		}
	}
	for _, name := range sortedKeys(cfg.Networks) {
		for i, pool := range cfg.Networks[name].Ipam.Config {
			if pool == nil || pool.Subnet == "" {
				continue
			}
			if _, err := netip.ParsePrefix(pool.Subnet); err != nil {
				field := "networks." + name + ".ipam.config." + strconv.Itoa(i) + ".subnet"
				return p.fault(field, fmt.Errorf("%q is not a subnet in CIDR notation", pool.Subnet))
			}
		}
	}
	return nil
}
