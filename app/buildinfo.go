package app

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// BuildInfo describes the binary, for sunset_build_info and `sunset version`.
type BuildInfo struct {
	Version  string
	Revision string
}

// NewBuildInfo describes the binary from the version and revision set at
// build time; without a revision, from the VCS stamp Go records.
func NewBuildInfo(version, revision string) BuildInfo {
	b := BuildInfo{Version: version, Revision: revision}
	if info, ok := debug.ReadBuildInfo(); ok && b.Revision == "" {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				b.Revision = s.Value
			}
		}
	}
	return b
}

// String is what `sunset version` prints.
func (b BuildInfo) String() string {
	return fmt.Sprintf("sunset %s (revision %s, %s)", b.Version, b.Revision, runtime.Version())
}
