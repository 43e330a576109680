package cli

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

func TestSparkline(t *testing.T) {
	require.Equal(t, "  ", sparkline([]int64{0, 0}))
	require.Equal(t, " █", sparkline([]int64{0, 1}))
	require.Equal(t, "▁▄█ ", sparkline([]int64{1, 4, 8, 0}))
	require.Equal(t, "▁▁█", sparkline([]int64{1, 2, 100}), "a single request is still visible")
}

func TestWorkloadAndDuration(t *testing.T) {
	require.Equal(t, "ci/deployer", workloadOf("system:serviceaccount:ci:deployer"))
	require.Empty(t, workloadOf("alice"))
	require.Empty(t, workloadOf("system:serviceaccount:broken"))
	require.Equal(t, "24h", FormatDuration(24*time.Hour))
	require.Equal(t, "168h", FormatDuration(7*24*time.Hour))
	require.Equal(t, "1h30m", FormatDuration(90*time.Minute))
}

func TestParseFormat(t *testing.T) {
	f, err := parseFormat("")
	require.NoError(t, err)
	require.Equal(t, formatTable, f)
	_, err = parseFormat("xml")
	require.EqualError(t, err, `-o "xml" is not one of table, wide, json, yaml`)
}

// --exclude-system keeps the same APIs in every format, and the table's
// header says its counts leave system users out, unlike the objects'
// requestCount, which is OpenShift's total.
func TestExcludeSystemHeaderSaysWhichCount(t *testing.T) {
	endpoints := sunsetv1.APIRequestCount{Metadata: metav1.ObjectMeta{Name: "endpoints.v1"}}
	endpoints.Status.RequestCount, endpoints.Status.SystemRequestCount = 35, 27
	endpoints.Status.CurrentHour.RequestCount, endpoints.Status.CurrentHour.SystemRequestCount = 35, 27
	endpoints.Status.Window = &sunsetv1.Window{RequestCount: 35, SystemRequestCount: 27, ClientCount: 2, SystemClientCount: 1,
		ByUser: []sunsetv1.WindowUser{{UserName: "system:apiserver", RequestCount: 27, System: true}, {UserName: "alice", RequestCount: 8}}}
	onlySystem := sunsetv1.APIRequestCount{Metadata: metav1.ObjectMeta{Name: "componentstatuses.v1"}}
	onlySystem.Status.RequestCount, onlySystem.Status.SystemRequestCount = 2, 2
	onlySystem.Status.Window = &sunsetv1.Window{RequestCount: 2, SystemRequestCount: 2, ClientCount: 1, SystemClientCount: 1}
	list := sunsetv1.APIRequestCountList{Items: []sunsetv1.APIRequestCount{onlySystem, endpoints}}

	for _, tc := range []struct {
		exclude bool
		table   string
		kept    []string
	}{
		{true, "NAME           REMOVED IN   NON-SYSTEM REQUESTS (CURRENT HOUR)   NON-SYSTEM REQUESTS (24H)   TOP USER   TOP USER AGENT\n" +
			"endpoints.v1   -            8                                    8                           alice      -\n",
			[]string{"endpoints.v1"}},
		{false, "NAME                   REMOVED IN   REQUESTS (CURRENT HOUR)   REQUESTS (24H)   TOP USER           TOP USER AGENT\n" +
			"componentstatuses.v1   -            0                         2                -                  -\n" +
			"endpoints.v1           -            35                        35               system:apiserver   -\n",
			[]string{"componentstatuses.v1", "endpoints.v1"}},
	} {
		t.Run(fmt.Sprintf("ExcludeSystem=%t", tc.exclude), func(t *testing.T) {
			o := reportOptions{ExcludeSystem: tc.exclude, Since: 24 * time.Hour}
			rows := tableRows(list, o)
			var b bytes.Buffer
			require.NoError(t, writeTable(&b, rows, o, false))
			require.Equal(t, tc.table, b.String())
			var kept []string
			for _, it := range keptAPIs(list, rows).Items {
				kept = append(kept, it.Metadata.Name)
				require.Equal(t, list.Items[slices.IndexFunc(list.Items, func(o sunsetv1.APIRequestCount) bool { return o.Metadata.Name == it.Metadata.Name })].Status, it.Status)
			}
			require.Equal(t, tc.kept, kept)
		})
	}
}
