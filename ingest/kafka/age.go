package kafka

import "github.com/prometheus/client_golang/prometheus"

// topicAgeDesc is how far behind the clock the newest message committed
// from each topic is, by the message's own time (what the producer, or
// Event Hubs, stamped on it). A lag in messages cannot show a stalled
// shipper: no messages, no lag.
var topicAgeDesc = prometheus.NewDesc("sunset_kafka_lag_seconds",
	"Now minus the time of the newest message committed from a topic (before the first, since Sunset started); it grows while the topic brings nothing.",
	[]string{"topic"}, nil)
