package test

import (
	"net"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// destination is somewhere the pod must reach: an address, or nil for a
// name (a Kafka broker, the cluster's resolver), which only a rule open to
// every address admits, since a NetworkPolicy cannot match names.
type destination struct {
	what     string
	ip       net.IP
	protocol corev1.Protocol
	port     int32
}

// egressAdmits is NetworkPolicy's egress decision for a policy that
// selects the pod and has Egress among its policy types: some rule admits
// both the destination and its port.
func egressAdmits(np networkingv1.NetworkPolicy, d destination) bool {
	return slices.ContainsFunc(np.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool {
		return peerAdmits(r.To, d.ip) && portAdmits(r.Ports, d.protocol, d.port)
	})
}

// requiredEgress is every destination the rendered kustomization's own
// configuration needs: the resolver, for broker names; kube-apiserver on
// the endpoint ports of the kubernetes Service (443, and kubeadm's 6443)
// at the control-plane addresses, when Sunset delegates to it; and each
// Kafka broker of the config file.
func requiredEgress(t *testing.T, r *rendered) []destination {
	t.Helper()
	out := []destination{
		{what: "DNS over UDP", protocol: corev1.ProtocolUDP, port: 53},
		{what: "DNS over TCP", protocol: corev1.ProtocolTCP, port: 53},
	}
	if delegates(t, r) {
		for _, cidr := range controlPlaneCIDRs(t, r.np) {
			ip, _, err := net.ParseCIDR(cidr)
			require.NoError(t, err)
			for _, port := range []int32{443, 6443} {
				out = append(out, destination{what: "kube-apiserver at " + cidr, ip: ip, protocol: corev1.ProtocolTCP, port: port})
			}
		}
	}
	return append(out, brokers(t, r)...)
}

// wantEgressRules are the egress rules the needs make, in the order the
// manifests write them: DNS, kube-apiserver, then the brokers' ports.
func wantEgressRules(t *testing.T, r *rendered) []networkingv1.NetworkPolicyEgressRule {
	t.Helper()
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	port := func(n int32) *intstr.IntOrString { p := intstr.FromInt32(n); return &p }
	rules := []networkingv1.NetworkPolicyEgressRule{{
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: port(53)}, {Protocol: &tcp, Port: port(53)}},
	}}
	if delegates(t, r) {
		var to []networkingv1.NetworkPolicyPeer
		for _, cidr := range controlPlaneCIDRs(t, r.np) {
			to = append(to, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr}})
		}
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: port(443)}, {Protocol: &tcp, Port: port(6443)}},
			To:    to,
		})
	}
	var brokerPorts []int32
	for _, b := range brokers(t, r) {
		require.Nil(t, b.ip, "%s: the shipped brokers are names", r.dir)
		brokerPorts = append(brokerPorts, b.port)
	}
	for _, p := range slices.Compact(slices.Sorted(slices.Values(brokerPorts))) {
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: port(p)}}})
	}
	return rules
}
