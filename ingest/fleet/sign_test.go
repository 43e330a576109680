package fleet

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
)

// secret is a test key's secret: 32 bytes of b.
func secret(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func keyLine(cluster, id string, s []byte) string {
	return cluster + " " + id + " " + base64.StdEncoding.EncodeToString(s)
}

// fleetRecord is a record of cluster with the given id, at hour, with
// headers as given.
func fleetRecord(cluster, id string, hour time.Time, headers ...kafkago.Header) kafkago.Message {
	return kafkago.Message{Value: fmt.Appendf(nil, `{"v":1,"cluster":%q,"id":%q,"api":"endpoints.v1","hour":%q,"node":"n","user":"u","verb":"get"}`,
		cluster, id, hour.Format(time.RFC3339)), Headers: headers}
}

// signedWith signs m as key id with s, whatever cluster it names.
func signedWith(m kafkago.Message, id string, s []byte) kafkago.Message {
	m.Headers = append(m.Headers, kafkago.Header{Key: headerKeyID, Value: []byte(id)},
		kafkago.Header{Key: headerSignature, Value: mac(s, id, m.Value)})
	return m
}

// relabel moves a signed record to another cluster, keeping its headers:
// a record copied from one cluster's traffic and replayed as another's.
func relabel(m kafkago.Message, from, to string) kafkago.Message {
	m.Value = bytes.Replace(m.Value, []byte(`"cluster":"`+from+`"`), []byte(`"cluster":"`+to+`"`), 1)
	return m
}

// A counting replica with keys counts exactly the records signed by a key
// of the cluster they name, with either of a cluster's keys while one is
// being rotated, and refuses every other one by reason, without counting
// it, moving past it.
func TestCounterRefusesRecordsNotSignedForTheirCluster(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "fleet-signed", 1)
	hour := time.Now().UTC().Truncate(time.Hour)
	a1, a2, b1, stolen := secret('1'), secret('2'), secret('3'), secret('9')
	dir := t.TempDir()
	keysFile := filepath.Join(dir, "keys")
	// Cluster a's keys come from the file, b's from the environment's
	// value (kafka.fleet.keys); a is being rotated from a1 to a2.
	require.NoError(t, os.WriteFile(keysFile, []byte("# cluster key secret\n"+keyLine("a", "a2", a2)+"\n"+keyLine("a", "a1", a1)+"\n"), 0o600))

	genuineA := signedWith(fleetRecord("a", "a-1", hour), "a1", a1)
	msgs := []kafkago.Message{
		genuineA, // 0 ok
		signedWith(fleetRecord("a", "a-2", hour), "a2", a2), // 1 ok: the new key
		signedWith(fleetRecord("b", "b-1", hour), "b1", b1), // 2 ok
		// Whoever holds a's key writes for b.
		signedWith(fleetRecord("b", "forged-1", hour), "a1", a1), // 3 unknown_key
		// ... naming b's key.
		signedWith(fleetRecord("b", "forged-2", hour), "b1", a1), // 4 bad_signature
		// A wrong secret under a's own key id.
		signedWith(fleetRecord("a", "forged-3", hour), "a1", stolen), // 5 bad_signature
		fleetRecord("a", "forged-4", hour),                           // 6 unsigned
		// a's genuine record replayed as b's, with its headers.
		relabel(genuineA, "a", "b"), // 7 unknown_key
		// ... and with b's key id put in.
		relabel(signedWith(fleetRecord("a", "forged-5", hour), "b1", a1), "a", "b"), // 8 bad_signature
		// Two signatures: which one counts is not the reader's to pick.
		signedWith(signedWith(fleetRecord("a", "forged-6", hour), "a1", a1), "a1", a1), // 9 unsigned
		// a's genuine record again: a copy, counted once.
		genuineA, // 10 ok, a duplicate
		// A body changed after signing.
		func() kafkago.Message {
			m := signedWith(fleetRecord("a", "forged-7", hour), "a1", a1)
			m.Value = bytes.Replace(m.Value, []byte(`"verb":"get"`), []byte(`"verb":"delete"`), 1)
			return m
		}(), // 11 bad_signature
	}
	kafkatest.Produce(t, brokers, topic, kafkago.Lz4, msgs...)

	reg := prometheus.NewRegistry()
	c := ingesttest.NewCounter(t, t.TempDir(), time.Now, nil)
	f, err := New(Options{Config: kafka.Config{Brokers: brokers, BatchSize: 100, RetryBackoff: 5 * time.Millisecond},
		Fleet:      Config{Topic: topic, KeysFile: keysFile, Keys: keyLine("b", "b1", b1)},
		Aggregator: c, Tallies: c, Store: counterStore{c}, Logger: zerolog.Nop(), Registerer: reg})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	require.Eventually(t, func() bool { ok, _ := f.Ready(); return ok }, 30*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	for cluster, want := range map[string]uint64{"a": 2, "b": 1} {
		n, err := c.Requests(cluster, "endpoints.v1", hour, hour)
		require.NoError(t, err)
		require.Equal(t, want, n, cluster)
	}
	pos, ok, err := c.Cursor(f.counter.cursorName(0))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(len(msgs)), binary.BigEndian.Uint64(pos), "refused records are moved past")
	records := f.counter.metrics.records
	for result, want := range map[string]float64{"ok": 4, reasonUnknownKey: 2, reasonBadSignature: 4, reasonUnsigned: 2, reasonMalformed: 0} {
		require.Equal(t, want, testutil.ToFloat64(records.WithLabelValues(result)), result)
	}
}

// Producers sign with the first key of each record's cluster, and send
// no record of a cluster they hold no key of; after a rotation, records
// signed with the retired key are refused.
func TestKeyringSignsAndRotates(t *testing.T) {
	old, next := Key{Cluster: "a", ID: "old", Secret: secret('o')}, Key{Cluster: "a", ID: "new", Secret: secret('n')}
	req := countkey.Request{ID: "r", Key: countkey.CountKey{Cluster: "a", API: "endpoints.v1", Cell: countkey.Cell{Hour: hour}}}
	signed := func(k *keyring, r countkey.Request) (kafkago.Message, bool) {
		m, err := message(r)
		require.NoError(t, err)
		return m, k.sign(&m, r.Key.Cluster)
	}

	// 1. Counters learn the new key beside the old; producers still sign
	// with the old.
	producer, counter := newKeyring([]Key{old}), newKeyring([]Key{old, next})
	m, ok := signed(producer, req)
	require.True(t, ok)
	require.Equal(t, "old", string(m.Headers[0].Value))
	require.Empty(t, counter.verify(m, "a"))
	// 2. Producers sign with the new key first.
	producer = newKeyring([]Key{next, old})
	m2, ok := signed(producer, req)
	require.True(t, ok)
	require.Equal(t, "new", string(m2.Headers[0].Value))
	require.Empty(t, counter.verify(m2, "a"))
	// 3. The old key is retired: what it signs is refused.
	counter = newKeyring([]Key{next})
	require.Equal(t, reasonUnknownKey, counter.verify(m, "a"))
	require.Empty(t, counter.verify(m2, "a"))

	// No key of cluster b: nothing to sign with.
	other := req
	other.Key.Cluster = "b"
	_, ok = signed(producer, other)
	require.False(t, ok)
	require.Nil(t, newKeyring(nil), "no keys: records are neither signed nor checked")
}

// A publisher with keys does not send the requests of clusters it holds no
// key of, and counts them.
func TestPublisherSendsNoRecordItCannotSign(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "fleet-sign-pub", 1)
	m := newMetrics(prometheus.NewRegistry())
	cfg := settings{Config: kafka.Config{Brokers: brokers}.WithDefaults(), Fleet: Config{Topic: topic}.WithDefaults()}
	d, err := cfg.Dialer()
	require.NoError(t, err)
	k := Key{Cluster: "a", ID: "a1", Secret: secret('1')}
	p := newPublisher(cfg, d, zerolog.Nop(), m, newKeyring([]Key{k}))
	defer func() { require.NoError(t, p.close()) }()
	at := time.Now().UTC().Truncate(time.Hour)
	reqs := []countkey.Request{
		{ID: "1", Key: countkey.CountKey{Cluster: "a", API: "endpoints.v1", Cell: countkey.Cell{Hour: at}}},
		{ID: "2", Key: countkey.CountKey{Cluster: "b", API: "endpoints.v1", Cell: countkey.Cell{Hour: at}}},
	}
	require.NoError(t, p.publish(context.Background(), roleFilter, reqs))
	require.Equal(t, 1.0, testutil.ToFloat64(m.produced.WithLabelValues(roleFilter)))
	require.Equal(t, 1.0, testutil.ToFloat64(m.unsigned.WithLabelValues(roleFilter)))

	r := kafka.NewPartitionReader(cfg.Config, d, topic, 0, zerolog.Nop())
	defer func() { _ = r.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := r.FetchMessage(ctx)
	require.NoError(t, err)
	require.Empty(t, newKeyring([]Key{k}).verify(got, "a"))
}

// sourceIPs entries that are not IP addresses are dropped.
func TestFleetRecordDropsWhatIsNotAnAddress(t *testing.T) {
	got, err := decodeRecord([]byte(validRecord(`,"seen":{"sourceIPs":["10.0.0.1","not-an-ip","::1","10.0.0.1/8","","fe80::1%eth0"," 10.0.0.2"],"at":"2026-11-21T19:10:00Z"}`)), now)
	require.NoError(t, err)
	require.Equal(t, []string{"10.0.0.1", "::1", "fe80::1%eth0"}, got.Seen.SourceIPs)
	got, err = decodeRecord([]byte(validRecord(`,"seen":{"sourceIPs":["x"],"at":"2026-11-21T19:10:00Z"}`)), now)
	require.NoError(t, err)
	require.Empty(t, got.Seen.SourceIPs)
}
