package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
		t.Run(fmt.Sprintf("exit code %d", wire), func(t *testing.T) {
			require.Equal(t, process, exitCode(wire), "exitCode %d on the wire", wire)
		})
	}
	require.Equal(t, []int{0, 1, 2, 3}, []int{ExitSafe, ExitError, ExitDeprecated, ExitRemoved})
}

// An accepted finding still has its warning line, which says whose calls
// no longer count and why.
func TestAcceptedFindingsSayWhy(t *testing.T) {
	at := time.Date(2026, 11, 21, 7, 0, 0, 0, time.UTC)
	res := CheckResult{sunsetv1.CheckResult{Since: "24h", Message: "Safe.", Findings: []sunsetv1.Finding{{
		Name: "cronjobs.v1beta1.batch", Warning: "batch/v1beta1 CronJob is deprecated", Requests: 3, ClientCount: 2, Clients: []string{"ci", "helm"}, Accepted: true,
		Callers: []sunsetv1.Caller{
			{UserName: "ci", LastSeen: at, Stopped: true},
			{UserName: "helm", LastSeen: at, Exemption: &sunsetv1.Exemption{Reason: "chart 2.0", Expires: at.Add(24 * time.Hour)}},
		},
	}}}}
	var out strings.Builder
	require.NoError(t, res.WriteText(&out))
	require.Equal(t, "Warning: batch/v1beta1 CronJob is deprecated (3 requests in 24h by 2 clients: ci, helm) "+
		"[not counted: ci silent since 2026-11-21T08:00:00Z; helm exempted until 2026-11-22T07:00:00Z (chart 2.0)]\nSafe.\n", out.String())
}
