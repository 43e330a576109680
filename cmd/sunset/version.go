package main

import "runtime/debug"

// Set at build time with -ldflags "-X main.version=... -X main.revision=...".
// make build, make image and make release set both, from git describe.
var (
	version  = "dev"
	revision = ""
)

// buildVersion is the version `sunset version` prints and /metrics
// exports: the one -ldflags set, else the version Go recorded for the
// main module. `go install github.com/kube-sunset/sunset/cmd/sunset@v1.2.3`
// sets no ldflags but records v1.2.3, so that binary still says which
// release it is. A plain `go build` outside a module cache records
// "(devel)" or a pseudo-version from the checkout.
func buildVersion(linked string, info *debug.BuildInfo, ok bool) string {
	if linked != "dev" && linked != "" {
		return linked
	}
	if ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}
