package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/countkey"
)

// recordVersion is the format of the records this build writes and reads.
// A replica meeting a higher one is older than its peers and must be
// upgraded; it skips those records as poison rather than guess.
const recordVersion = 1

// record is one request that counts, as it travels on the fleet's topic:
// where it is counted and who was behind it, already classified, and never
// any part of a request or response body. JSON keeps it readable with
// kcat; the topic's compression takes the repeated names away.
type record struct {
	V              int       `json:"v"`
	Cluster        string    `json:"cluster"`
	ID             string    `json:"id"`
	API            string    `json:"api"`
	Subresource    string    `json:"subresource,omitempty"`
	Hour           time.Time `json:"hour"`
	Node           string    `json:"node"`
	User           string    `json:"user"`
	UserAgent      string    `json:"userAgent,omitempty"`
	Verb           string    `json:"verb"`
	DryRun         bool      `json:"dryRun,omitempty"`
	Removed        bool      `json:"removed,omitempty"`
	RemovedRelease string    `json:"removedRelease,omitempty"`
	Seen           *seen     `json:"seen,omitempty"`
}

// wireFieldRulePrefix starts the api of a field rule's match on the wire,
// followed by the rule's name: records keep the format of replicas that
// stored field rules as APIs so named.
const wireFieldRulePrefix = "field:"

// seen is countkey.Sighting on the wire.
type seen struct {
	Pod            string    `json:"pod,omitempty"`
	PodNode        string    `json:"podNode,omitempty"`
	SourceIPs      ipList    `json:"sourceIPs,omitempty"`
	ImpersonatedBy string    `json:"impersonatedBy,omitempty"`
	At             time.Time `json:"at"`
}

func toRecord(r countkey.Request) record {
	k := r.Key
	api := k.API
	if r.FieldRule != "" {
		api = wireFieldRulePrefix + r.FieldRule
	}
	rec := record{V: recordVersion, Cluster: k.Cluster, ID: r.ID, API: api, Subresource: k.Subresource, Hour: k.Hour.UTC(),
		Node: k.Node, User: k.Username, UserAgent: k.UserAgent, Verb: k.Verb, DryRun: k.DryRun, Removed: k.Removed,
		RemovedRelease: r.RemovedRelease}
	if s := r.Seen; s != nil {
		rec.Seen = &seen{Pod: s.PodName, PodNode: s.PodNode, SourceIPs: s.SourceIPs, ImpersonatedBy: s.ImpersonatedBy, At: s.At}
	}
	return rec
}

func (rec record) request() countkey.Request {
	r := countkey.Request{ID: rec.ID, RemovedRelease: rec.RemovedRelease, Key: countkey.CountKey{
		Cluster: rec.Cluster,
		API:     rec.API,
		Cell: countkey.Cell{Hour: rec.Hour.UTC(), Node: rec.Node, Subresource: rec.Subresource,
			Username: rec.User, UserAgent: rec.UserAgent, Verb: rec.Verb, DryRun: rec.DryRun},
		Removed: rec.Removed,
	}}
	if rule, ok := strings.CutPrefix(rec.API, wireFieldRulePrefix); ok && rule != "" {
		r.FieldRule, r.Key.API = rule, ""
	}
	if s := rec.Seen; s != nil {
		r.Seen = &countkey.Sighting{PodName: s.Pod, PodNode: s.PodNode, SourceIPs: addresses(s.SourceIPs), ImpersonatedBy: s.ImpersonatedBy, At: s.At.UTC()}
	}
	return r
}

// addresses keeps the entries that are IP addresses, as net/netip reads
// them; a record's sender chose them.
func addresses(ips []string) []string {
	var out []string
	for _, ip := range ips {
		if _, err := netip.ParseAddr(ip); err == nil {
			out = append(out, ip)
		}
	}
	return out
}

// Reasons a record is skipped. Values are metric labels.
const (
	reasonMalformed    = "malformed"
	reasonNewVersion   = "unknown_version"
	reasonUnknownField = "unknown_field"
	reasonTooLong      = "too_long"
	// reasonBadRemovedRelease is a record counted without its
	// removedRelease, which was not a release such as "1.37".
	reasonBadRemovedRelease = "bad_removed_release"
	reasonFuture            = "future"
	// reasonTooLarge is a record batch that decompresses to more than
	// kafka.maxDecompressedBytes, counted once for the whole batch.
	reasonTooLarge = "too_large"
)

var (
	errMalformed    = errors.New("fleet: malformed record")
	errNewVersion   = errors.New("fleet: record from a newer Sunset; upgrade this replica")
	errUnknownField = errors.New("fleet: record with a field this version does not know")
	errTooLong      = errors.New("fleet: record with a value over its bound")
	errFuture       = errors.New("fleet: record of an hour in the future")
)

// reason is the metric label of a decodeRecord error.
func reason(err error) string {
	for _, r := range []struct {
		err    error
		reason string
	}{{errNewVersion, reasonNewVersion}, {errUnknownField, reasonUnknownField}, {errTooLong, reasonTooLong}, {errFuture, reasonFuture}} {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return reasonMalformed
}

// maxClockSkew is how far after the reader's clock a record's hour may
// begin: replicas' clocks drift a little, and the current hour begins
// before now. A record of a later hour is bogus, and counting it would
// fill hours no check looks at yet.
const maxClockSkew = 10 * time.Minute

// Bounds of a record's fields that the store's key bounds do not give.
const (
	// maxRecordIDBytes is a request's identity (at most countkey.MaxIDBytes)
	// followed, for a field rule's match, by the rule's name.
	maxRecordIDBytes = countkey.MaxIDBytes + len("#field:") + countkey.MaxRuleBytes
	// maxReleaseBytes is the decoder's bound on k8s.io/removed-release, so
	// that a forwarded copy and the original agree.
	maxReleaseBytes = countkey.MaxReleaseBytes
	maxPodBytes     = 253
	maxIPBytes      = 64
)

// decodeRecord reads and checks one record. Every field is a sender's: a
// record is read only with fields this version knows, and each within its
// bound, so that nothing it holds can make the store refuse a commit.
func decodeRecord(value []byte, now time.Time) (countkey.Request, error) {
	var rec record
	if !readRecord(value, &rec) {
		var err error
		if rec, err = decodeRecordJSON(value); err != nil {
			return countkey.Request{}, err
		}
	}
	switch {
	case rec.V > recordVersion:
		return countkey.Request{}, fmt.Errorf("%w (version %d)", errNewVersion, rec.V)
	case rec.V < 1:
		return countkey.Request{}, fmt.Errorf("%w: no version", errMalformed)
	case rec.Cluster == "" || rec.ID == "" || rec.API == "":
		return countkey.Request{}, fmt.Errorf("%w: cluster, id and api are required", errMalformed)
	case rec.Hour.IsZero() || !rec.Hour.Equal(rec.Hour.Truncate(time.Hour)):
		return countkey.Request{}, fmt.Errorf("%w: hour %s is not a whole hour", errMalformed, rec.Hour)
	case rec.Hour.After(now.Add(maxClockSkew)):
		return countkey.Request{}, fmt.Errorf("%w: %s", errFuture, rec.Hour.UTC().Format(time.RFC3339))
	}
	if field := rec.tooLong(); field != "" {
		return countkey.Request{}, fmt.Errorf("%w: %s", errTooLong, field)
	}
	return rec.request(), nil
}

// decodeCounted is decodeRecord, and also names what was dropped from a
// record that still counts ("" if nothing): a removedRelease that is not
// a release such as "1.37" as the forwarder writes it, dropped as the
// webhook and Kafka paths drop such an annotation, so that the record
// counts as if it had none.
func decodeCounted(value []byte, now time.Time) (countkey.Request, string, error) {
	req, err := decodeRecord(value, now)
	if err != nil || req.RemovedRelease == "" {
		return req, "", err
	}
	if r, err := catalog.ParseRelease(req.RemovedRelease); err != nil || r.String() != req.RemovedRelease {
		req.RemovedRelease = ""
		return req, reasonBadRemovedRelease, nil
	}
	return req, "", nil
}

// decodeRecordJSON decodes a record with encoding/json, which has the
// last word on anything readRecord declines.
func decodeRecordJSON(value []byte) (record, error) {
	var rec record
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		if strings.HasPrefix(err.Error(), "json: unknown field ") {
			// The error names the field, which the sender chose: say
			// only that there was one.
			return record{}, errUnknownField
		}
		return record{}, fmt.Errorf("%w: %w", errMalformed, err)
	}
	if dec.More() {
		return record{}, fmt.Errorf("%w: data after the record", errMalformed)
	}
	return rec, nil
}

// tooLong names the first field of rec over its bound, or is empty.
func (rec record) tooLong() string {
	api := countkey.MaxAPIBytes
	if strings.HasPrefix(rec.API, wireFieldRulePrefix) {
		api = len(wireFieldRulePrefix) + countkey.MaxRuleBytes
	}
	for _, f := range []struct {
		name  string
		value string
		max   int
	}{
		{"cluster", rec.Cluster, countkey.MaxClusterBytes},
		{"id", rec.ID, maxRecordIDBytes},
		{"api", rec.API, api},
		{"subresource", rec.Subresource, countkey.MaxSubresourceBytes},
		{"node", rec.Node, countkey.MaxNodeBytes},
		{"user", rec.User, countkey.MaxUsernameBytes},
		{"userAgent", rec.UserAgent, countkey.MaxUserAgentBytes},
		{"verb", rec.Verb, countkey.MaxVerbBytes},
		{"removedRelease", rec.RemovedRelease, maxReleaseBytes},
	} {
		if len(f.value) > f.max {
			return f.name
		}
	}
	if s := rec.Seen; s != nil {
		switch {
		case len(s.Pod) > maxPodBytes:
			return "seen.pod"
		case len(s.PodNode) > countkey.MaxNodeBytes:
			return "seen.podNode"
		case len(s.ImpersonatedBy) > countkey.MaxUsernameBytes:
			return "seen.impersonatedBy"
		case len(s.SourceIPs) > countkey.MaxSourceIPs:
			return "seen.sourceIPs"
		}
		for _, ip := range s.SourceIPs {
			if len(ip) > maxIPBytes {
				return "seen.sourceIPs"
			}
		}
	}
	return ""
}

// message is a request as a Kafka message. The key is the cluster and the
// request's auditID, so every record of one request (its API and its field
// matches, and all re-sent copies) lands in one partition, in order.
func message(r countkey.Request) (kafkago.Message, error) {
	value, err := json.Marshal(toRecord(r))
	if err != nil {
		return kafkago.Message{}, err
	}
	return kafkago.Message{Key: []byte(r.Key.Cluster + "/" + r.EventID()), Value: value}, nil
}

// ipList is a record's sourceIPs. Its JSON decoding keeps what
// readIPList keeps, so that the encoding/json path, which a sender reaches
// by spelling a record unusually, holds no more than the fast one.
type ipList []string

// UnmarshalJSON reads b as readIPList does.
func (l *ipList) UnmarshalJSON(b []byte) error {
	if end := readIPList(b, 0, 3, l); end != len(b) {
		return fmt.Errorf("%w: sourceIPs is not a list of strings", errMalformed)
	}
	return nil
}
