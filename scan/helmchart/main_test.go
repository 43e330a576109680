package helmchart

import (
	"os"
	"testing"
)

// TestMain serves ChildArg as cmd/sunset's main does, so that a Child
// whose Command is empty re-executes this test binary as its renderer.
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == ChildArg {
		os.Exit(ServeChild(os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
