package config

// help is the description of each key that a type of this package
// declares, by the key's name as Keys gives it; a section an input
// package declares (kafka.Config, eks.Config, gke.Config) carries its own
// in help tags. Keys takes it from here for the flags' usage and
// docs/configuration.md, and TestEveryKeyHasHelp and TestHelpNamesKeys
// hold it to the keys.
var help = map[string]string{
	"data-dir": "Badger's data directory. One server per directory: a second process that opens it is " +
		"refused and pointed at --server.",
	"listen": "Address of the webhook, the API, /metrics and the health endpoints. :8080 listens on every " +
		"address; beyond loopback, Sunset serves HTTPS only (tls-cert-file, else a certificate of its own " +
		"in cert-dir), readers must authenticate (or allow-unauthenticated be set) and the webhook needs " +
		"credentials (or webhook-allow-unauthenticated), else Sunset refuses to start.",
	"tls-cert-file": "Serve HTTPS (HTTP/2 and HTTP/1.1) with this PEM certificate. Set together with " +
		"tls-key-file.",
	"tls-key-file": "The PEM private key of tls-cert-file.",
	"cert-dir": "Where Sunset keeps the CA and serving certificate it makes for itself when it serves HTTPS " +
		"without tls-cert-file: ca.crt, ca.key, tls.crt and tls.key. It does so on any listen address " +
		"that is not loopback, and on loopback too when cert-dir is set. Kept across restarts; the " +
		"serving certificate (a year) is renewed 90 days before it ends under the same CA (ten years). " +
		"Empty means <data-dir>/certs.",
	"cert-hosts": "DNS names and IP addresses the certificate in cert-dir is for, beside localhost, " +
		"127.0.0.1 and ::1: the Service's names (sunset.sunset.svc) and the address kube-apiserver posts " +
		"to. A kept certificate that lacks one is made again.",
	"publish-ca-secret": "Keep the CA of cert-dir in this Secret (namespace/name), under ca.crt beside the " +
		"CAs of the other replicas, for the APIService's caBundle, Prometheus and kube-apiserver's " +
		"webhook kubeconfig to trust. Written through authentication-kubeconfig, else the in-cluster " +
		"config; needs get, create and update on that Secret.",
	"tls-client-ca-file": "The webhook requires a client certificate signed by this CA (401 otherwise), " +
		"issued as O=<cluster>, CN=<node>. Its common name names the node when the path has none; a node " +
		"in the path must be its common name or a subject alternative name, and the cluster the path " +
		"names one of its organizations (a certificate without O may post only to paths without a " +
		"cluster), and default-cluster, for a path without one, one of its organizations where it has any " +
		"(403 otherwise). Needs TLS. A reader's certificate from another CA never counts as the webhook's.",
	"webhook-token-file": "The webhook requires Authorization: Bearer <the file's contents> (401 otherwise), " +
		"from any apiserver.",
	"webhook-token-auth-file": "The webhook requires a bearer token from this CSV file, " +
		"token,user,uid[,\"groups\"] as kube-apiserver's --token-auth-file, where user is " +
		"<cluster>/<node> or <node>: each token posts only as that apiserver (401 for an unknown token, " +
		"403 for another apiserver's path).",
	"webhook-allow-unauthenticated": "Accept webhook batches without credentials on a listen address that is " +
		"not loopback (a warning is logged at start). Without it, and without any of the three webhook " +
		"credential keys, such a listen address is an error.",
	"authentication-kubeconfig": "kube-apiserver that checks readers' bearer tokens (TokenReview) and whose " +
		"kube-system/extension-apiserver-authentication ConfigMap gives client-ca-file and the " +
		"requestheader-* settings unless they are set here. In a pod the in-cluster config is the default.",
	"authorization-kubeconfig": "kube-apiserver that decides reads and resets (SubjectAccessReview). In a " +
		"pod the in-cluster config is the default.",
	"authentication-skip-lookup": "Do not read client-ca-file and requestheader-* from the " +
		"extension-apiserver-authentication ConfigMap.",
	"client-ca-file": "Readers' client certificates signed by this CA authenticate: the common name is the " +
		"user, the organizations the groups. Needs TLS.",
	"requestheader-client-ca-file": "Trust the X-Remote-* headers only on connections with a client " +
		"certificate from this CA: kube-apiserver's aggregator. Needs TLS.",
	"requestheader-allowed-names": "Common names of front-proxy client certificates to trust; empty means " +
		"any that requestheader-client-ca-file signed.",
	"requestheader-username-headers": "Front-proxy headers that carry the user name; empty means " +
		"X-Remote-User.",
	"requestheader-uid-headers":   "Front-proxy headers that carry the user's UID.",
	"requestheader-group-headers": "Front-proxy headers that carry the groups; empty means X-Remote-Group.",
	"requestheader-extra-headers-prefix": "Front-proxy header prefixes of the user's extras; empty means " +
		"X-Remote-Extra-.",
	"token-auth-file": "Readers' static tokens in kube-apiserver's --token-auth-file format, one per line: " +
		"token,user,uid,\"group1,group2\".",
	"authorization-read-groups": "Without a cluster to ask (no authorization-kubeconfig, not in a pod): " +
		"groups that may read the API and /metrics.",
	"authorization-reset-groups":       "Without a cluster to ask: groups that may also reset counts (DELETE).",
	"authorization-always-allow-paths": "Paths anyone may GET, for probes; add /metrics to leave it open.",
	"allow-unauthenticated": "Let anyone who reaches the port read, reset and scrape, on any listen address " +
		"(a warning is logged at start). On loopback without authentication keys that is the default.",
	"default-cluster": "Cluster of webhook paths, Kafka messages and files that name none.",
	"user-agent":      "short keeps the user agent up to its first space, as OpenShift does; full keeps it whole.",
	"decoder": "prefilter sets aside, from its bytes and undecoded, every event that cannot count; full " +
		"decodes every event with encoding/json. Both count exactly the same; full is the reference the " +
		"prefilter is tested against, and slower.",
	"max-body-bytes": "Largest webhook body accepted, in bytes; larger ones get 413. The default fits 400 " +
		"events of 160 KiB. At least 1 MiB.",
	"max-inflight-batches": "Webhook batches handled at once; more get 429 with Retry-After: 1. A batch " +
		"takes a slot only once its body has started.",
	"min-body-bytes-per-second": "Slowest average rate, in bytes per second, at which a webhook body must " +
		"arrive once it has started (after 2s of slack); a slower sender gets 408 and gives its batch " +
		"slot back, so that slow senders cannot hold every slot. A body that has not started 10s after " +
		"its headers gets 408 too, having held no slot. -1 turns the rate off.",
	"retention": "How long hourly counts and dedupe marks are kept. At least 24h.",
	"max-clients-per-node-hour": "Clients (user name and user agent) an API keeps per apiserver node and " +
		"hour; further ones are counted as the client \"other\".",
	"max-stored-clusters": "Clusters the store keeps counts of within the retention period; requests of " +
		"further clusters are counted under cluster \"other\", so that a sender inventing cluster names " +
		"cannot grow the store without end.",
	"max-apiservers-per-cluster": "Apiservers per cluster the store keeps counts of within the retention " +
		"period; requests of further ones are counted under node \"other\".",
	"query-cache-bytes": "Memory, about, that the read API keeps of what recent queries read, so that " +
		"the next query of the same API reads again only what changed since: nothing of an API nobody " +
		"called, the current hour of one that was called. The least recently used go first; 0 keeps nothing.",
	"shutdown-timeout": "How long SIGTERM waits for the batches in flight.",
	"log-level":        "trace, debug, info, warn or error.",
	"log-format":       "json, console, or auto (console on a terminal, else json).",
	"system-users": "User names classified as system traffic; an entry ending in * matches a prefix. A list " +
		"replaces the defaults.",
	"max-inflight-batches-per-credential": "Webhook batch slots one credential may hold at once, so that one " +
		"busy or hostile apiserver cannot take them all: past it, its batches get 429 with Retry-After: 1 " +
		"while others still get slots. A bound token counts for its apiserver, a client certificate for " +
		"its subject; with webhook-token-file alone, or no credentials, each apiserver the path names has " +
		"its own share. 0 means half of max-inflight-batches; max-inflight-batches turns the bound off.",
	"field-rules": "Deprecated-field rules beside the built-in one: name, group, version, resource, optional " +
		"subresource, verbs, field, deprecatedIn, removedIn, message. See counting.md#deprecated-fields.",
	"exemptions": "Calls the upgrade verdict accepts until they expire: each with api (the APIRequestCount " +
		"name, e.g. cronjobs.v1beta1.batch), user and/or userAgent (a trailing * matches a prefix; with " +
		"neither, every call to the API), reason (required) and expires (required: an RFC 3339 time, or a " +
		"date meaning 00:00 UTC of it). See cli.md#exemptions.",
	"exemptions-configmap": "A ConfigMap (namespace/name) whose key exemptions holds more exemptions, in the " +
		"same YAML shape, read every minute through the in-cluster config; a bad one keeps the last good " +
		"list and says so in the log and /-/ready?verbose. Needs get on that ConfigMap.",
	"admission.webhooks": "Webhooks (configuration, webhook) that always get their own metric labels, and " +
		"that name the configuration of validating webhooks.",
	"admission.classes.critical": "Resources whose webhooks are scalability and stability bottlenecks: a " +
		"slow webhook there slows the cluster. A list replaces the default.",
	"admission.classes.security": "Resources that hold or grant credentials: every webhook on them sees " +
		"secrets and tokens in plain text. A list replaces the default.",
	"admission.classes.virtual": "Resources that are not stored (reviews, bindings): a webhook on them is " +
		"almost always a mistake. A list replaces the default.",
	"admission.metrics.max-resources": "Resources with their own labels on the admission metrics beyond the " +
		"classes' own; the rest are other.",
	"admission.metrics.max-webhooks": "Webhooks with their own labels on the admission metrics beyond " +
		"admission.webhooks; the rest are other.",
	"kafka.forward": "Also send the requests counted from the webhook, from files and from EKS and GKE to " +
		"kafka.fleet.topic.",
	"metrics.window": "What sunset_deprecated_requests counts over, from 1h to the retention.",
	"metrics.grace": "How long a series shows 0 before it disappears, so that alerts resolve rather than " +
		"vanish.",
	"metrics.removal-horizon": "Releases ahead the SunsetAPIRemovedWithinHorizonInUse alert looks, exported " +
		"as sunset_removal_horizon_releases.",
	"metrics.refresh": "How often, at most, the gauges rescan the store.",
	"metrics.max-series": "Series of each metric whose labels come from audit events; beyond it label sets " +
		"fold into other.",
	"metrics.max-clusters": "Cluster label values beyond the configured clusters; later clusters are other.",
	"ingest.files":         "Audit log files to follow like tail -F. See inputs/files.md.",
	"ingest.eks": "EKS clusters whose audit logs are read from CloudWatch Logs, one entry each. AWS " +
		"credentials come from the SDK's default chain (IRSA, EKS Pod Identity, the environment), never " +
		"from this file. See inputs/managed.md#eks.",
	"ingest.gke": "GKE clusters whose audit logs a Log Router sink sends to Pub/Sub, one subscription each. " +
		"Google credentials come from Application Default Credentials (Workload Identity), never from " +
		"this file. See inputs/managed.md#gke.",
	"ingest.files[].path":    "The audit log file kube-apiserver writes (--audit-log-path).",
	"ingest.files[].node":    "The apiserver that writes it, as the apiserver label of its counts.",
	"ingest.files[].cluster": "The cluster its counts go to; default-cluster when empty.",
	"catalog.extra": "API lifecycle entries beside the built-in catalog, for CRDs or to override a built-in " +
		"entry. See counting.md#the-api-lifecycle-catalog.",
	"clusters.<name>.version": "The cluster's kube-apiserver release, 1.36 or v1.36.3, for the verdict of " +
		"sunset check and the page. Cluster names here are lowercase.",
	"scan.interval": "How often serve scans its own cluster (Helm releases, CRD stored versions, " +
		"APIServices) with its service account, or KUBECONFIG outside a pod, for the upgrade checks and " +
		"the sunset_scan_* metrics; 0 turns the scan off, else at least 1m. For a single binary: in " +
		"Kubernetes, use scan.configMap, so that the pod taking the webhook reads no Secrets. See " +
		"scanning.md#in-the-server.",
	"scan.configMap": "namespace/name of the ConfigMap that sunset publish-scan, run in a workload of its " +
		"own with the scan's permissions, writes the cluster scan into; serve reads it every minute, " +
		"needing only get on that ConfigMap, instead of scanning (not with scan.interval). See " +
		"scanning.md#in-the-server.",
	"gate.enabled": "Serve the upgrade gate on the listen address (HTTPS): the admission webhook at POST " +
		"/gate/admit and the Cluster API runtime extension under /gate/capi, which refuse a raise of a " +
		"cluster's minor Kubernetes release while APIs it removes are called. Neither asks for " +
		"credentials. See gate.md.",
	"gate.kinds": "Kinds that hold a cluster's Kubernetes version beside the seven built-in ones, each " +
		"{group, kind, path}; one of the same group and kind replaces a built-in one. See gate.md#kinds.",
	"gate.clusters": "The Sunset cluster an object stands for, by the object's namespace/name (name alone " +
		"for a cluster-scoped object), where it has no sunset.dev/cluster label or annotation; without " +
		"either, its name is the cluster.",
	"gate.staleAfter": "A cluster Sunset has heard nothing from for this long, or whose reads are missing, " +
		"is unknown: gate.whenUnknown decides.",
	"gate.whenUnknown": "allow lets an upgrade of an unknown cluster through with a warning; refuse refuses " +
		"it (the override annotation still lets it through). A cluster Sunset never heard is always " +
		"allowed, with a warning.",
	"gate.cleanFor": "A caller of a removed API silent this long counts as fixed, as sunset check " +
		"--clean-for; 0 counts every call of gate.since.",
	"gate.since": "The window of the verdict the gate asks, as upgradechecks' since: at least 1h, at most " +
		"the retention.",
	"gate.retryAfter": "How long Cluster API waits before it asks again about an upgrade the gate holds " +
		"(retryAfterSeconds).",
}
