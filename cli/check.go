package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/kube-sunset/sunset/api"
	"github.com/kube-sunset/sunset/internal/plural"
)

// Exit codes of `sunset check`.
const (
	ExitSafe       = api.ExitSafe
	ExitError      = api.ExitError
	ExitDeprecated = api.ExitDeprecated
	ExitRemoved    = api.ExitRemoved
)

// Severity of a finding.
const (
	SeverityRemoved    = api.SeverityRemoved
	SeverityDeprecated = api.SeverityDeprecated
)

// CheckOptions configure Check.
type CheckOptions = api.CheckOptions

// Finding is one API that was requested in the window.
type Finding = api.Finding

// CheckResult is the verdict of the upgrade gate. The logic is the API's
// (api.Check), so `sunset check` and the upgradechecks endpoint agree; its
// JSON is api.CheckResult's.
type CheckResult struct{ api.CheckResult }

// Check decides whether upgrading to the target is safe from what list says
// was requested. list must have been read with Since set, so each item has
// a window.
func Check(list api.APIRequestCountList, o CheckOptions) CheckResult {
	return CheckResult{api.Check(list, o)}
}

// maxNamedClients is how many clients a warning line names.
const maxNamedClients = 3

// WriteText writes one line per finding in the Kubernetes warning format,
// removed APIs first, then the webhook servers whose certificate
// kube-apiserver flagged, then the verdict. The API names, clients and
// hosts in it come from audit data and are escaped for the terminal.
func (r CheckResult) WriteText(w io.Writer) error {
	for _, f := range r.Findings {
		clients := f.Clients
		more := ""
		if len(clients) > maxNamedClients || f.ClientCount > len(clients) {
			if len(clients) > maxNamedClients {
				clients = clients[:maxNamedClients]
			}
			more = ", ..."
		}
		already := ""
		if f.AlreadyRemoved {
			already = " [already removed: clients get 404]"
		}
		named := make([]string, len(clients))
		for i, c := range clients {
			named[i] = Terminal(c)
		}
		if _, err := fmt.Fprintf(w, "Warning: %s (%d request%s in %s by %d client%s: %s%s)%s\n",
			Terminal(f.Warning), f.Requests, plural.S(int(f.Requests)), r.Since, f.ClientCount, plural.S(f.ClientCount), strings.Join(named, ", "), more, already); err != nil {
			return err
		}
	}
	if err := writeCertificateWarnings(w, r.CheckResult); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, Terminal(r.Message))
	return err
}
