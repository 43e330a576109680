package countkey

import (
	"strings"
	"unicode/utf8"
)

// APIName is the APIRequestCount name of a resource: resource.version.group,
// or resource.version for the core group.
func APIName(group, version, resource string) string {
	if group == "" {
		return resource + "." + version
	}
	return resource + "." + version + "." + group
}

// SplitAPIName reverses APIName. Resources and versions never hold dots, so
// everything after the second dot is the group.
func SplitAPIName(name string) (group, version, resource string) {
	parts := strings.SplitN(name, ".", 3)
	switch len(parts) {
	case 3:
		return parts[2], parts[1], parts[0]
	case 2:
		return "", parts[1], parts[0]
	}
	return "", "", name
}

// Truncate cuts s to at most n bytes without splitting a UTF-8 character.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
