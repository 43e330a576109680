package verdict

import (
	"strings"
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

// Stopped reports whether a caller last seen in the hour starting at
// lastSeen has been silent for at least cleanFor at now: its last hour
// ended cleanFor or longer before now. A zero lastSeen (data that does
// not say), zero now or zero cleanFor never counts as stopped.
func Stopped(lastSeen, now time.Time, cleanFor time.Duration) bool {
	if cleanFor <= 0 || now.IsZero() || lastSeen.IsZero() {
		return false
	}
	return !now.Before(lastSeen.Add(time.Hour + cleanFor))
}

// Active reports whether e still applies at now: until now reaches
// Expires. A zero now applies no exemption, so that a caller that forgets
// the clock errs on the side of NOT SAFE.
func Active(e sunsetv1.Exemption, now time.Time) bool {
	return !now.IsZero() && now.Before(e.Expires)
}

// apiWide reports whether e accepts every call to its API.
func apiWide(e sunsetv1.Exemption) bool { return e.UserName == "" && e.UserAgent == "" }

// agentMatches reports whether a user agent matches pattern: equal, or,
// for a pattern ending in *, starting with the rest.
func agentMatches(pattern, agent string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(agent, prefix)
	}
	return agent == pattern
}

// matchesUser reports whether e accepts the calls of u to api: the user
// agrees when e names one, and when e names a user agent, every user
// agent u was seen with matches it (a user calling with others is only
// partly accepted, which does not clear it).
func matchesUser(e sunsetv1.Exemption, api string, u sunsetv1.WindowUser) bool {
	if e.API != api || (e.UserName != "" && e.UserName != u.UserName) {
		return false
	}
	if e.UserAgent == "" {
		return true
	}
	if len(u.UserAgents) == 0 {
		return false
	}
	for _, a := range u.UserAgents {
		if !agentMatches(e.UserAgent, a) {
			return false
		}
	}
	return true
}

// exemptionFor is the first of active that accepts u's calls to api.
func exemptionFor(active []sunsetv1.Exemption, api string, u sunsetv1.WindowUser) *sunsetv1.Exemption {
	for i := range active {
		if matchesUser(active[i], api, u) {
			e := active[i]
			return &e
		}
	}
	return nil
}

// SplitExemptions separates those in force at now from those expired.
func SplitExemptions(all []sunsetv1.Exemption, now time.Time) (active, expired []sunsetv1.Exemption) {
	for _, e := range all {
		if Active(e, now) {
			active = append(active, e)
		} else {
			expired = append(expired, e)
		}
	}
	return active, expired
}

// StaleExemptions are those of active that match no call in list's
// window, system users included: they name a client that is gone or was
// misspelled.
func StaleExemptions(list sunsetv1.APIRequestCountList, active []sunsetv1.Exemption) []sunsetv1.Exemption {
	var stale []sunsetv1.Exemption
	for _, e := range active {
		if !matchesAny(list, e) {
			stale = append(stale, e)
		}
	}
	return stale
}

func matchesAny(list sunsetv1.APIRequestCountList, e sunsetv1.Exemption) bool {
	for _, obj := range list.Items {
		w := obj.Status.Window
		if obj.Metadata.Name != e.API || w == nil || w.RequestCount == 0 {
			continue
		}
		if apiWide(e) {
			return true
		}
		for _, u := range w.ByUser {
			if matchesUser(e, obj.Metadata.Name, u) {
				return true
			}
		}
	}
	return false
}

// callers judges each of users: when it last called, whether it stopped
// and which exemption accepts it. cleared is true when every caller of the
// API is stopped or exempted: all clients are among users, or an exemption
// accepts the whole API.
func callers(api string, clients int, users []sunsetv1.WindowUser, active []sunsetv1.Exemption, o CheckOptions) (out []sunsetv1.Caller, stopped int, cleared bool) {
	wide := false
	for _, e := range active {
		if e.API == api && apiWide(e) {
			wide = true
		}
	}
	cleared = len(users) > 0 && len(users) >= clients
	for _, u := range users {
		c := sunsetv1.Caller{UserName: u.UserName, UserAgents: u.UserAgents, LastSeen: u.LastSeen,
			Stopped: Stopped(u.LastSeen, o.Now, o.CleanFor), Exemption: exemptionFor(active, api, u)}
		if c.UserAgents == nil {
			c.UserAgents = []string{}
		}
		if c.Stopped {
			stopped++
		}
		if !c.Stopped && c.Exemption == nil {
			cleared = false
		}
		out = append(out, c)
	}
	return out, stopped, cleared || wide
}
