package fleet

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/ingest/kafka"
)

func TestConfigValidate(t *testing.T) {
	off := false
	brokers := []string{"kafka-0:9092"}
	for _, tc := range []struct {
		name    string
		kafka   kafka.Config
		fleet   Config
		forward bool
		want    string
	}{
		{"filter and count", kafka.Config{Brokers: brokers, Topics: []string{"audit"}}, Config{Topic: "sunset.requests"}, false, ""},
		{"count only", kafka.Config{Brokers: brokers}, Config{Topic: "sunset.requests"}, false, ""},
		{"forward only", kafka.Config{Brokers: brokers}, Config{Topic: "sunset.requests", Count: &off}, true, ""},
		{"fleet without brokers", kafka.Config{}, Config{Topic: "sunset.requests"}, false,
			"kafka.brokers: is required when kafka.fleet.topic is set, e.g. [kafka-0:9092]"},
		{"forward without a topic", kafka.Config{}, Config{}, true,
			"kafka.brokers: is required when kafka.forward is set, e.g. [kafka-0:9092]\n" +
				"kafka.forward: needs kafka.fleet.topic, the topic to forward requests to\n" +
				"kafka.topics: is required when kafka.brokers is set (or kafka.fleet.topic, to count a fleet's requests)"},
		{"same topic twice", kafka.Config{Brokers: brokers, Topics: []string{"audit"}}, Config{Topic: "audit"}, false,
			`kafka.fleet.topic: "audit" is also in kafka.topics; the audit topics and the fleet's topic must differ`},
		{"nothing to do", kafka.Config{Brokers: brokers}, Config{Topic: "sunset.requests", Count: &off}, false,
			"kafka.fleet.count: false leaves nothing to do without kafka.topics (filter) or kafka.forward"},
		{"unknown codec", kafka.Config{Brokers: brokers}, Config{Topic: "sunset.requests", Compression: "brotli"}, false,
			`kafka.fleet.compression: "brotli" is not one of none, gzip, snappy, lz4, zstd`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.fleet.WithDefaults().Validate(tc.kafka.WithDefaults(), tc.forward)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.want)
		})
	}
}

func TestKeysValidate(t *testing.T) {
	dir := t.TempDir()
	good := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	short := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 31))
	file := filepath.Join(dir, "keys")
	require.NoError(t, os.WriteFile(file, []byte("# comment\n\nprod k1 "+good+"\nprod k1 "+good+"\nprod k2\nprod k/3 "+good+"\n"), 0o600))
	brokers := []string{"kafka-0:9092"}
	for _, tc := range []struct {
		name string
		f    Config
		want string
	}{
		{"file and environment", Config{KeysFile: file + ".none", Keys: "dev d1 " + good + ",prod p1 " + good}, "kafka.fleet.keysFile: cannot read " + file + ".none"},
		{"environment", Config{Keys: "dev d1 " + good + "\nprod p1 " + strings.TrimRight(good, "=")}, ""},
		{"bad lines, never a secret", Config{KeysFile: file},
			"kafka.fleet.keysFile: " + file + " line 4: key k1 of cluster prod is given twice\n" +
				"kafka.fleet.keysFile: " + file + " line 5: want <cluster> <key id> <secret>, got 2 fields\n" +
				"kafka.fleet.keysFile: " + file + ` line 6: key id "k/3" is not 1 to 64 of A-Z a-z 0-9 . _ -`},
		{"short and not base64", Config{Keys: "dev d1 " + short + ",dev d2 !!!"},
			"kafka.fleet.keys: entry 1: the secret of key d1 is 31 bytes, at least 32 are needed (openssl rand -base64 32)\n" +
				"kafka.fleet.keys: entry 2: the secret of key d2 is not base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.Topic = "sunset.requests"
			err := tc.f.WithDefaults().Validate(kafka.Config{Brokers: brokers}.WithDefaults(), false)
			if tc.want == "" {
				require.NoError(t, err)
				keys, err := tc.f.LoadKeys()
				require.NoError(t, err)
				require.Len(t, keys, 2)
				require.Equal(t, Key{Cluster: "dev", ID: "d1", Secret: bytes.Repeat([]byte{7}, 32)}, keys[0])
				return
			}
			require.EqualError(t, err, tc.want)
			require.NotContains(t, err.Error(), good)
		})
	}
}
