// Package plural spells counts in English messages.
package plural

// S is the "s" that follows a noun counted n times: "" for one, "s"
// otherwise, zero included ("0 requests").
func S(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
