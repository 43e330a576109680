package cli

import (
	"fmt"
	"strings"
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/internal/plural"
	"github.com/kube-sunset/sunset/verdict"
)

// emptyWindow says that window, a list read with Since set, holds no
// requests to report, and hints at what the store does hold: requests by
// system identities that were left out, and older requests within the
// retention, read into retained (a list with the same filters and Since
// set to the retention; nil when unknown). hinted is false when there is
// nothing to hint at.
//
//	No deprecated API requests in the last 24h (66 older ones within the 720h retention; try --since 720h).
func emptyWindow(window sunsetv1.APIRequestCountList, retained *sunsetv1.APIRequestCountList, retention time.Duration, o reportOptions) (msg string, hinted bool) {
	var hints []string
	sysNow := systemRequests(window)
	if o.ExcludeSystem && sysNow > 0 {
		hints = append(hints, fmt.Sprintf("%d by system users; --exclude-system=false shows them", sysNow))
	}
	if retained != nil && retention > o.Since {
		since := FormatDuration(retention)
		var older, olderSys int64
		for _, it := range retained.Items {
			n, _, _ := verdict.WindowUse(it, o.ExcludeSystem)
			older += n
		}
		if o.ExcludeSystem {
			olderSys = systemRequests(*retained) - sysNow
		}
		switch {
		case older > 0:
			hints = append(hints, fmt.Sprintf("%d older one%s within the %s retention; try --since %s", older, plural.S(int(older)), since, since))
		case olderSys > 0:
			hints = append(hints, fmt.Sprintf("%d older one%s by system users within the %s retention; try --since %s --exclude-system=false", olderSys, plural.S(int(olderSys)), since, since))
		}
	}
	msg = "No deprecated API requests in the last " + FormatDuration(o.Since)
	if len(hints) > 0 {
		msg += " (" + strings.Join(hints, "; ") + ")"
	}
	return msg + ".", len(hints) > 0
}

func systemRequests(list sunsetv1.APIRequestCountList) int64 {
	var n int64
	for _, it := range list.Items {
		if w := it.Status.Window; w != nil {
			n += w.SystemRequestCount
		}
	}
	return n
}
