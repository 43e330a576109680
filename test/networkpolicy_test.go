package test

import (
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// peerAdmits reports whether a peer of an egress or ingress rule matches
// ip. Pod and namespace selectors never match an address: the pods they
// select are not the host-network apiservers or the brokers.
func peerAdmits(peers []networkingv1.NetworkPolicyPeer, ip net.IP) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if p.IPBlock == nil || ip == nil {
			continue
		}
		_, block, err := net.ParseCIDR(p.IPBlock.CIDR)
		if err != nil || !block.Contains(ip) {
			continue
		}
		excluded := slices.ContainsFunc(p.IPBlock.Except, func(e string) bool {
			_, ex, err := net.ParseCIDR(e)
			return err == nil && ex.Contains(ip)
		})
		if !excluded {
			return true
		}
	}
	return false
}

// portAdmits reports whether a rule's ports admit protocol and port.
func portAdmits(ports []networkingv1.NetworkPolicyPort, protocol corev1.Protocol, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if proto != protocol {
			continue
		}
		if p.Port == nil {
			return true
		}
		if p.Port.Type != intstr.Int {
			continue // a named port names the pod's own ports, not a destination's
		}
		end := p.Port.IntVal
		if p.EndPort != nil {
			end = *p.EndPort
		}
		if port >= p.Port.IntVal && port <= end {
			return true
		}
	}
	return false
}

// controlPlaneCIDRs are the addresses the policy admits kube-apiserver
// from: the ipBlocks of its ingress rule.
func controlPlaneCIDRs(t *testing.T, np networkingv1.NetworkPolicy) []string {
	t.Helper()
	require.Len(t, np.Spec.Ingress, 1)
	var cidrs []string
	for _, p := range np.Spec.Ingress[0].From {
		if p.IPBlock != nil {
			require.Empty(t, p.IPBlock.Except)
			_, _, err := net.ParseCIDR(p.IPBlock.CIDR)
			require.NoError(t, err)
			cidrs = append(cidrs, p.IPBlock.CIDR)
		}
	}
	require.NotEmpty(t, cidrs, "the ingress rule names the control-plane addresses")
	return cidrs
}

// delegates reports whether the rendered pod delegates authentication and
// authorization to kube-apiserver: it is given a kubeconfig for that, or
// it has a service-account token to reach the cluster with.
func delegates(t *testing.T, r *rendered) bool {
	t.Helper()
	spec := r.sts.Spec.Template.Spec
	args := requireRealFlags(t, serveFlags(t), spec.Containers[0].Args)
	cfg := sunsetConfig(t, r)
	for _, k := range []string{"authentication-kubeconfig", "authorization-kubeconfig"} {
		if args[k] != "" || cfg[k] != nil {
			return true
		}
	}
	automount := r.sa.AutomountServiceAccountToken == nil || *r.sa.AutomountServiceAccountToken
	if spec.AutomountServiceAccountToken != nil {
		automount = *spec.AutomountServiceAccountToken
	}
	return automount
}

// brokers are the Kafka brokers of the rendered config file, as
// destinations.
func brokers(t *testing.T, r *rendered) []destination {
	t.Helper()
	kafka, ok := sunsetConfig(t, r)["kafka"].(map[string]any)
	if !ok {
		return nil
	}
	list, ok := kafka["brokers"].([]any)
	require.True(t, ok, "%s: kafka.brokers is a list", r.dir)
	require.NotEmpty(t, list, r.dir)
	var out []destination
	for _, b := range list {
		host, port, err := net.SplitHostPort(b.(string))
		require.NoError(t, err, "%s: broker %v", r.dir, b)
		n, err := strconv.ParseInt(port, 10, 32)
		require.NoError(t, err)
		out = append(out, destination{what: "broker " + b.(string), ip: net.ParseIP(host), protocol: corev1.ProtocolTCP, port: int32(n)})
	}
	return out
}

// Each kustomization's NetworkPolicy admits every destination its own
// configuration needs, and nothing more: DNS, kube-apiserver at the
// control-plane addresses it admits kube-apiserver from, and the Kafka
// brokers' ports of its config file.
func TestNetworkPolicyAdmitsWhatEachKustomizationNeeds(t *testing.T) {
	kubectl(t)
	for _, dir := range kustomizations(t) {
		r := render(t, dir)
		np := r.np
		require.Equal(t, r.sts.Spec.Selector.MatchLabels, np.Spec.PodSelector.MatchLabels, dir)
		require.ElementsMatch(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, np.Spec.PolicyTypes, dir)
		required := requiredEgress(t, r)
		for _, d := range required {
			require.True(t, egressAdmits(np, d), "%s: the NetworkPolicy does not let out %s (%s/%d)", dir, d.what, d.protocol, d.port)
		}

		// Nothing beyond that: the same ports elsewhere stay shut, and the
		// rules are exactly those the needs make.
		outside := net.ParseIP("203.0.113.7") // TEST-NET-3, in no control plane
		for _, cidr := range controlPlaneCIDRs(t, np) {
			_, block, err := net.ParseCIDR(cidr)
			require.NoError(t, err)
			require.False(t, block.Contains(outside), dir)
		}
		for _, port := range []int32{443, 6443, 8443, 80} {
			if slices.ContainsFunc(required, func(d destination) bool { return d.ip == nil && d.port == port }) {
				continue
			}
			require.False(t, egressAdmits(np, destination{ip: outside, protocol: corev1.ProtocolTCP, port: port}), "%s: egress to any address on %d", dir, port)
		}
		require.Equal(t, wantEgressRules(t, r), np.Spec.Egress, dir)
	}
}

// Ingress is the one port Sunset listens on, from kube-apiserver (the
// webhook and the aggregator) at the control-plane addresses and from
// Prometheus, and from nothing else.
func TestNetworkPolicyIngressOnlyFromAPIServerAndPrometheus(t *testing.T) {
	kubectl(t)
	tcp := corev1.ProtocolTCP
	for _, dir := range kustomizations(t) {
		r := render(t, dir)
		args := requireRealFlags(t, serveFlags(t), r.sts.Spec.Template.Spec.Containers[0].Args)
		listen := intstr.FromInt32(listenPort(t, args["listen"]))
		cidrs := controlPlaneCIDRs(t, r.np)
		require.Equal(t, []string{"192.0.2.0/24"}, cidrs, "%s: the shipped placeholder, which networkpolicy.yaml says to replace", dir)
		var from []networkingv1.NetworkPolicyPeer
		for _, cidr := range cidrs {
			from = append(from, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr}})
		}
		from = append(from, networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}},
			PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app.kubernetes.io/name", Operator: metav1.LabelSelectorOpIn, Values: []string{"prometheus"}}}},
		})
		require.Equal(t, []networkingv1.NetworkPolicyIngressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &listen}},
			From:  from,
		}}, r.np.Spec.Ingress, dir)
		// The Service's port is the one admitted.
		require.Len(t, r.svc.Spec.Ports, 1, dir)
		require.Equal(t, listen.IntVal, containerPort(t, r.sts.Spec.Template.Spec.Containers[0], r.svc.Spec.Ports[0].TargetPort).ContainerPort, dir)
	}
}
