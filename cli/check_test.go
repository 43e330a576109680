package cli

import (
	"testing"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

// A verdict's exit code is read twice: from status.exitCode of -o json or
// an UpgradeCheck, and from $?. Scripts use either, so every value the
// wire carries is the process's exit code of the same name, and the
// numbers are those docs/cli.md and docs/scanning.md promise.
func TestWireExitCodesAreTheProcessExitCodes(t *testing.T) {
	for wire, process := range map[sunsetv1.ExitCode]int{
		sunsetv1.ExitCodeSafe:       ExitSafe,
		sunsetv1.ExitCodeError:      ExitError,
		sunsetv1.ExitCodeDeprecated: ExitDeprecated,
		sunsetv1.ExitCodeRemoved:    ExitRemoved,
	} {
		require.Equal(t, process, exitCode(wire), "exitCode %d on the wire", wire)
	}
	require.Equal(t, []int{0, 1, 2, 3}, []int{ExitSafe, ExitError, ExitDeprecated, ExitRemoved})
}
