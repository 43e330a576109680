package test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// counts maps API name to requestCount as served now.
func counts(t *testing.T, url string) map[string]int64 {
	t.Helper()
	resp, err := http.Get(url + "/apis/sunset.dev/v1/apirequestcounts")
	require.NoError(t, err)
	defer resp.Body.Close()
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Status   struct{ RequestCount int64 }
		}
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	out := map[string]int64{}
	for _, it := range list.Items {
		out[it.Metadata.Name] = it.Status.RequestCount
	}
	return out
}

type apiObject struct {
	Status struct {
		RequestCount int64
		Window       struct {
			ByUser []struct {
				UserName     string `json:"username"`
				RequestCount int64
			}
		}
	}
}

func httpGetJSON(url string) (apiObject, error) {
	var obj apiObject
	resp, err := http.Get(url)
	if err != nil {
		return obj, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return obj, fmt.Errorf("status %d", resp.StatusCode)
	}
	return obj, json.NewDecoder(resp.Body).Decode(&obj)
}

// metricsText is the server's /metrics.
func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// scrape returns the samples of the server's /metrics whose names start
// with prefix.
func scrape(t *testing.T, url, prefix string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(metricsText(t, url), "\n") {
		if strings.HasPrefix(line, prefix) {
			name, v, _ := strings.Cut(line, " ")
			var err error
			out[name], err = strconv.ParseFloat(v, 64)
			require.NoError(t, err)
		}
	}
	return out
}

// userCounts reads endpoints.v1's requests per user over the last day.
func userCounts(t *testing.T, url string) map[string]int64 {
	t.Helper()
	resp, err := httpGetJSON(url + "/apis/sunset.dev/v1/apirequestcounts/endpoints.v1?since=24h&users=100")
	if err != nil {
		return map[string]int64{}
	}
	out := map[string]int64{}
	for _, u := range resp.Status.Window.ByUser {
		out[u.UserName] = u.RequestCount
	}
	return out
}
