// Package workload names what is behind a client: the namespace and service
// account of a service-account username, and the likely owner of a pod
// from its generated name.
package workload

import (
	"regexp"
	"strings"
)

// ServiceAccount splits "system:serviceaccount:<namespace>:<name>".
func ServiceAccount(username string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(username, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	if !ok || namespace == "" || name == "" {
		return "", "", false
	}
	return namespace, name, true
}

// Owner kinds, guessed from a pod's name.
const (
	KindDeployment  = "Deployment"
	KindCronJob     = "CronJob"
	KindStatefulSet = "StatefulSet"
	// KindDaemonSetOrJob: both add five random characters to their name.
	KindDaemonSetOrJob = "DaemonSet/Job"
	KindPod            = "Pod"
)

// Generated name suffixes. A ReplicaSet's pod-template-hash uses the
// "safe" alphabet of rand.SafeEncodeString and is 6 to 10 characters; a
// CronJob's Job is named after its scheduled time in minutes (8+ digits);
// controllers add 5 random safe characters to pod names.
var (
	cronJobRe    = regexp.MustCompile(`^(.+)-[0-9]{8,}-[bcdfghjklmnpqrstvwxz2456789]{5}$`)
	deploymentRe = regexp.MustCompile(`^(.+)-[bcdfghjklmnpqrstvwxz2456789]{6,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$`)
	statefulRe   = regexp.MustCompile(`^(.+)-[0-9]+$`)
	randomRe     = regexp.MustCompile(`^(.+)-[bcdfghjklmnpqrstvwxz2456789]{5}$`)
)

// Owner guesses the controller that created a pod from its name:
// web-7d9f8b6c5-x2kqz is Deployment web. It is a heuristic: names are not
// proof, and a pod named by hand may look generated.
func Owner(pod string) (kind, name string) {
	for _, r := range []struct {
		re   *regexp.Regexp
		kind string
	}{{cronJobRe, KindCronJob}, {deploymentRe, KindDeployment}, {statefulRe, KindStatefulSet}, {randomRe, KindDaemonSetOrJob}} {
		if m := r.re.FindStringSubmatch(pod); m != nil {
			return r.kind, m[1]
		}
	}
	return KindPod, pod
}
