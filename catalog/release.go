package catalog

import (
	"fmt"
	"strconv"
	"strings"
)

// Release is a Kubernetes minor release such as 1.37. The zero value means
// unknown.
type Release struct {
	Major, Minor int
}

// ParseRelease reads "1.37", and also "v1.37" and "v1.37.2" as an apiserver
// reports its version, keeping major and minor.
func ParseRelease(s string) (Release, error) {
	t := strings.TrimPrefix(s, "v")
	parts := strings.SplitN(t, ".", 3)
	if len(parts) < 2 {
		return Release{}, fmt.Errorf("%q is not a Kubernetes release such as 1.37", s)
	}
	major, err1 := strconv.Atoi(parts[0])
	// "1.37.2-gke.100" and "1.37+" keep their leading number.
	minorDigits := parts[1]
	if i := strings.IndexFunc(minorDigits, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minorDigits = minorDigits[:i]
	}
	minor, err2 := strconv.Atoi(minorDigits)
	if err1 != nil || err2 != nil || major < 1 || minor < 0 {
		return Release{}, fmt.Errorf("%q is not a Kubernetes release such as 1.37", s)
	}
	return Release{major, minor}, nil
}

// NormalizeRelease spells a release the one way Sunset writes it: "v1.20"
// and "1.20.3" become "1.20". Text that is not a release (already reported
// by validation) and "" are returned as they are.
func NormalizeRelease(s string) string {
	r, err := ParseRelease(s)
	if err != nil {
		return s
	}
	return r.String()
}

// MustParseRelease is ParseRelease for constants; it panics on bad input.
func MustParseRelease(s string) Release {
	r, err := ParseRelease(s)
	if err != nil {
		panic(err)
	}
	return r
}

// IsZero reports whether the release is unknown.
func (r Release) IsZero() bool { return r == Release{} }

// Less reports whether r comes before o.
func (r Release) Less(o Release) bool {
	if r.Major != o.Major {
		return r.Major < o.Major
	}
	return r.Minor < o.Minor
}

// String is "1.37".
func (r Release) String() string {
	if r.IsZero() {
		return ""
	}
	return fmt.Sprintf("%d.%d", r.Major, r.Minor)
}

// Deprecated returns the release the entry was deprecated in; zero if none.
func (e Entry) Deprecated() Release {
	r, _ := ParseRelease(e.DeprecatedIn)
	return r
}

// Removed returns the release the entry is removed in; zero if none.
func (e Entry) Removed() Release {
	r, _ := ParseRelease(e.RemovedIn)
	return r
}

// Horizon is the last release the built-in catalog speaks for: the newest
// release any entry names (planned removals included) or was generated
// from. Past it, what a release removes is unknown.
func Horizon() (Release, error) {
	entries, err := Builtin()
	if err != nil {
		return Release{}, err
	}
	var h Release
	for _, e := range entries {
		// k8s.io/api v0.37.x is Kubernetes 1.37.
		generatedFrom := ""
		if v, ok := strings.CutPrefix(e.Source, "api@v0."); ok {
			generatedFrom = "1." + v
		}
		for _, s := range []string{e.IntroducedIn, e.DeprecatedIn, e.RemovedIn, generatedFrom} {
			if r, err := ParseRelease(s); err == nil && h.Less(r) {
				h = r
			}
		}
	}
	return h, nil
}
