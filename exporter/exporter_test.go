package exporter

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/testutil/storetest"
	"github.com/kube-sunset/sunset/store"
)

var hour = time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC)

const gaugeHeader = `
# HELP sunset_api_releases_until_removal Kubernetes minor releases until an API in use is removed: its removed release minus the cluster's configured version (clusters.<name>.version). 1 means the next release; 0 or less means already removed.
# TYPE sunset_api_releases_until_removal gauge
`

const usageHeader = `
# HELP sunset_deprecated_requests Requests to deprecated or removed APIs in the sliding window (metrics.window, default 24h). Falls to 0 when an API stops being used; the series disappears after metrics.grace.
# TYPE sunset_deprecated_requests gauge
`

// openStore opens a store in a temporary directory whose clock reads *now,
// closed when the test ends.
func openStore(t *testing.T, now *time.Time) *store.Store {
	t.Helper()
	st, err := store.Open(store.Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: func() time.Time { return *now }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestGaugesFallToZeroThenDisappear(t *testing.T) {
	now := hour.Add(10 * time.Minute)
	st := openStore(t, &now)
	key := func(api, user, verb string, removed bool) countkey.CountKey {
		return countkey.CountKey{Cluster: "prod", API: api, Cell: countkey.Cell{Hour: hour, Node: "m0", Username: user, Verb: verb}, Removed: removed}
	}
	_, err := storetest.Apply(st, []countkey.Request{
		{ID: "1", Key: key("volumeattributesclasses.v1beta1.storage.k8s.io", "alice", "get", false), RemovedRelease: "1.37"},
		{ID: "2", Key: key("volumeattributesclasses.v1beta1.storage.k8s.io", "alice", "get", false), RemovedRelease: "1.37"},
		{ID: "3", Key: key("endpoints.v1", "system:apiserver", "get", false)},
		{ID: "4", Key: key("cronjobs.v1beta1.batch", "ci", "create", true), RemovedRelease: "1.25"},
	})
	require.NoError(t, err)
	c := New(Options{Querier: st, IsSystem: func(u string) bool { return u == "system:apiserver" }, RemovalHorizon: 2,
		ClusterVersions: map[string]catalog.Release{"prod": {Major: 1, Minor: 36}}, Now: func() time.Time { return now }})

	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(gaugeHeader+`
sunset_api_releases_until_removal{cluster="prod",group="batch",removed_release="1.25",resource="cronjobs",version="v1beta1"} -11
sunset_api_releases_until_removal{cluster="prod",group="storage.k8s.io",removed_release="1.37",resource="volumeattributesclasses",version="v1beta1"} 1
`+usageHeader+`
sunset_deprecated_requests{cluster="prod",dry_run="false",group="",removed_release="",resource="endpoints",state="deprecated",subresource="",system="true",verb="get",version="v1"} 1
sunset_deprecated_requests{cluster="prod",dry_run="false",group="batch",removed_release="1.25",resource="cronjobs",state="removed",subresource="",system="false",verb="create",version="v1beta1"} 1
sunset_deprecated_requests{cluster="prod",dry_run="false",group="storage.k8s.io",removed_release="1.37",resource="volumeattributesclasses",state="deprecated",subresource="",system="false",verb="get",version="v1beta1"} 2
# HELP sunset_removal_horizon_releases The metrics.removal-horizon setting: how many releases ahead the shipped alert rules warn about removals (EUS upgrades skip releases).
# TYPE sunset_removal_horizon_releases gauge
sunset_removal_horizon_releases 2
`)))

	// 24 hours later hour 19 has left the window: every series shows 0, and
	// no API is in use any more.
	now = hour.Add(24*time.Hour + 10*time.Minute)
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(usageHeader+`
sunset_deprecated_requests{cluster="prod",dry_run="false",group="",removed_release="",resource="endpoints",state="deprecated",subresource="",system="true",verb="get",version="v1"} 0
sunset_deprecated_requests{cluster="prod",dry_run="false",group="batch",removed_release="1.25",resource="cronjobs",state="removed",subresource="",system="false",verb="create",version="v1beta1"} 0
sunset_deprecated_requests{cluster="prod",dry_run="false",group="storage.k8s.io",removed_release="1.37",resource="volumeattributesclasses",state="deprecated",subresource="",system="false",verb="get",version="v1beta1"} 0
`), "sunset_deprecated_requests", "sunset_api_releases_until_removal"))

	// After the grace period (1h) the series are gone.
	now = hour.Add(25*time.Hour + 10*time.Minute)
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(""), "sunset_deprecated_requests", "sunset_api_releases_until_removal"))
}
