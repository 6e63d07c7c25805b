package e2e

import (
	"strings"
	"testing"
)

// A repository may name objects only in its own stack's namespace or in
// none, and never under the controller's "flotilla-" prefix: each attack
// is refused before any write, whatever kind it uses.
func TestHostileNamespaceSquattingIsRefused(t *testing.T) {
	t.Parallel()
	h, ctl := running(t)
	good := files(stackFile)
	top := func(section string) map[string]string {
		return files(strings.Replace(stackFile, "\nconfigs:\n", "\n"+section+"configs:\n", 1))
	}
	h.refuseEach(ctl, good, []attack{
		{name: "network in another stack's namespace", files: files(strings.Replace(stackFile, "  back:\n    driver: overlay\n",
			"  back:\n    driver: overlay\n    name: shop_default\n", 1)), want: []string{"shop_default", `namespace of stack "shop"`}},
		{name: "volume in another stack's namespace", files: top("volumes:\n  data:\n    name: shop_db-data\n"),
			want: []string{"shop_db-data", "allow.volumes"}},
		{name: "config in another stack's namespace", files: files(strings.Replace(stackFile, "    file: ./web.conf\n",
			"    file: ./web.conf\n    name: billing-2_conf\n", 1)), want: []string{"billing-2_conf", `namespace of stack "billing-2"`}},
		{name: "secret named like a leader lease", files: files(strings.Replace(stackFile, "    file: ./token.txt\n",
			"    file: ./token.txt\n    name: flotilla-lease.x\n", 1)), want: []string{"flotilla-lease.x", "reserved"}},
		{name: "network under the reserved prefix", files: files(strings.Replace(stackFile, "  back:\n    driver: overlay\n",
			"  back:\n    driver: overlay\n    name: flotilla-mesh\n", 1)), want: []string{"flotilla-mesh", "reserved"}},
	})
}
