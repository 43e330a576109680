package gke

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"

	"github.com/kube-sunset/sunset/countkey"
)

// DefaultMaxOutstanding is how many messages are held unacknowledged at
// once by default: the Pub/Sub client's own default, and far more than a
// commit needs to be worth its fsync.
const DefaultMaxOutstanding = 1000

// maxMaxOutstanding bounds MaxOutstanding: each message can be up to
// MaxMessageBytes, and they are all held until their commit.
const maxMaxOutstanding = 100000

// DefaultMaxOutstandingBytes bounds the bytes of the messages held at once
// by default: 64 of the largest messages, where the client's own default
// (1 GB) is twice the shipped pod's memory. Decoding a message takes two
// to three times its size while its callback runs.
const DefaultMaxOutstandingBytes = 64 << 20

// maxMaxOutstandingBytes is the client's own default, the most it can
// usefully be given.
const maxMaxOutstandingBytes = 1 << 30

// Config is one GKE input: a Pub/Sub subscription that a Log Router sink
// feeds with a cluster's Kubernetes audit LogEntries. Defaults are filled
// by WithDefaults, so that a config file that leaves a key out and a zero
// value mean the same.
type Config struct {
	Cluster        string `mapstructure:"cluster" help:"Sunset cluster the subscription's requests are counted under (required)."`
	Subscription   string `mapstructure:"subscription" help:"Pub/Sub subscription a Log Router sink of the cluster's audit logs feeds, as projects/<project>/subscriptions/<name> (required). Sunset needs roles/pubsub.subscriber on it, through Workload Identity or Application Default Credentials."`
	MaxOutstanding int    `mapstructure:"maxOutstanding" help:"Messages received but not yet committed and acknowledged, at most; Pub/Sub holds back the rest. Each is acknowledged only once its counts are on disk."`
	// MaxOutstandingBytes bounds the same messages by their size, so that
	// what a sink may send cannot outgrow the pod's memory.
	MaxOutstandingBytes int    `mapstructure:"maxOutstandingBytes" help:"Bytes of the messages received but not yet committed and acknowledged, at most (at least 1 MiB, the largest message read); Pub/Sub holds back the rest. Decoding one takes two to three times its size, so Sunset's memory for a subscription is at most about four times this."`
	Endpoint            string `mapstructure:"endpoint" help:"Pub/Sub endpoint as host:port, for a regional or private endpoint; empty means the global one (or PUBSUB_EMULATOR_HOST's emulator when that is set)."`
}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.MaxOutstanding == 0 {
		c.MaxOutstanding = DefaultMaxOutstanding
	}
	if c.MaxOutstandingBytes == 0 {
		c.MaxOutstandingBytes = DefaultMaxOutstandingBytes
	}
	return c
}

// subscriptionRe is a full subscription name. Project IDs are lower case,
// with a domain prefix for old ones (example.com:project); subscription
// IDs start with a letter and are 3 to 255 characters, as Pub/Sub
// requires.
var subscriptionRe = regexp.MustCompile(`^projects/([a-z0-9][a-z0-9.:-]*[a-z0-9])/subscriptions/([A-Za-z][A-Za-z0-9._~+%-]{2,254})$`)

// project is the project of the subscription, which the client needs; ""
// when the name is not a full subscription name.
func (c Config) project() string {
	m := subscriptionRe.FindStringSubmatch(c.Subscription)
	if m == nil {
		return ""
	}
	return m[1]
}

// Validate checks every field, naming each by its key (cluster,
// subscription, ...) so that the caller can prefix where the config came
// from; it does not contact Pub/Sub. Call it on WithDefaults' result.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	switch {
	case c.Cluster == "":
		bad("cluster", "is required: the name the cluster's requests are counted under, e.g. prod-gke")
	case len(c.Cluster) > countkey.MaxClusterBytes:
		bad("cluster", "is %d bytes, longer than %d", len(c.Cluster), countkey.MaxClusterBytes)
	}
	switch {
	case c.Subscription == "":
		bad("subscription", "is required: the Pub/Sub subscription of the Log Router sink's topic, e.g. projects/my-project/subscriptions/sunset-gke-audit")
	case c.project() == "":
		bad("subscription", "%q is not projects/<project>/subscriptions/<name>, e.g. projects/my-project/subscriptions/sunset-gke-audit", truncate(c.Subscription))
	case strings.HasPrefix(c.Subscription[strings.LastIndexByte(c.Subscription, '/')+1:], "goog"):
		bad("subscription", "names starting with goog are reserved by Pub/Sub")
	}
	if c.MaxOutstanding < 1 || c.MaxOutstanding > maxMaxOutstanding {
		bad("maxOutstanding", "must be between 1 and %d, got %d", maxMaxOutstanding, c.MaxOutstanding)
	}
	if c.MaxOutstandingBytes < MaxMessageBytes || c.MaxOutstandingBytes > maxMaxOutstandingBytes {
		bad("maxOutstandingBytes", "must be between %d (the largest message read) and %d, got %d", MaxMessageBytes, maxMaxOutstandingBytes, c.MaxOutstandingBytes)
	}
	if c.Endpoint != "" {
		if host, port, err := net.SplitHostPort(c.Endpoint); err != nil || host == "" || port == "" {
			bad("endpoint", "%q is not host:port, e.g. europe-west1-pubsub.googleapis.com:443", truncate(c.Endpoint))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// truncate keeps configured values in messages short.
func truncate(s string) string { return countkey.Truncate(s, 120) }
