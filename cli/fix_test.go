package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFixCRDRequestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  FixCRDRequest
		want string
	}{
		{"names", FixCRDRequest{Names: []string{"widgets.example.com"}, ChunkSize: 500, Method: "auto", StartTimeout: time.Second}, ""},
		{"all", FixCRDRequest{All: true, ChunkSize: 1, Method: "rewrite", StartTimeout: time.Second}, ""},
		{"neither", FixCRDRequest{ChunkSize: 500, Method: "migration", StartTimeout: time.Second},
			"give the names of the CRDs to fix (e.g. widgets.example.com), or --all for every CRD whose status.storedVersions lists an old version"},
		{"both", FixCRDRequest{All: true, Names: []string{"widgets.example.com"}, ChunkSize: 500, Method: "auto", StartTimeout: time.Second}, "give CRD names or --all, not both"},
		{"no chunk", FixCRDRequest{All: true, Method: "auto", StartTimeout: time.Second}, "--chunk-size 0 must be at least 1"},
		{"unknown method", FixCRDRequest{All: true, ChunkSize: 1, Method: "svm", StartTimeout: time.Second}, `--method "svm" is none of auto, migration, rewrite`},
		{"no start timeout", FixCRDRequest{All: true, ChunkSize: 1, Method: "auto"}, "--migration-start-timeout 0s must be positive"},
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
