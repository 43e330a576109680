package admit

import (
	"testing"

	"github.com/stretchr/testify/require"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// kube-apiserver passes a warning on only if NewWarningHeader takes it:
// a refusal of several lines, a cut multi-byte character or a control
// character in a cluster's name would be dropped without a word.
func TestWarningsAreOneLineKubeAPIServerKeeps(t *testing.T) {
	in := []string{
		"sunset: allowed by sunset.dev/upgrade-override \"INC-1\"; without it: refused:\n- storage.k8s.io/v1beta1 VolumeAttributesClass: carol\nTo upgrade anyway, annotate Cluster fleet/prod.",
		"sunset: cluster \"pr\x00od\r\" \xe2\x82",
		"sunset: plain",
	}
	for _, w := range in[:2] {
		_, err := utilnet.NewWarningHeader(299, "-", w)
		require.Error(t, err, "the input must be one kube-apiserver drops: %q", w)
	}
	got := oneLine(in)
	require.Equal(t, []string{
		"sunset: allowed by sunset.dev/upgrade-override \"INC-1\"; without it: refused:; - storage.k8s.io/v1beta1 VolumeAttributesClass: carol; To upgrade anyway, annotate Cluster fleet/prod.",
		"sunset: cluster \"pr od \" ?",
		"sunset: plain",
	}, got)
	for _, w := range got {
		_, err := utilnet.NewWarningHeader(299, "-", w)
		require.NoError(t, err, w)
	}
}
