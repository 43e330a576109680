// Package loopback gives tests a loopback address that nothing listens
// on, for a server that is not there or one a test starts later.
package loopback

import (
	"net"
	"testing"
)

// FreeAddr is 127.0.0.1:port for a port free a moment ago: the kernel
// chose it for a listener that is closed again before it returns.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free loopback port: %v", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// FreePort is FreeAddr's port.
func FreePort(t testing.TB) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(FreeAddr(t))
	n, err := net.LookupPort("tcp", port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
