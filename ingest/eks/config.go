package eks

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kube-sunset/sunset/countkey"
)

// Config is one EKS cluster's audit log source. Defaults are filled by
// WithDefaults, so that a config file that leaves a key out and a zero
// value mean the same.
type Config struct {
	Cluster      string        `mapstructure:"cluster" help:"The cluster name Sunset counts this EKS cluster's requests under. Required."`
	Region       string        `mapstructure:"region" help:"AWS Region of the cluster's log group, e.g. eu-west-1; empty means the SDK's default (AWS_REGION, the shared config file)."`
	LogGroup     string        `mapstructure:"logGroup" help:"CloudWatch Logs group of the control-plane logs; empty means /aws/eks/<cluster>/cluster, where EKS writes them when the audit log type is on."`
	StreamPrefix string        `mapstructure:"streamPrefix" help:"Prefix of the log streams that hold kube-apiserver's audit events, one per apiserver; the group's other streams (authenticator, scheduler) are passed over."`
	PollInterval time.Duration `mapstructure:"pollInterval" help:"How often the log group is read (at least 1s). FilterLogEvents' quota is 5 calls a second per account and Region, shared with every other caller."`
	Overlap      time.Duration `mapstructure:"overlap" help:"How far behind its stream's newest event an event may arrive and still count on time (up to 1h), since CloudWatch can deliver an event after later ones. Each apiserver's stream keeps its own position, so a stream behind another's loses nothing; every overlap a sweep reads each stream again from two overlaps behind where it stood, so an event up to twice this late still counts, and is reported in sunset_eks_late_events_total. Events read twice count once."`
	StartFrom    time.Duration `mapstructure:"startFrom" help:"How far back a cluster read for the first time starts; after that, reading resumes where the committed counts end."`
	PageSize     int           `mapstructure:"pageSize" help:"Most log events one FilterLogEvents call returns, and one commit holds (1 to 10000); CloudWatch also stops a page at 1 MB. Smaller pages commit more often and hold less in memory, at the cost of more calls against the shared quota."`
	Endpoint     string        `mapstructure:"endpoint" help:"CloudWatch Logs endpoint URL, for a VPC interface endpoint or a test server; empty means the Region's."`
}

// Defaults of the fields WithDefaults fills.
const (
	DefaultStreamPrefix = "kube-apiserver-audit-"
	DefaultPollInterval = 15 * time.Second
	DefaultOverlap      = 5 * time.Minute
	DefaultStartFrom    = time.Hour
	// DefaultPageSize is FilterLogEvents' own most.
	DefaultPageSize = 10000
)

// Bounds Validate holds the fields to.
const (
	// minPollInterval keeps one source well under the account's shared
	// 5 calls a second.
	minPollInterval = time.Second
	// maxOverlap bounds how much every poll reads again, and so how many
	// event IDs the checkpoint must remember (maxSeen).
	maxOverlap = time.Hour
	// maxLogGroupBytes and maxStreamPrefixBytes are CloudWatch's own
	// limits on the names.
	maxLogGroupBytes     = 512
	maxStreamPrefixBytes = 512
)

// logGroupName is CloudWatch's pattern for log group names.
var logGroupName = regexp.MustCompile(`^[.\-_/#A-Za-z0-9]+$`)

// regionName is loose on purpose: partitions add Regions and shapes
// (us-gov-west-1, eu-isoe-west-1), and the SDK refuses what is not one.
var regionName = regexp.MustCompile(`^[a-z]{2,}(-[a-z0-9]+)+$`)

// DefaultLogGroup is where EKS writes a cluster's control-plane logs.
func DefaultLogGroup(eksCluster string) string { return "/aws/eks/" + eksCluster + "/cluster" }

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.LogGroup == "" && c.Cluster != "" {
		c.LogGroup = DefaultLogGroup(c.Cluster)
	}
	if c.StreamPrefix == "" {
		c.StreamPrefix = DefaultStreamPrefix
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Overlap == 0 {
		c.Overlap = DefaultOverlap
	}
	if c.StartFrom == 0 {
		c.StartFrom = DefaultStartFrom
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	return c
}

// Validate checks every key, naming each under key (ingest.eks[0]); it does
// not contact AWS. Call it on WithDefaults' result.
func (c Config) Validate(key string) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", key, field, fmt.Sprintf(format, args...)))
	}
	switch {
	case c.Cluster == "":
		bad("cluster", "is required: the name to count this EKS cluster's requests under, e.g. prod-eu (also the default log group's /aws/eks/<cluster>/cluster)")
	case len(c.Cluster) > countkey.MaxClusterBytes || strings.TrimSpace(c.Cluster) != c.Cluster:
		bad("cluster", "must be at most %d bytes without surrounding spaces", countkey.MaxClusterBytes)
	}
	switch {
	case c.LogGroup == "":
		// Filled from the cluster's name, which is reported if missing.
		if c.Cluster != "" {
			bad("logGroup", "is required; EKS writes to /aws/eks/<EKS cluster name>/cluster")
		}
	case len(c.LogGroup) > maxLogGroupBytes || !logGroupName.MatchString(c.LogGroup):
		bad("logGroup", "%q is not a CloudWatch log group name (up to 512 of A-Z a-z 0-9 . - _ / #), e.g. /aws/eks/prod-eu/cluster", countkey.Truncate(c.LogGroup, 64))
	}
	switch {
	case c.StreamPrefix == "":
		bad("streamPrefix", "is required; EKS names audit streams %s<hash>", DefaultStreamPrefix)
	case len(c.StreamPrefix) > maxStreamPrefixBytes || strings.ContainsAny(c.StreamPrefix, ":*"):
		bad("streamPrefix", "is not a log stream name prefix (up to 512 characters, no : or *)")
	}
	if c.Region != "" && !regionName.MatchString(c.Region) {
		bad("region", "%q is not an AWS Region, e.g. eu-west-1", countkey.Truncate(c.Region, 64))
	}
	if c.PollInterval < minPollInterval {
		bad("pollInterval", "%s is below %s: FilterLogEvents allows 5 calls a second per account and Region, shared with every other caller", c.PollInterval, minPollInterval)
	}
	if c.Overlap < 0 || c.Overlap > maxOverlap {
		bad("overlap", "%s is outside 0 to %s; EKS delivers within a few minutes, and the default is %s", c.Overlap, maxOverlap, DefaultOverlap)
	}
	if c.PageSize < 1 || c.PageSize > DefaultPageSize {
		bad("pageSize", "%d is outside 1 to %d, FilterLogEvents' limit", c.PageSize, DefaultPageSize)
	}
	if c.StartFrom < 0 {
		bad("startFrom", "%s is negative; it is how far back a cluster read for the first time starts, e.g. 1h", c.StartFrom)
	}
	if c.Endpoint != "" {
		if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("endpoint", "is not an http(s) URL, e.g. https://logs.eu-west-1.amazonaws.com or a VPC endpoint's https://vpce-....logs.eu-west-1.vpce.amazonaws.com")
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}
