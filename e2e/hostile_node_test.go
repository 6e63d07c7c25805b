package e2e

import (
	"strings"
	"testing"
)

// Rule 1, the node policy: a repository reaches the node (kernel
// privileges, node ports, node paths and devices, drivers that run on the
// node) only through what allow grants. Each attack uses a spelling or
// field other than the security review's examples and is refused before
// any write, naming the application and the field.
func TestHostileNodePolicyIsRefused(t *testing.T) {
	t.Parallel()
	h, ctl := running(t)
	good := files(stackFile)
	// cron gets extra keys; web keeps serving.
	cron := func(extra string) map[string]string {
		return files(strings.Replace(stackFile, "  cron:\n    image: flotilla-test/app:1\n",
			"  cron:\n    image: flotilla-test/app:1\n"+extra, 1))
	}
	// cron mounts volume data, declared with the given top-level body.
	volume := func(body string) map[string]string {
		s := strings.Replace(stackFile, "  cron:\n    image: flotilla-test/app:1\n",
			"  cron:\n    image: flotilla-test/app:1\n    volumes: [\"data:/data\"]\n", 1)
		return files(strings.Replace(s, "\nconfigs:\n", "\nvolumes:\n  data:\n"+body+"configs:\n", 1))
	}
	network := func(body string) map[string]string {
		return files(strings.Replace(stackFile, "  back:\n    driver: overlay\n", "  back:\n"+body, 1))
	}
	h.refuseEach(ctl, good, []attack{
		// Capabilities, as Docker reads them: any case, CAP_ prefix or not.
		{name: "cap_add lower case with prefix", files: cron("    cap_add: [cap_sys_admin]\n"),
			want: []string{"cron", "cap_add", "SYS_ADMIN", "allow.capabilities"}},
		{name: "cap_add CAP_ALL", files: cron("    cap_add: [\"CAP_ALL\"]\n"),
			want: []string{"cron", "cap_add", "ALL"}},
		{name: "cap_add sys_ptrace among defaults", files: cron("    cap_add: [CHOWN, Sys_Ptrace]\n"),
			want: []string{"cron", "cap_add", "SYS_PTRACE"}},
		// Sysctls, map and list forms, "/" spelling.
		{name: "sysctl with slashes", files: cron("    sysctls:\n      kernel/shm_rmid_forced: \"1\"\n"),
			want: []string{"cron", "sysctls", "kernel.shm_rmid_forced", "allow.sysctls"}},
		{name: "sysctl list form", files: cron("    sysctls: [\"net.ipv4.ip_forward=1\"]\n"),
			want: []string{"cron", "sysctls", "net.ipv4.ip_forward"}},
		// Host-mode fixed ports.
		{name: "host-mode tcp port", files: cron("    ports: [{target: 8080, published: 2222, mode: host}]\n"),
			want: []string{"cron", "ports", "2222", "allow.hostPorts"}},
		{name: "host-mode udp port", files: cron("    ports:\n      - {target: 53, published: 5353, protocol: udp, mode: host}\n"),
			want: []string{"cron", "ports", "5353", "allow.hostPorts"}},
		// Local-driver volumes that are bind mounts in disguise.
		{name: "bind,ro with a relative device", files: volume("    driver_opts: {type: none, o: \"bind,ro\", device: ./etc}\n"),
			want: []string{"cron", "data", "./etc"}},
		{name: "type none with device ../..", files: volume("    driver_opts: {type: none, o: rbind, device: ../..}\n"),
			want: []string{"cron", "data", "../.."}},
		{name: "overlay upperdir on the node", files: volume("    driver_opts:\n      type: overlay\n      device: overlay\n      o: \"lowerdir=/etc,upperdir=/var/lib/u,workdir=/var/lib/w\"\n"),
			want: []string{"cron", "data", "/etc"}},
		{name: "non-local volume driver", files: volume("    driver: rexray/ebs\n"),
			want: []string{"cron", "data", "rexray/ebs", "allow.volumeDrivers"}},
		{name: "ext4 block device", files: volume("    driver_opts: {type: ext4, device: /dev/sda1}\n"),
			want: []string{"cron", "data", "/dev/sda1"}},
		// Network drivers that reach the node's own networks.
		{name: "macvlan network", files: network("    driver: macvlan\n"),
			want: []string{"back", "macvlan", "allow.networkDrivers"}},
		{name: "bridge network", files: network("    driver: bridge\n"),
			want: []string{"back", "bridge", "allow.networkDrivers"}},
		{name: "IPAM plugin", files: network("    driver: overlay\n    ipam: {driver: infoblox}\n"),
			want: []string{"back", "infoblox", "allow.networkDrivers"}},
		// Templating reads the swarm's other secrets and configs.
		{name: "config template_driver", files: files(strings.Replace(stackFile, "    file: ./web.conf\n",
			"    file: ./web.conf\n    template_driver: golang\n", 1)),
			want: []string{"web_conf", "golang", "allow.templateDrivers"}},
		{name: "secret template_driver", files: files(strings.Replace(stackFile, "    file: ./token.txt\n",
			"    file: ./token.txt\n    template_driver: golang\n", 1)),
			want: []string{"api_token", "golang", "allow.templateDrivers"}},
	})
}

// A chart reaches the same node policy as a compose file: a template that
// emits cap_add, or one that lets a values file publish a host port, is
// refused like the compose spelling.
func TestHostileNodePolicyFromAChartIsRefused(t *testing.T) {
	t.Parallel()
	h, ctl, good := runningChart(t)
	worker := good["deploy/templates/worker.yaml"]
	const anchor = "    stop_grace_period: 1s\n"
	if !strings.Contains(worker, anchor) {
		t.Fatalf("the example worker template has no %q line", anchor)
	}
	template := func(extra string) map[string]string {
		return map[string]string{"deploy/templates/worker.yaml": strings.Replace(worker, anchor, anchor+extra, 1)}
	}
	h.refuseEach(ctl, good, []attack{
		{name: "template emits cap_add", files: template("    cap_add: [{{ \"net_admin\" | upper }}]\n"),
			want: []string{"worker", "cap_add", "NET_ADMIN", "allow.capabilities"}},
		{name: "values file publishes a host port", files: map[string]string{
			"deploy/templates/worker.yaml": strings.Replace(worker, anchor, anchor+"    {{- with .Values.worker.hostPort }}\n    ports: [{target: 80, published: {{ . }}, mode: host}]\n    {{- end }}\n", 1),
			"deploy/values-prod.yaml":      prodValues + "  hostPort: 8443\n",
		}, want: []string{"worker", "ports", "8443", "allow.hostPorts"}},
	})
}
