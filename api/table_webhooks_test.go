package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/countkey"
)

// admissionRows is a hand fake of WebhookQuerier: fixed admission counts.
type admissionRows map[countkey.AdmissionKey]countkey.AdmissionCounts

func (a admissionRows) ScanAdmission(from, to time.Time, fn func(countkey.AdmissionKey, countkey.AdmissionCounts) error) error {
	for k, c := range a {
		if k.Hour.Before(from) || k.Hour.After(to) {
			continue
		}
		if err := fn(k, c); err != nil {
			return err
		}
	}
	return nil
}

// kubectlAccept is what `kubectl get` sends.
const kubectlAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

// tableServer serves kubeServer's API counts, and admission counts: a
// mutating webhook on pods, a validating one on secrets that failed open
// now and 30 hours ago, and a webhook server with a SHA-1 certificate.
func tableServer(t *testing.T) *httptest.Server {
	t.Helper()
	hour := buildNow.Truncate(time.Hour)
	key := func(hour time.Time, resource, typ, configuration, webhook string) countkey.AdmissionKey {
		return countkey.AdmissionKey{Hour: hour, Cluster: "prod", Version: "v1", Resource: resource, Type: typ, Configuration: configuration, Webhook: webhook}
	}
	rows := admissionRows{
		key(hour, "pods", "mutating", "cfg", "mutate"): {Requests: 3, Calls: 4, Mutations: 2, Slow: 2, LatencyNanos: uint64(3 * time.Second),
			Buckets: [countkey.AdmissionBuckets]uint64{0, 0, 2}},
		key(hour, "secrets", "validating", "cfg", "validate"):                    {Requests: 1, Calls: 1, FailedOpen: 1},
		key(hour.Add(-30*time.Hour), "secrets", "validating", "cfg", "validate"): {Requests: 1, Calls: 1, FailedOpen: 1},
		key(hour, "pods", "insecure-sha1", "hook.example.com:443", ""):           {Requests: 2},
	}
	h := New(Options{Querier: fixedCounts{
		"cronjobs.v1beta1.batch": {"bob": 4},
		"endpoints.v1":           {"alice": 2, "bob": 5},
		"volumeattributesclasses.v1beta1.storage.k8s.io": {"carol": 3},
	}, Webhooks: NewWebhookService(rows, nil, func() time.Time { return buildNow }), Logger: zerolog.Nop(), Now: func() time.Time { return buildNow }})
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// tableOf GETs path as kubectl does, and returns the Table's columns (as
// name/type/priority) and its rows' cells as JSON.
func tableOf(t *testing.T, url string) (columns, rows []string) {
	t.Helper()
	table := getOK[metav1.Table](t, url, kubectlAccept)
	require.Equal(t, "Table", table.Kind)
	for _, c := range table.ColumnDefinitions {
		columns = append(columns, fmt.Sprintf("%s/%s/%d", c.Name, c.Type, c.Priority))
	}
	for _, r := range table.Rows {
		b, err := json.Marshal(r.Cells)
		require.NoError(t, err)
		rows = append(rows, string(b))
		var meta metav1.PartialObjectMetadata
		require.NoError(t, json.Unmarshal(r.Object.Raw, &meta))
		require.Equal(t, "PartialObjectMetadata", meta.Kind, "includeObject defaults to Metadata")
		require.Equal(t, r.Cells[0], meta.Name)
	}
	return columns, rows
}

// webhookcounts answer kubectl with a Table of `sunset report webhooks`'
// columns, over the last 24 hours or the window asked for.
func TestWebhookCountsTable(t *testing.T) {
	srv := tableServer(t)
	base := srv.URL + "/apis/sunset.dev/v1/webhookcounts"
	columns, rows := tableOf(t, base)
	require.Equal(t, []string{"Name/string/0", "Type/string/0", "Requests/integer/0", "Calls/integer/0", "Mutated/integer/0",
		"FailedOpen/integer/0", "Slow/integer/0", "WebhookLatency/string/1", "Mean/string/1"}, columns)
	require.Equal(t, []string{
		`["cfg.mutate","mutating",3,4,2,0,2,"3s","1.5s"]`,
		`["cfg.validate","validating",1,1,0,1,0,"",""]`,
	}, rows)

	// The window's counts: the failure 30 hours ago too.
	_, rows = tableOf(t, base+"/cfg.validate?since=48h")
	require.Equal(t, []string{`["cfg.validate","validating",2,2,0,2,0,"",""]`}, rows)

	table := getOK[metav1.Table](t, base+"/cfg.mutate?includeObject=Object", kubectlAccept)
	require.Len(t, table.Rows, 1)
	var obj sunsetv1.WebhookCount
	require.NoError(t, json.Unmarshal(table.Rows[0].Object.Raw, &obj))
	require.Equal(t, int64(4), obj.Status.CallCount)
	table = getOK[metav1.Table](t, base+"?includeObject=None", kubectlAccept)
	require.Len(t, table.Rows, 2)
	require.Nil(t, table.Rows[1].Object.Raw)

	// Without kubectl's Accept, the objects.
	list := getOK[sunsetv1.WebhookCountList](t, base, "application/json")
	require.Equal(t, "WebhookCountList", list.Kind)
	require.Len(t, list.Items, 2)
}

// upgradechecks answer kubectl with a Table of the verdict: whether it is
// safe, how many APIs and certificates the release refuses or still
// serves, the window, and, wide, the exit code and the sentence.
func TestUpgradeChecksTable(t *testing.T) {
	srv := tableServer(t)
	base := srv.URL + "/apis/sunset.dev/v1/upgradechecks"
	columns, rows := tableOf(t, base+"/1.37")
	require.Equal(t, []string{"Name/string/0", "Safe/boolean/0", "Removed/integer/0", "Deprecated/integer/0", "Since/string/0",
		"ExitCode/integer/1", "Message/string/1"}, columns)
	// cronjobs.v1beta1.batch (removed in 1.25), volumeattributesclasses
	// (1.37) and the SHA-1 certificate (refused from 1.33) are removed;
	// endpoints.v1 is deprecated.
	// The sentence is the verdict's, as the object's status.message.
	check := getOK[sunsetv1.UpgradeCheck](t, base+"/1.37", "")
	message, err := json.Marshal(check.Status.Message)
	require.NoError(t, err)
	require.Contains(t, check.Status.Message, "NOT SAFE to upgrade to 1.37")
	require.Equal(t, []string{`["1.37",false,3,1,"24h",3,` + string(message) + `]`}, rows)

	// Before any of them: all four deprecated, and safe.
	_, rows = tableOf(t, base+"/1.24?since=48h")
	require.Len(t, rows, 1)
	var cells []any
	require.NoError(t, json.Unmarshal([]byte(rows[0]), &cells))
	require.Equal(t, []any{"1.24", true, 0.0, 4.0, "48h", 0.0}, cells[:6])

	// The list: a row for each release where the verdict can change.
	list := getOK[sunsetv1.UpgradeCheckList](t, base, "")
	_, rows = tableOf(t, base)
	require.Len(t, rows, len(list.Items))
	byName := map[string]string{}
	for _, r := range rows {
		var cells []any
		require.NoError(t, json.Unmarshal([]byte(r), &cells))
		b, err := json.Marshal(cells[:6])
		require.NoError(t, err)
		byName[cells[0].(string)] = string(b)
	}
	require.Equal(t, `["1.25",false,1,3,"24h",3]`, byName["1.25"], "cronjobs removed")
	require.Equal(t, `["1.33",false,2,2,"24h",3]`, byName["1.33"], "and the certificate refused")
	require.Equal(t, `["1.37",false,3,1,"24h",3]`, byName["1.37"], "and volumeattributesclasses removed")
}
