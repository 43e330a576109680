package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFixCRDRequestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  FixCRDRequest
		want string
	}{
		{"names", FixCRDRequest{Names: []string{"widgets.example.com"}, ChunkSize: 500}, ""},
		{"all", FixCRDRequest{All: true, ChunkSize: 1}, ""},
		{"neither", FixCRDRequest{ChunkSize: 500},
			"give the names of the CRDs to fix (e.g. widgets.example.com), or --all for every CRD whose status.storedVersions lists an old version"},
		{"both", FixCRDRequest{All: true, Names: []string{"widgets.example.com"}, ChunkSize: 500}, "give CRD names or --all, not both"},
		{"no chunk", FixCRDRequest{All: true}, "--chunk-size 0 must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.want)
		})
	}
}
