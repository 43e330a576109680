package test

import (
	"fmt"
	"math/rand/v2"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// fleetInput is a generated stream of raw audit messages from several
// clusters, with the counts it must produce, worked out from the generated
// events themselves, not by Sunset's code.
type fleetInput struct {
	msgs []kafkago.Message
	want fleetCounts
	// copies is how many counting events were sent a second time.
	copies int
}

// fleetEvent is one audit event with the shipper's cluster and hostname
// fields beside its own (fluent-bit or Vector with a record modifier). ref
// is the objectRef JSON, ann the annotations JSON, body the requestObject
// JSON or "" for Metadata level. A template rather than json.Marshal: the
// race detector makes 50,000 marshals of maps slow.
func fleetEvent(id, cluster, node, stage, verb, user, ref string, code int, ann, body string, at time.Time) []byte {
	level, object := "Metadata", ""
	if body != "" {
		level, object = "Request", `,"requestObject":`+body
	}
	ts := at.Format(time.RFC3339Nano)
	return fmt.Appendf(nil, `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":%q,"auditID":%q,"stage":%q,"verb":%q,`+
		`"user":{"username":%q,"groups":["system:authenticated"]},"userAgent":%q,"sourceIPs":["10.1.2.3"],"objectRef":%s,`+
		`"responseStatus":{"code":%d},"requestReceivedTimestamp":%q,"stageTimestamp":%q,"annotations":{%s},"cluster":%q,"hostname":%q%s}`,
		level, id, stage, verb, user, "client-"+user+"/1.0 (linux/amd64)", ref, code, ts, ts, ann, cluster, node, object)
}

// Object references and annotations of the generated events.
const (
	refEndpoints   = `{"resource":"endpoints","apiVersion":"v1"}`
	refFlowSchemas = `{"resource":"flowschemas","apiGroup":"flowcontrol.apiserver.k8s.io","apiVersion":"v1beta3"}`
	refIngresses   = `{"resource":"ingresses","apiGroup":"extensions","apiVersion":"v1beta1"}`
	refNodeStatus  = `{"resource":"nodes","subresource":"status","apiVersion":"v1"}`
	refPods        = `{"resource":"pods","apiVersion":"v1"}`
	annDeprecated  = `"k8s.io/deprecated":"true"`
	annAllowed     = `"authorization.k8s.io/decision":"allow"`
)

// genFleetInput makes n raw messages from 5 clusters of 3 apiservers each.
// About 6 % of the events count: deprecated Endpoints reads, a deprecated
// FlowSchema version with its removed release, 404s to the removed
// extensions/v1beta1 Ingress (the catalog's), and kubelets setting the
// deprecated kubeProxyVersion field. The rest are other APIs or earlier
// stages. About 1 in 8 counting events is sent again later, under another
// key, so that its copy lands on another partition.
func genFleetInput(n int, seed uint64, at time.Time) fleetInput {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	in := fleetInput{want: fleetCounts{}}
	var later []kafkago.Message
	for i := range n {
		cluster := fmt.Sprintf("cluster-%d", rng.IntN(5))
		node := fmt.Sprintf("%s-master-%d", cluster, rng.IntN(3))
		id := fmt.Sprintf("%s-%08d", cluster, i)
		user := fmt.Sprintf("user-%d", rng.IntN(12))
		verb := []string{"get", "list", "watch"}[rng.IntN(3)]
		var value []byte
		counts := true
		switch k := rng.IntN(1000); {
		case k < 35:
			value = fleetEvent(id, cluster, node, "ResponseComplete", verb, user, refEndpoints, 200, annDeprecated, "", at)
			in.want.add(cluster, "endpoints.v1", user)
		case k < 45:
			value = fleetEvent(id, cluster, node, "ResponseComplete", verb, user, refFlowSchemas, 200,
				annDeprecated+`,"k8s.io/removed-release":"1.32"`, "", at)
			in.want.add(cluster, "flowschemas.v1beta3.flowcontrol.apiserver.k8s.io", user)
		case k < 52:
			value = fleetEvent(id, cluster, node, "ResponseComplete", "get", user, refIngresses, 404, "", "", at)
			in.want.add(cluster, "ingresses.v1beta1.extensions", user)
		case k < 60:
			kubelet := "system:node:" + node
			value = fleetEvent(id, cluster, node, "ResponseComplete", "patch", kubelet, refNodeStatus, 200, annAllowed,
				`{"status":{"nodeInfo":{"kubeProxyVersion":"v1.30.2"}}}`, at)
			in.want.add(cluster, "field:kube-proxy-version", kubelet)
		case k < 150:
			// The first stage of a deprecated request: never counted.
			value = fleetEvent(id, cluster, node, "ResponseStarted", "watch", user, refEndpoints, 200, "", "", at)
			counts = false
		default:
			value = fleetEvent(id, cluster, node, "ResponseComplete", verb, user, refPods, 200, annAllowed, "", at)
			counts = false
		}
		in.msgs = append(in.msgs, kafkago.Message{Key: []byte(id), Value: value})
		if counts && rng.IntN(8) == 0 {
			later = append(later, kafkago.Message{Key: []byte(id + "/resent"), Value: value})
			in.copies++
		}
		// Copies go out a while after their original, spread through the
		// stream.
		if len(later) > 0 && rng.IntN(40) == 0 {
			in.msgs = append(in.msgs, later...)
			later = nil
		}
	}
	in.msgs = append(in.msgs, later...)
	return in
}
