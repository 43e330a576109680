package yamldoc

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"
)

func TestIsMarker(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{"---", true},
		{"---\n", true},
		{"---\r\n", true},
		{"--- # a comment\n", true},
		{"...\n", true},
		{"...\tx\n", true},
		{"----\n", false},
		{"--\n", false},
		{" ---\n", false},
		{"---x\n", false},
		{"", false},
	} {
		t.Run(tc.line, func(t *testing.T) {
			require.Equal(t, tc.want, IsMarker([]byte(tc.line)))
		})
	}
}

func TestShiftLines(t *testing.T) {
	err := errors.New("yaml: line 3: did not find expected key; line 12 too")
	require.EqualError(t, ShiftLines(err, 10), "yaml: line 13: did not find expected key; line 22 too")
	require.Same(t, err, ShiftLines(err, 0))
	require.NoError(t, ShiftLines(nil, 4))
}

func TestMapValueAndScalar(t *testing.T) {
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte("kind: Ingress\nmetadata: {name: web}\nitems: [a]\n"), &doc))
	root := doc.Content[0]
	for _, tc := range []struct {
		name string
		n    *yaml.Node
		want string
	}{
		{"a scalar", MapValue(root, "kind"), "Ingress"},
		{"nested", MapValue(MapValue(root, "metadata"), "name"), "web"},
		{"a missing key", MapValue(root, "spec"), ""},
		{"a mapping", MapValue(root, "metadata"), ""},
		{"a sequence", MapValue(root, "items"), ""},
		{"under a scalar", MapValue(MapValue(root, "kind"), "name"), ""},
		{"nil", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Scalar(tc.n))
		})
	}
	require.Nil(t, MapValue(root, "spec"))
	require.Nil(t, MapValue(nil, "kind"))
}
