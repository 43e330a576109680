package cli

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestScanOptionsRefuseBadAPIVersions(t *testing.T) {
	for v, want := range map[string]string{
		"":                        `--api-versions "" is not an API version such as example.com/v1 or example.com/v1/Widget`,
		"example.com/v1 x":        `--api-versions "example.com/v1 x" is not an API version such as example.com/v1 or example.com/v1/Widget`,
		"example.com/v1/Widget/x": `--api-versions "example.com/v1/Widget/x" is not an API version such as example.com/v1 or example.com/v1/Widget`,
	} {
		t.Run(strconv.Quote(v), func(t *testing.T) {
			o := ScanOptions{APIVersions: []string{"v1", v}}
			require.EqualError(t, o.validate(), want)
		})
	}
	o := ScanOptions{APIVersions: []string{"v1", "example.com/v1", "example.com/v1/Widget"}}
	require.NoError(t, o.validate())
}
