//go:build !linux

package helmchart

import "syscall"

// childAttr is nothing special where a child cannot be tied to its
// parent's life; its own timer ends it.
func childAttr() *syscall.SysProcAttr { return nil }

// limitAddressSpace sets nothing where RLIMIT_AS is not enforced (macOS
// ignores it): the watchdog alone bounds the heap there.
func limitAddressSpace(uint64) {}
