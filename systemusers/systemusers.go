// Package systemusers tells system traffic from the clients an administrator has
// to fix.
//
// Every cluster has control-plane identities that touch deprecated APIs on
// their own: kube-apiserver reads core/v1 Endpoints every 10 s as
// system:apiserver (1.33+), and kube-controller-manager's garbage collector
// and namespace controller walk every served resource. Their requests are
// counted and shown, marked as system, but they are not "in use" signals:
// they go away with the upgrade itself.
package systemusers

import "strings"

// DefaultSystemUsers are the identities classified as system traffic unless
// configured otherwise. An entry ending in "*" matches by prefix.
var DefaultSystemUsers = []string{
	"system:apiserver",
	"system:kube-controller-manager",
	"system:kube-scheduler",
	"system:serviceaccount:kube-system:generic-garbage-collector",
	"system:serviceaccount:kube-system:namespace-controller",
	"system:serviceaccount:kube-system:resourcequota-controller",
}

// Classifier says whether a username is a system identity.
type Classifier struct {
	exact    map[string]bool
	prefixes []string
}

// New builds a classifier from usernames; an entry ending in "*" matches
// every username with that prefix. A nil list means DefaultSystemUsers.
func New(users []string) *Classifier {
	if users == nil {
		users = DefaultSystemUsers
	}
	c := &Classifier{exact: map[string]bool{}}
	for _, u := range users {
		if p, ok := strings.CutSuffix(u, "*"); ok {
			c.prefixes = append(c.prefixes, p)
			continue
		}
		c.exact[u] = true
	}
	return c
}

// IsSystem reports whether username is system traffic.
func (c *Classifier) IsSystem(username string) bool {
	if c.exact[username] {
		return true
	}
	for _, p := range c.prefixes {
		if strings.HasPrefix(username, p) {
			return true
		}
	}
	return false
}
