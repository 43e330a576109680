package config

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// Every key says what it does: the help is the only description a key
// has, for its flag and for docs/configuration.md alike.
func TestEveryKeyHasHelp(t *testing.T) {
	var names, missing []string
	for _, k := range Keys() {
		names = append(names, k.Name)
		if k.Help == "" {
			missing = append(missing, k.Name)
		}
	}
	require.Len(t, names, 134, "keys; update the count when adding one")
	require.Empty(t, missing, "keys without a help tag")
}

// Flags are the top-level keys of plain values, each with its help and
// the default of Default.
func TestFlagsFollowKeys(t *testing.T) {
	fs := Flags()
	f := fs.Lookup("retention")
	require.NotNil(t, f)
	require.Equal(t, "720h0m0s", f.DefValue)
	require.Equal(t, "How long hourly counts and dedupe marks are kept. At least 24h.", f.Usage)
	require.Nil(t, fs.Lookup("field-rules"), "lists of objects are file only")
	require.Nil(t, fs.Lookup("metrics.window"), "nested keys have no flag")
	n := 0
	fs.VisitAll(func(*pflag.Flag) { n++ })
	require.Equal(t, 43, n, "flags")
}

// docs/configuration.md is what WriteReference writes today; `make docs`
// rewrites it.
func TestConfigurationReferenceIsCurrent(t *testing.T) {
	var want bytes.Buffer
	require.NoError(t, WriteReference(&want))
	got, err := os.ReadFile("../docs/configuration.md")
	require.NoError(t, err)
	require.Equal(t, want.String(), string(got), "docs/configuration.md is stale: run make docs")
}

// Every key is in exactly one section of docs/configuration.md, and every
// name a section lists is a top-level key: a new key needs a group, and a
// removed one leaves none behind.
func TestEveryKeyHasAGroup(t *testing.T) {
	listed := map[string]string{}
	for _, g := range keyGroups {
		require.NotEmpty(t, g.Intro, g.Title)
		for _, k := range g.Keys {
			other, twice := listed[k]
			require.False(t, twice, "%s is in %s and %s", k, other, g.Title)
			listed[k] = g.Title
		}
	}
	tops := map[string]bool{}
	var ungrouped []string
	for _, k := range Keys() {
		top := topLevel(k.Name)
		tops[top] = true
		if _, ok := listed[top]; !ok {
			ungrouped = append(ungrouped, k.Name)
		}
	}
	require.Empty(t, ungrouped, "keys without a group in keyGroups (config/reference.go)")
	for k, g := range listed {
		require.True(t, tops[k], "group %s lists %s, which is no key", g, k)
	}
}

// Validate's messages come in one order, whatever the run: a config with
// several problems reads the same each time.
func TestValidateReportsInOneOrder(t *testing.T) {
	c := Default()
	dir := t.TempDir()
	c.ClientCAFile, c.RequestheaderClientCAFile = dir, dir
	c.Kafka.Brokers, c.Kafka.Topics = []string{"kafka:9092"}, []string{"audit"}
	c.Kafka.TLS.CAFile, c.Kafka.TLS.CertFile, c.Kafka.TLS.KeyFile = dir+"/a", dir+"/b", dir+"/c"
	c.Clusters = map[string]ClusterConfig{"zeta": {Version: "one"}, "alpha": {Version: "two"}}
	full := c.Validate().Error()
	require.Less(t, strings.Index(full, "clusters.alpha.version"), strings.Index(full, "clusters.zeta.version"), "clusters by name")
	first, _, _ := strings.Cut(full, "\nclusters.")
	require.Equal(t, "client-ca-file: needs tls-cert-file and tls-key-file: client certificates only exist over TLS\n"+
		"requestheader-client-ca-file: needs tls-cert-file and tls-key-file: client certificates only exist over TLS\n"+
		"kafka.tls.caFile: cannot read "+dir+"/a\nkafka.tls.certFile: cannot read "+dir+"/b\nkafka.tls.keyFile: cannot read "+dir+"/c", first)
	for range 20 {
		require.Equal(t, full, c.Validate().Error())
	}
}

// A list of objects, which has no flag, is a JSON array in the
// environment; its entries are checked as strictly as in a file.
func TestObjectListFromTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SUNSET_INGEST_FILES", `[{"path":"`+dir+`/a.log","node":"master-0"},{"path":"`+dir+`/b.log","node":"master-1","cluster":"prod"}]`)
	cfg, err := Load(Flags(), "")
	require.NoError(t, err)
	require.Equal(t, []FollowFile{{Path: dir + "/a.log", Node: "master-0"}, {Path: dir + "/b.log", Node: "master-1", Cluster: "prod"}}, cfg.Ingest.Files)

	t.Setenv("SUNSET_INGEST_FILES", `[{"path":"`+dir+`/a.log","nod":"master-0"}]`)
	_, err = Load(Flags(), "")
	require.ErrorContains(t, err, `invalid keys: nod`)

	t.Setenv("SUNSET_INGEST_FILES", `path=a.log`)
	_, err = Load(Flags(), "")
	require.ErrorContains(t, err, "a list of objects in the environment is a JSON array of objects")
}

// Every description in help is a key's: a key renamed or removed takes
// its help along rather than leaving it behind.
func TestHelpNamesKeys(t *testing.T) {
	keys := map[string]bool{}
	for _, k := range Keys() {
		keys[k.Name] = true
	}
	var orphans []string
	for name := range help {
		if !keys[name] {
			orphans = append(orphans, name)
		}
	}
	require.Empty(t, orphans, "help for no key (config/help.go)")
}
