// Package storetest fills a store for tests and benchmarks: requests
// committed as the committer commits them, answered with a duplicate flag
// each, as the store's older Apply did.
package storetest

import (
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/store"
)

// Apply commits reqs with cursors through Store.Commit and reports for
// each request whether it was a duplicate. A skipped request is not.
func Apply(s *store.Store, reqs []countkey.Request, cursors ...countkey.Cursor) ([]bool, error) {
	out, err := s.Commit(reqs, cursors...)
	if err != nil {
		return nil, err
	}
	dup := make([]bool, len(out))
	for i, o := range out {
		dup[i] = o.Duplicate
	}
	return dup, nil
}
