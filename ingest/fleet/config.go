package fleet

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kube-sunset/sunset/ingest/kafka"
)

// Config is the kafka.fleet key: replicas that share a topic of compact
// request records, so that each one answers for the whole fleet. It is
// declared here, where it is run, beside Kafka's own settings
// (kafka.Config); package config places both under the kafka key.
type Config struct {
	Topic string `mapstructure:"topic" help:"Topic of request records. Setting it turns fleet mode on: kafka.topics are then filtered into it instead of counted here. See fleet.md."`
	// Count is a pointer so that a file that leaves it out means true.
	Count       *bool  `mapstructure:"count" default:"true" help:"Consume every partition of kafka.fleet.topic into this replica's store; false makes a replica that only filters or forwards. Unset means true."`
	Compression string `mapstructure:"compression" help:"Compression of the records produced: none, gzip, snappy, lz4 or zstd."`
	// The keys are secrets: a file or the environment, never the
	// config file alone.
	KeysFile string `mapstructure:"keysFile" help:"File of the keys that sign fleet records, one per line: <cluster> <key id> <secret, base64 of at least 32 bytes>. Producers sign each record with the first key of its cluster; counting replicas count only records signed by a key of the record's own cluster. With no keys, records are neither signed nor checked. See fleet.md#who-may-write-for-a-cluster."`
	Keys     string `mapstructure:"keys" help:"Keys as in keysFile, lines or comma-separated entries, added to keysFile's: set SUNSET_KAFKA_FLEET_KEYS rather than writing them in the config file."`
}

// Key is a key that signs the fleet records of one cluster.
type Key struct {
	Cluster, ID string
	Secret      []byte
}

// minSecret is the least secret HMAC-SHA256 is given: its own size.
const minSecret = 32

var keyID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// LoadKeys reads kafka.fleet.keysFile and kafka.fleet.keys, in that
// order; a cluster's first key signs. Errors name the key and the line,
// never a secret.
func (f Config) LoadKeys() ([]Key, error) {
	var keys []Key
	var errs []error
	seen := map[[2]string]bool{}
	parse := func(key, unit string, lines []string) {
		for i, line := range lines {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			fields := strings.Fields(line)
			bad := func(format string, args ...any) {
				errs = append(errs, &KeyError{Key: key, Err: fmt.Errorf("%s %d: %s", unit, i+1, fmt.Sprintf(format, args...))})
			}
			if len(fields) != 3 {
				bad("want <cluster> <key id> <secret>, got %d fields", len(fields))
				continue
			}
			k := Key{Cluster: fields[0], ID: fields[1]}
			if !keyID.MatchString(k.ID) {
				bad("key id %q is not 1 to 64 of A-Z a-z 0-9 . _ -", k.ID)
				continue
			}
			secret, err := base64.StdEncoding.DecodeString(fields[2])
			if err != nil {
				secret, err = base64.RawStdEncoding.DecodeString(fields[2])
			}
			switch {
			case err != nil:
				bad("the secret of key %s is not base64", k.ID)
				continue
			case len(secret) < minSecret:
				bad("the secret of key %s is %d bytes, at least %d are needed (openssl rand -base64 32)", k.ID, len(secret), minSecret)
				continue
			case seen[[2]string{k.Cluster, k.ID}]:
				bad("key %s of cluster %s is given twice", k.ID, k.Cluster)
				continue
			}
			seen[[2]string{k.Cluster, k.ID}] = true
			k.Secret = secret
			keys = append(keys, k)
		}
	}
	if f.KeysFile != "" {
		raw, err := os.ReadFile(f.KeysFile)
		if err != nil {
			errs = append(errs, &KeyError{Key: "keysFile", Err: fmt.Errorf("cannot read %s", f.KeysFile)})
		} else {
			parse("keysFile", f.KeysFile+" line", strings.Split(string(raw), "\n"))
		}
	}
	if f.Keys != "" {
		parse("keys", "entry", strings.FieldsFunc(f.Keys, func(r rune) bool { return r == '\n' || r == ',' }))
	}
	return keys, errors.Join(errs...)
}

// KeyError is a fleet key that cannot be used, and the config key
// (keysFile or keys) that gave it.
type KeyError struct {
	Key string
	Err error
}

func (e *KeyError) Error() string { return "kafka.fleet." + e.Key + ": " + e.Err.Error() }

// Enabled reports whether fleet mode is on.
func (f Config) Enabled() bool { return f.Topic != "" }

// Counts reports whether this replica counts the fleet's records.
func (f Config) Counts() bool { return f.Enabled() && (f.Count == nil || *f.Count) }

// codecs are the kafka.fleet.compression values.
var codecs = map[string]kafkago.Compression{"none": 0, "gzip": kafkago.Gzip, "snappy": kafkago.Snappy, "lz4": kafkago.Lz4, "zstd": kafkago.Zstd}

// Codec is the configured compression.
func (f Config) Codec() kafkago.Compression { return codecs[f.Compression] }

// WithDefaults fills unset fields.
func (f Config) WithDefaults() Config {
	if f.Compression == "" {
		f.Compression = "lz4"
	}
	return f
}

// Validate checks the kafka key as fleet mode reads it, every problem at
// once, each naming its key: Kafka's settings k, which the fleet's topic or
// forward (kafka.forward) need as much as kafka.topics does, and the fleet's
// own keys against them. Call it with defaults filled in.
func (f Config) Validate(k kafka.Config, forward bool) error {
	// The key that asks for the brokers, for the message that they are
	// missing; the fleet's count has work without audit topics.
	by := "kafka.topics"
	switch {
	case len(k.Topics) > 0:
	case f.Enabled():
		by = "kafka.fleet.topic"
	case forward:
		by = "kafka.forward"
	}
	var errs []error
	if k.Enabled() || f.Enabled() || forward {
		errs = unjoin(k.ValidateFor(by, !f.Enabled()))
	}
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("kafka.%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if !f.Enabled() {
		if forward {
			bad("forward", "needs kafka.fleet.topic, the topic to forward requests to")
		}
	} else {
		f.validate(k.Topics, forward, bad)
	}
	// Kafka's and the fleet's problems in one order, as before they were
	// apart.
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// validate checks the fleet's keys, when fleet mode is on.
func (f Config) validate(topics []string, forward bool, bad func(key, format string, args ...any)) {
	if slices.Contains(topics, f.Topic) {
		bad("fleet.topic", "%q is also in kafka.topics; the audit topics and the fleet's topic must differ", f.Topic)
	}
	if _, ok := codecs[f.Compression]; !ok {
		bad("fleet.compression", "%q is not one of none, gzip, snappy, lz4, zstd", f.Compression)
	}
	if !f.Counts() && len(topics) == 0 && !forward {
		bad("fleet.count", "false leaves nothing to do without kafka.topics (filter) or kafka.forward")
	}
	if _, err := f.LoadKeys(); err != nil {
		for _, e := range unjoin(err) {
			var ke *KeyError
			if errors.As(e, &ke) {
				bad("fleet."+ke.Key, "%s", ke.Err.Error())
			}
		}
	}
}

// unjoin splits an errors.Join.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
