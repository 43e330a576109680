package config

import (
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every key whose name says it holds a secret, and that is not the path
// of a file, is in secretKeys, so that a secret added later is warned
// about too when it is written in the config file.
func TestSecretKeysAreListed(t *testing.T) {
	secretish := regexp.MustCompile(`(?i)(password|secret|token|credential|apikey|api-key|passphrase|\.keys$)`)
	// Keys whose names say "secret" or "credential" but hold none.
	notSecret := map[string]string{
		"publish-ca-secret":                   "names a Secret object",
		"max-inflight-batches-per-credential": "a count",
	}
	var found []string
	for _, k := range Keys() {
		if secretish.MatchString(k.Name) && !regexp.MustCompile(`(?i)file$`).MatchString(k.Name) && notSecret[k.Name] == "" {
			found = append(found, k.Name)
		}
	}
	slices.Sort(found)
	require.Equal(t, slices.Sorted(slices.Values(secretKeys)), found)
	for _, k := range secretKeys {
		require.Contains(t, found, k)
	}
}
