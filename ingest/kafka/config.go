package kafka

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/kube-sunset/sunset/internal/tlsutil"
)

// Config is Kafka's settings under the kafka key; the fleet's keys beside
// them (kafka.fleet, kafka.forward) are package fleet's. Consumption is on
// when Brokers and Topics are set. Defaults are filled by WithDefaults, so
// that a config file that leaves a key out and a zero value mean the same.
type Config struct {
	Brokers              []string        `mapstructure:"brokers" help:"Brokers to bootstrap from, host:port. Consumption is on when brokers and topics are set."`
	Topics               []string        `mapstructure:"topics" help:"Topics of audit events to consume."`
	GroupID              string          `mapstructure:"groupID" help:"Consumer group; replicas with the same one share the partitions."`
	ClientID             string          `mapstructure:"clientID" help:"Client ID sent to the brokers."`
	StartOffset          string          `mapstructure:"startOffset" help:"Where a group with no committed offset starts: earliest or latest."`
	MinBytes             int             `mapstructure:"minBytes" help:"Fewest bytes a fetch waits for."`
	MaxBytes             int             `mapstructure:"maxBytes" help:"Most bytes a fetch of one partition returns (the first record batch comes whole whatever this says). Part of kafka.memoryBudget."`
	MaxDecompressedBytes int             `mapstructure:"maxDecompressedBytes" help:"Most bytes a record batch may decompress to (at least 1048576). A batch over it is skipped as poison (too_large) and the partition goes on; maxBytes bounds only the compressed bytes a fetch reads. Part of kafka.memoryBudget, once per message kafka.queueCapacity lets wait."`
	QueueCapacity        int             `mapstructure:"queueCapacity" help:"Messages the Kafka client reads ahead per partition, each up to maxDecompressedBytes once inflated. Part of kafka.memoryBudget."`
	BatchBytes           int             `mapstructure:"batchBytes" help:"Most message bytes one batch holds: a batch is committed once it holds batchSize messages or batchBytes bytes. A partition holds at most two batches between fetch and commit. Part of kafka.memoryBudget."`
	MaxPartitions        int             `mapstructure:"maxPartitions" help:"Partitions one process reads at once that kafka.memoryBudget is sized for: the audit topics' partitions assigned to it plus every partition of kafka.fleet.topic it counts. More are still read, outside the budget: size it for the most partitions a replica may be given."`
	MemoryBudget         int64           `mapstructure:"memoryBudget" help:"Most bytes of messages the Kafka input may hold at once, checked at start against maxPartitions x (maxBytes + (queueCapacity + 5) x maxDecompressedBytes + 2 x batchBytes + max(maxDecompressedBytes, 8 MiB)). The default fits the shipped 512 MiB pod beside the store and the webhook; see inputs/kafka.md#memory."`
	MaxWait              time.Duration   `mapstructure:"maxWait" help:"Longest a fetch waits for minBytes."`
	SessionTimeout       time.Duration   `mapstructure:"sessionTimeout" help:"How long the group waits for a silent member (brokers require 6s or more by default)."`
	RebalanceTimeout     time.Duration   `mapstructure:"rebalanceTimeout" default:"kafka.sessionTimeout" help:"When partitions move, how long the group waits for members to finish their batch and rejoin; 0 means sessionTimeout. Shorter than a batch takes under load and the group keeps rebalancing (raise it for fleet filters on a busy broker, whose batches include a produce); longer and a member that died during a rebalance holds it up longer."`
	RetryBackoff         time.Duration   `mapstructure:"retryBackoff" help:"First pause after a failed commit, doubling up to 30s; the batch is read again and the partition never stalls. While the data directory is short of space, consumption pauses and looks again at this pace."`
	BatchSize            int             `mapstructure:"batchSize" help:"Most messages that share one commit."`
	BatchWait            time.Duration   `mapstructure:"batchWait" help:"How long a batch waits to fill before it is committed."`
	TLS                  TLSConfig       `mapstructure:"tls"`
	SASL                 SASLConfig      `mapstructure:"sasl"`
	EnvelopeFields       []string        `mapstructure:"envelopeFields" help:"Fields, tried in order, whose string holds the event JSON (fluent-bit: log, Vector: message)."`
	NodeHeader           string          `mapstructure:"nodeHeader" help:"Message header that names the apiserver."`
	NodeField            string          `mapstructure:"nodeField" help:"Message field that names the apiserver; a dotted field is a path (kubernetes.host)."`
	Node                 string          `mapstructure:"node" help:"The apiserver of messages that name none."`
	ClusterHeader        string          `mapstructure:"clusterHeader" help:"Message header that names the cluster."`
	ClusterField         string          `mapstructure:"clusterField" help:"Message field that names the cluster; default-cluster is the fallback."`
	TopicClusters        []TopicClusters `mapstructure:"topicClusters" help:"Clusters each topic may speak for: a message of a listed topic that names another cluster (clusterHeader, clusterField, else default-cluster) is refused as poison cluster_not_allowed; one that names none is the topic's cluster when it lists one. Topics not listed may name any cluster. Give each cluster its own topic and its producers write access to that topic alone (Kafka ACLs). See fleet.md#who-may-write-for-a-cluster."`
}

// TopicClusters is an entry of kafka.topicClusters.
type TopicClusters struct {
	Topic    string   `mapstructure:"topic" help:"A topic of kafka.topics."`
	Clusters []string `mapstructure:"clusters" help:"The clusters its messages may be counted for."`
}

// TLSConfig is kafka.tls.
type TLSConfig struct {
	Enabled            bool   `mapstructure:"enabled" help:"Connect to the brokers over TLS."`
	CAFile             string `mapstructure:"caFile" help:"CA that signed the brokers' certificates; empty means the system's roots."`
	CertFile           string `mapstructure:"certFile" help:"Client certificate (PEM), for brokers that authenticate by certificate. Set together with keyFile."`
	KeyFile            string `mapstructure:"keyFile" help:"Private key (PEM) of certFile."`
	InsecureSkipVerify bool   `mapstructure:"insecureSkipVerify" help:"Do not verify the brokers' certificates. For tests only."`
}

// SASLConfig is kafka.sasl.
type SASLConfig struct {
	Mechanism string `mapstructure:"mechanism" help:"plain, scram-sha-256 or scram-sha-512; empty for none."`
	Username  string `mapstructure:"username" help:"SASL user name."`
	Password  string `mapstructure:"password" help:"SASL password; set it in the environment (SUNSET_KAFKA_SASL_PASSWORD) rather than in a file."`
	// PLAIN sends the password as it is: only TLS keeps it from the
	// network. SCRAM never sends it.
	AllowPlaintext bool `mapstructure:"allowPlaintext" help:"Allow mechanism plain without kafka.tls, which sends the password unencrypted to every broker; a warning is logged at start. For test brokers only."`
}

// Enabled reports whether Kafka's consumer is configured.
func (c Config) Enabled() bool {
	return len(c.Brokers) > 0 || len(c.Topics) > 0
}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.GroupID == "" {
		c.GroupID = "sunset"
	}
	if c.ClientID == "" {
		c.ClientID = "sunset"
	}
	if c.StartOffset == "" {
		c.StartOffset = "earliest"
	}
	if c.MinBytes == 0 {
		c.MinBytes = 1
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxDecompressedBytes == 0 {
		c.MaxDecompressedBytes = DefaultMaxDecompressedBytes
	}
	if c.QueueCapacity == 0 {
		c.QueueCapacity = DefaultQueueCapacity
	}
	if c.BatchBytes == 0 {
		c.BatchBytes = DefaultBatchBytes
	}
	if c.MaxPartitions == 0 {
		c.MaxPartitions = DefaultMaxPartitions
	}
	if c.MemoryBudget == 0 {
		c.MemoryBudget = DefaultMemoryBudget
	}
	if c.MaxWait == 0 {
		c.MaxWait = 500 * time.Millisecond
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = c.SessionTimeout
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1000
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = time.Second
	}
	if c.BatchWait == 0 {
		c.BatchWait = 100 * time.Millisecond
	}
	if c.EnvelopeFields == nil {
		c.EnvelopeFields = []string{"log", "message"}
	}
	if c.Node == "" {
		c.Node = "kafka"
	}
	return c
}

// Validate checks every key of a consumer of kafka.topics, naming each; it
// does not contact the brokers.
func (c Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	return c.ValidateFor("kafka.topics", true)
}

// ValidateFor checks every key, naming each, for whatever reads Kafka with
// these settings: by is the key that asks for the brokers (kafka.topics,
// or the fleet's kafka.fleet.topic or kafka.forward), and topics whether
// kafka.topics is needed too. It does not contact the brokers.
func (c Config) ValidateFor(by string, topics bool) error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("kafka.%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if len(c.Brokers) == 0 {
		bad("brokers", "is required when %s is set, e.g. [kafka-0:9092]", by)
	}
	for _, b := range c.Brokers {
		if !strings.Contains(b, ":") {
			bad("brokers", "%q is not host:port", b)
		}
	}
	if len(c.Topics) == 0 && topics {
		bad("topics", "is required when kafka.brokers is set (or kafka.fleet.topic, to count a fleet's requests)")
	}
	if c.StartOffset != "earliest" && c.StartOffset != "latest" {
		bad("startOffset", "%q is not one of earliest, latest", c.StartOffset)
	}
	if c.MinBytes < 1 || c.MaxBytes < c.MinBytes {
		bad("maxBytes", "must be at least minBytes (%d), got %d", c.MinBytes, c.MaxBytes)
	}
	if c.MaxDecompressedBytes < 1<<20 {
		bad("maxDecompressedBytes", "must be at least 1048576 (1 MiB), got %d", c.MaxDecompressedBytes)
	}
	if c.SessionTimeout < time.Second {
		// Brokers enforce their own minimum (6s by default) at join time.
		bad("sessionTimeout", "%s is below 1s", c.SessionTimeout)
	}
	if c.RebalanceTimeout < time.Second {
		bad("rebalanceTimeout", "%s is below 1s", c.RebalanceTimeout)
	}
	if c.BatchSize < 1 {
		bad("batchSize", "must be at least 1")
	}
	c.validateBudget(bad)
	c.validateTopicClusters(bad)
	switch c.SASL.Mechanism {
	case "":
	case "plain", "scram-sha-256", "scram-sha-512":
		if c.SASL.Username == "" {
			bad("sasl.username", "is required with kafka.sasl.mechanism %s", c.SASL.Mechanism)
		}
		if c.PlainOverPlaintext() && !c.SASL.AllowPlaintext {
			bad("sasl.mechanism", "plain without kafka.tls sends the password unencrypted; enable kafka.tls (or use scram-sha-512), or set kafka.sasl.allowPlaintext for a test broker")
		}
	default:
		bad("sasl.mechanism", "%q is not one of plain, scram-sha-256, scram-sha-512", c.SASL.Mechanism)
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		bad("tls.certFile", "tls.certFile and tls.keyFile must be set together")
	}
	// A slice, not a map, so that messages keep one order.
	for _, f := range []struct{ key, path string }{{"tls.caFile", c.TLS.CAFile}, {"tls.certFile", c.TLS.CertFile}, {"tls.keyFile", c.TLS.KeyFile}} {
		if key, path := f.key, f.path; path != "" {
			if _, err := os.Stat(path); err != nil {
				bad(key, "cannot read %s", path)
			}
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// tlsEnabled reports whether connections to the brokers use TLS.
func (c Config) tlsEnabled() bool {
	return c.TLS.Enabled || c.TLS.CAFile != "" || c.TLS.CertFile != ""
}

// PlainOverPlaintext reports whether the SASL PLAIN password would cross
// the network unencrypted.
func (c Config) PlainOverPlaintext() bool {
	return c.SASL.Mechanism == "plain" && !c.tlsEnabled()
}

// WarnInsecure logs, once at start, the settings that expose credentials:
// SASL PLAIN without TLS, allowed by kafka.sasl.allowPlaintext.
func (c Config) WarnInsecure(log zerolog.Logger) {
	if c.Enabled() && c.PlainOverPlaintext() && c.SASL.AllowPlaintext {
		log.Warn().Strs("brokers", c.Brokers).Msg("kafka.sasl.allowPlaintext: the SASL PLAIN password is sent to the brokers unencrypted; enable kafka.tls")
	}
}

func (c Config) startOffset() int64 {
	if c.StartOffset == "latest" {
		return kafkago.LastOffset
	}
	return kafkago.FirstOffset
}

// Dialer builds the connection settings (client ID, TLS, SASL) shared by
// every connection to the brokers.
func (c Config) Dialer() (*kafkago.Dialer, error) {
	d := &kafkago.Dialer{ClientID: c.ClientID, Timeout: 10 * time.Second, DualStack: true}
	if c.tlsEnabled() {
		tc := &tls.Config{InsecureSkipVerify: c.TLS.InsecureSkipVerify} //nolint:gosec // configured by the admin
		if c.TLS.CAFile != "" {
			pool, err := tlsutil.LoadCertPool(c.TLS.CAFile)
			if err != nil {
				return nil, fmt.Errorf("kafka.tls.caFile: %w", err)
			}
			tc.RootCAs = pool
		}
		if c.TLS.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(c.TLS.CertFile, c.TLS.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("kafka.tls.certFile: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		d.TLS = tc
	}
	var mech sasl.Mechanism
	switch c.SASL.Mechanism {
	case "plain":
		mech = plain.Mechanism{Username: c.SASL.Username, Password: c.SASL.Password}
	case "scram-sha-256", "scram-sha-512":
		algo := scram.SHA256
		if c.SASL.Mechanism == "scram-sha-512" {
			algo = scram.SHA512
		}
		m, err := scram.Mechanism(algo, c.SASL.Username, c.SASL.Password)
		if err != nil {
			return nil, fmt.Errorf("kafka.sasl: %w", err)
		}
		mech = m
	}
	d.SASLMechanism = mech
	return d, nil
}
