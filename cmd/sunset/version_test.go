package main

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// A release built by make carries its ldflags version; one built by
// go install ...@v1.2.3 carries the module version Go recorded; a
// checkout built without either says dev.
func TestBuildVersion(t *testing.T) {
	for _, tc := range []struct {
		name        string
		linked      string
		main        string
		readable    bool
		wantPrinted string
	}{
		{name: "make build", linked: "v1.2.3-4-gabcdef0", main: "v0.0.0-20261129040000-abcdef012345+dirty", readable: true, wantPrinted: "v1.2.3-4-gabcdef0"},
		{name: "go install at a tag", linked: "dev", main: "v1.2.3", readable: true, wantPrinted: "v1.2.3"},
		{name: "go build outside version control", linked: "dev", main: "(devel)", readable: true, wantPrinted: "dev"},
		{name: "no build info", linked: "dev", readable: false, wantPrinted: "dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/kube-sunset/sunset", Version: tc.main}}
			require.Equal(t, tc.wantPrinted, buildVersion(tc.linked, info, tc.readable))
		})
	}
}
