package cloudwatchtest

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
)

// Fault is an error answer the proxy gives instead of passing a call to
// moto, in CloudWatch Logs' own form (awsJson1_1: the status, and a body
// with __type and message), so the SDK reads it as it would AWS's.
type Fault struct {
	Status  int
	Code    string
	Message string
}

// Throttling is the answer to a call over the account's FilterLogEvents
// quota (5 a second, shared by every caller in the account and Region).
func Throttling() Fault {
	return Fault{Status: http.StatusBadRequest, Code: "ThrottlingException", Message: "Rate exceeded"}
}

// AccessDenied is the answer to a caller whose policies do not allow
// action on the log group, with the message AWS writes, naming the
// group's ARN.
func AccessDenied(action, group string) Fault {
	return Fault{Status: http.StatusBadRequest, Code: "AccessDeniedException",
		Message: "User: arn:aws:sts::123456789012:assumed-role/sunset/i-0123456789abcdef0 is not authorized to perform: logs:" + action +
			" on resource: arn:aws:logs:" + Region + ":123456789012:log-group:" + group + ":log-stream: because no identity-based policy allows the logs:" + action + " action"}
}

// Fail makes the proxy answer the next n calls of op (an API name, such as
// "FilterLogEvents") with f instead of passing them on; n < 0 means every
// call until Clear. Faults given for one op are used in order.
func (s *Server) Fail(op string, n int, f Fault) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if n < 0 {
		s.faults.always[op] = f
		return
	}
	for range n {
		s.faults.pending[op] = append(s.faults.pending[op], f)
	}
}

// Clear drops the faults waiting for op.
func (s *Server) Clear(op string) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	delete(s.faults.pending, op)
	delete(s.faults.always, op)
}

// Calls is how many calls of op reached the proxy, failed ones included.
func (s *Server) Calls(op string) int {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return s.faults.calls[op]
}

type faults struct {
	mu      sync.Mutex
	calls   map[string]int
	pending map[string][]Fault
	always  map[string]Fault
}

// next counts a call of op and returns the fault to answer it with.
func (f *faults) next(op string) (Fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	if q := f.pending[op]; len(q) > 0 {
		f.pending[op] = q[1:]
		return q[0], true
	}
	fault, ok := f.always[op]
	return fault, ok
}

func (f *faults) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// awsJson1_1 names the operation in X-Amz-Target:
		// Logs_20140328.FilterLogEvents.
		target := r.Header.Get("X-Amz-Target")
		op := target[strings.LastIndexByte(target, '.')+1:]
		fault, ok := f.next(op)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		body, _ := json.Marshal(map[string]string{"__type": fault.Code, "message": fault.Message})
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("X-Amzn-RequestId", "cloudwatchtest-fault")
		w.WriteHeader(fault.Status)
		_, _ = w.Write(body)
	})
}
