// Package kubeversion reads the Kubernetes version a cluster object asks
// for, in each spelling that cluster providers write: v1.31.2, 1.31,
// v1.31, EKS's 1.31.2-eks-1234567, GKE's 1.31.2-gke.1000, RKE2's and
// k3s's v1.28.9+rke2r1. It keeps major, minor and patch; what follows a
// '-' or '+' is the provider's build and is not compared.
package kubeversion

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kube-sunset/sunset/catalog"
)

// maxLen bounds what is parsed: the longest provider spelling is well
// under it, and a field is user input.
const maxLen = 64

// Version is a parsed Kubernetes version. Patch is -1 when the spelling
// has none (1.31).
type Version struct {
	Major, Minor, Patch int
}

// Parse reads s. It refuses text that does not start with
// [v]MAJOR.MINOR, a patch that is not a number, and anything longer than
// 64 bytes.
func Parse(s string) (Version, error) {
	bad := fmt.Errorf("%q is not a Kubernetes version such as v1.31.2 or 1.31", s)
	if s == "" || len(s) > maxLen {
		return Version{}, bad
	}
	core := strings.TrimPrefix(s, "v")
	if i := strings.IndexAny(core, "-+"); i >= 0 {
		if i == len(core)-1 {
			return Version{}, bad
		}
		core = core[:i]
	}
	parts := strings.Split(core, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, bad
	}
	nums := [3]int{0, 0, -1}
	for i, p := range parts {
		n, err := number(p)
		if err != nil {
			return Version{}, bad
		}
		nums[i] = n
	}
	if nums[0] < 1 {
		return Version{}, bad
	}
	return Version{Major: nums[0], Minor: nums[1], Patch: nums[2]}, nil
}

// number reads decimal digits only: strconv.Atoi alone takes "+1" and
// "-0".
func number(s string) (int, error) {
	if s == "" || len(s) > 6 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return strconv.Atoi(s)
}

// Release is the minor release, as the catalog and the verdict name it.
func (v Version) Release() catalog.Release {
	return catalog.Release{Major: v.Major, Minor: v.Minor}
}

// String is 1.31.2, or 1.31 without a patch.
func (v Version) String() string {
	if v.Patch < 0 {
		return fmt.Sprintf("%d.%d", v.Major, v.Minor)
	}
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}

// RaisesMinor reports whether going from v to to raises the minor
// release (or the major): what the gate judges. A patch bump, the same
// release and a downgrade do not.
func (v Version) RaisesMinor(to Version) bool {
	return v.Release().Less(to.Release())
}
