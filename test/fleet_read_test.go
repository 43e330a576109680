package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
)

// fleetCounts is what a fleet answers: requests by cluster, API (or
// field:<rule>) and username.
type fleetCounts map[string]int64

func (c fleetCounts) add(cluster, api, user string) { c[cluster+" "+api+" "+user]++ }

// diff lists the cells where got differs from c, or is empty.
func (c fleetCounts) diff(got fleetCounts) []string {
	var out []string
	for k, n := range c {
		if got[k] != n {
			out = append(out, fmt.Sprintf("%s: want %d, got %d", k, n, got[k]))
		}
	}
	for k, n := range got {
		if _, ok := c[k]; !ok {
			out = append(out, fmt.Sprintf("%s: want 0, got %d", k, n))
		}
	}
	slices.Sort(out)
	return out
}

// getJSON decodes url's answer; a non-200 is an error.
func getJSON(u string, out any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d", u, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// fleetAnswer reads a replica's answers for every cluster through its JSON
// API: each API of the cluster, and the kube-proxy-version field rule,
// with its users over the last day.
func fleetAnswer(base string, clusters []string) (fleetCounts, error) {
	got := fleetCounts{}
	type users struct {
		Status struct {
			Window struct {
				ByUser []struct {
					Username     string
					RequestCount int64
				}
			}
		}
	}
	read := func(path, cluster, name string) error {
		var obj users
		err := getJSON(base+path+"?users=100&since=24h&cluster="+url.QueryEscape(cluster), &obj)
		if err != nil {
			return err
		}
		for _, u := range obj.Status.Window.ByUser {
			got[cluster+" "+name+" "+u.Username] += u.RequestCount
		}
		return nil
	}
	for _, cluster := range clusters {
		var list struct {
			Items []struct{ Metadata struct{ Name string } }
		}
		if err := getJSON(base+"/apis/sunset.dev/v1/apirequestcounts?cluster="+url.QueryEscape(cluster), &list); err != nil {
			return nil, err
		}
		for _, it := range list.Items {
			if err := read("/apis/sunset.dev/v1/apirequestcounts/"+it.Metadata.Name, cluster, it.Metadata.Name); err != nil {
				return nil, err
			}
		}
		if err := read("/apis/sunset.dev/v1/fieldrequestcounts/kube-proxy-version", cluster, "field:kube-proxy-version"); err != nil {
			return nil, err
		}
	}
	for k, n := range got {
		if n == 0 {
			delete(got, k)
		}
	}
	return got, nil
}

// topicCounts reads every record of the fleet's topic (its JSON, not
// Sunset's decoder) and counts each cluster's distinct requests.
func topicCounts(t *testing.T, brokers []string, topic string) fleetCounts {
	t.Helper()
	out := fleetCounts{}
	seen := map[string]bool{}
	conn, err := kafkago.Dial("tcp", brokers[0])
	require.NoError(t, err)
	parts, err := conn.ReadPartitions(topic)
	conn.Close()
	require.NoError(t, err)
	for _, p := range parts {
		leader, err := kafkago.DialLeader(context.Background(), "tcp", brokers[0], topic, p.ID)
		require.NoError(t, err)
		end, err := leader.ReadLastOffset()
		leader.Close()
		require.NoError(t, err)
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: brokers, Topic: topic, Partition: p.ID})
		for off := int64(0); off < end; off++ {
			m, err := r.ReadMessage(context.Background())
			require.NoError(t, err)
			var rec struct{ Cluster, ID, API, User string }
			require.NoError(t, json.Unmarshal(m.Value, &rec))
			if !seen[rec.Cluster+"/"+rec.ID] {
				seen[rec.Cluster+"/"+rec.ID] = true
				out.add(rec.Cluster, rec.API, rec.User)
			}
			off = m.Offset
		}
		r.Close()
	}
	return out
}

// warnings keeps a process's log lines above info.
func warnings(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, `"level":"info"`) && !strings.Contains(l, `"level":"debug"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// gaugeSeries reads every series of a process's /metrics that starts with
// prefix, as text, and the sum of their values.
func gaugeSeries(base, prefix string) (string, float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	var lines []string
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			lines = append(lines, sc.Text())
			i := strings.LastIndexByte(sc.Text(), ' ')
			v, err := strconv.ParseFloat(sc.Text()[i+1:], 64)
			if err != nil {
				return "", 0, err
			}
			sum += v
		}
	}
	return strings.Join(lines, "\n"), sum, sc.Err()
}

// metricSeries reads one series of a process's /metrics, e.g.
// `sunset_fleet_caught_up`.
func metricSeries(base, series string) (float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("%s has no series %s", base, series)
}
