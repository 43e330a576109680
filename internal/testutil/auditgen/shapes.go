package auditgen

import (
	"encoding/json"
	"strconv"
)

// The shapes log shippers put one audit event in, as Kafka messages.
const (
	// ShapeEvent is the event as kube-apiserver writes it.
	ShapeEvent = "event"
	// ShapeShipperFields is the event with a shipper's fields in front
	// (Filebeat, Logstash).
	ShapeShipperFields = "shipper-fields"
	// ShapeLogEnvelope is fluent-bit's tail input: the line escaped in
	// "log", beside the shipper's own fields.
	ShapeLogEnvelope = "log-envelope"
	// ShapeMessageEnvelope is Vector's file source: the line escaped in
	// "message", beside the shipper's own fields.
	ShapeMessageEnvelope = "message-envelope"
	// ShapeAKSRecords is Azure's diagnostic settings through Event Hubs:
	// one kube-audit record, the event escaped in properties.log.
	ShapeAKSRecords = "aks-records"
)

// Shapes are every shape, in the order benchmarks report them.
var Shapes = []string{ShapeEvent, ShapeShipperFields, ShapeLogEnvelope, ShapeMessageEnvelope, ShapeAKSRecords}

// Wrap appends the event ev (one JSON object, as Append writes it) in the
// named shape to b; i picks the shipper's host among three apiservers. It
// panics on a shape it does not know.
func Wrap(b []byte, shape string, ev []byte, i int) []byte {
	host := "master-" + strconv.Itoa(i%3)
	switch shape {
	case ShapeEvent:
		return append(b, ev...)
	case ShapeShipperFields:
		b = append(b, `{"@timestamp":"2026-11-21T19:10:00.1Z","hostname":"`+host+`","log_type":"audit",`...)
		return append(b, ev[1:]...)
	case ShapeLogEnvelope:
		b = append(b, `{"log":`...)
		b = appendQuoted(b, append(ev, '\n'))
		return append(b, `,"stream":"stdout","time":"2026-11-21T19:10:00.123456789Z","kubernetes":{"host":"`+host+`"}}`...)
	case ShapeMessageEnvelope:
		b = append(b, `{"file":"/var/log/kubernetes/audit.log","host":"`+host+`","message":`...)
		b = appendQuoted(b, ev)
		return append(b, `,"source_type":"file","timestamp":"2026-11-21T19:10:00.123Z"}`...)
	case ShapeAKSRecords:
		b = append(b, `{"records":[{"operationName":"Microsoft.ContainerService/managedClusters/diagnosticLogs/Read","category":"kube-audit","ccpNamespace":"6543210fedcba","resourceId":"/SUBSCRIPTIONS/0000/RESOURCEGROUPS/RG/PROVIDERS/MICROSOFT.CONTAINERSERVICE/MANAGEDCLUSTERS/AKS","properties":{"log":`...)
		b = appendQuoted(b, ev)
		return append(b, `,"stream":"stdout","pod":"kube-apiserver-`+host+`","containerID":"0123456789abcdef"},"time":"2026-11-21T19:10:00.0000000Z","Cloud":"AzureCloud","Environment":"prod"}]}`...)
	}
	panic("auditgen: unknown shape " + shape)
}

// appendQuoted appends s as a JSON string, as shippers escape a line.
func appendQuoted(b, s []byte) []byte {
	q, err := json.Marshal(string(s))
	if err != nil {
		panic(err) // a string always marshals
	}
	return append(b, q...)
}
