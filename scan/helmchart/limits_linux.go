package helmchart

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// childAttr has a child killed when its parent dies, so that a scan that
// is killed leaves no render running. (Linux sends it when the thread
// that started the child ends; Go's threads outlive their goroutines, and
// the child's own timer ends it a second past its timeout anyway.)
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// limitAddressSpace lets this process's address space grow at most extra
// bytes past what it maps now (RLIMIT_AS), or less if a lower limit is set
// already. A Go program maps most of its address space as reservations
// the moment it starts (about 1.2 GiB on linux/amd64), so the limit is
// counted from there. Without /proc it sets nothing: the watchdog still
// bounds the heap.
func limitAddressSpace(extra uint64) {
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return
	}
	field, _, _ := strings.Cut(string(statm), " ")
	pages, err := strconv.ParseUint(field, 10, 64)
	if err != nil {
		return
	}
	want := pages*uint64(os.Getpagesize()) + extra
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		return
	}
	if lim.Max < want {
		want = lim.Max
	}
	if lim.Cur < want {
		return
	}
	_ = syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: want, Max: want})
}
